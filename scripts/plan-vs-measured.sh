#!/usr/bin/env bash
# plan-vs-measured.sh compares gotron plan's predictions with gotron's own
# measured runs on this machine: it calibrates the machine (gotron plan
# --calibrate: a device a core), then, for each layout of the medium model
# (float32, in-process ranks, a core each: --threads is the ranks), runs
# `gotron bench` and `gotron
# plan` on the calibrated description, interleaved over ROUNDS rounds
# (default 2), and prints the measured iteration (median and range), the
# prediction and its error, and the peak memory: the process's measured
# peak resident set beside the plan's sum over the ranks. OPENBLAS_CORETYPE
# is unset so OpenBLAS picks the machine's own kernel. It builds nothing:
# run make build first.
#
#	scripts/plan-vs-measured.sh [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-2}
bin=bin/gotron
[ -x "$bin" ] || { echo "plan-vs-measured.sh: $bin is missing: run make build" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
hw=$tmp/here.json
env -u OPENBLAS_CORETYPE "$bin" plan --calibrate "$hw" >/dev/null
medium="--num-layers 6 --hidden-size 512 --num-attention-heads 8 --seq-length 512 --vocab-size 8192 --hidden-dropout 0 --attention-dropout 0 --micro-batch-size 4"
# medium-moe: medium shaped as Llama, 8 experts of width 672, 2 a token.
moe="$medium --normalization RMSNorm --swiglu --position-embedding-type rope --group-query-attention --num-query-groups 4"
moe="$moe --untie-embeddings-and-output-weights --disable-bias-linear --num-experts 8 --moe-router-topk 2 --moe-ffn-hidden-size 672"
moe="$moe --moe-aux-loss-coeff 0.01 --moe-grouped-gemm"
# NAME|BENCH FLAGS|PLAN FLAGS
layouts=(
	"one-rank|--configs medium --threads 1|$medium --world-size 1 --global-batch-size 4"
	"tp2-sp|--threads 2 --configs medium --tensor-model-parallel-size 2 --sequence-parallel|$medium --world-size 2 --tensor-model-parallel-size 2 --sequence-parallel --global-batch-size 4"
	"pp2|--threads 2 --configs medium --pipeline-model-parallel-size 2 --num-microbatches 4|$medium --world-size 2 --pipeline-model-parallel-size 2 --global-batch-size 16"
	"pp2-vpp3|--threads 2 --configs medium --pipeline-model-parallel-size 2 --virtual-pipeline-model-parallel-size 3 --num-microbatches 4|$medium --world-size 2 --pipeline-model-parallel-size 2 --virtual-pipeline-model-parallel-size 3 --global-batch-size 16"
	"dp2-distopt|--threads 2 --configs medium --data-parallel-size 2 --num-microbatches 2 --use-distributed-optimizer|$medium --world-size 2 --global-batch-size 16 --use-distributed-optimizer"
	"cp2|--threads 2 --configs medium --context-parallel-size 2|$medium --world-size 2 --context-parallel-size 2 --global-batch-size 4"
	"zb-h1-pp2|--threads 2 --configs medium --pipeline-model-parallel-size 2 --num-microbatches 4 --pipeline-schedule zb-h1|$medium --world-size 2 --pipeline-model-parallel-size 2 --global-batch-size 16 --pipeline-schedule zb-h1"
	"moe-ep2|--threads 2 --configs medium-moe --data-parallel-size 2 --expert-model-parallel-size 2|$moe --world-size 2 --expert-model-parallel-size 2 --global-batch-size 8"
)
out=$tmp/out
: >"$out"
for r in $(seq "$rounds"); do
	for l in "${layouts[@]}"; do
		IFS='|' read -r name bflags pflags <<<"$l"
		# shellcheck disable=SC2086
		line=$(env -u OPENBLAS_CORETYPE "$bin" bench --iters 3 $bflags | awk '$1 ~ /^medium/ { print $10, $11 }')
		echo "$name $line" >>"$out"
		echo "round $r: $name: peak MiB, step ms: $line" >&2
	done
done
printf '%-14s %22s %12s %8s %16s %14s\n' layout "measured ms" "planned ms" error "measured MiB" "planned MiB"
for l in "${layouts[@]}"; do
	IFS='|' read -r name bflags pflags <<<"$l"
	# shellcheck disable=SC2086
	json=$("$bin" plan $pflags --hardware "$hw" --json || true)
	planned=$(printf '%s' "$json" | python3 -c 'import json,sys; p=json.load(sys.stdin); print(round(1000*p["iteration_seconds"],1), round(sum(r["memory_bytes"] for r in p["ranks"])*p["tp"]*p["cp"]*p["dp"]/2**20))')
	ms=$(awk -v k="$name" '$1 == k { print $3 }' "$out" | sort -g | awk '{ v[NR] = $1 } END { printf "%s %s %s", v[int((NR + 1) / 2)], v[1], v[NR] }')
	mib=$(awk -v k="$name" '$1 == k { print $2 }' "$out" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }')
	read -r med lo hi <<<"$ms"
	read -r pms pmib <<<"$planned"
	err=$(awk -v p="$pms" -v m="$med" 'BEGIN { printf "%+.1f%%", 100 * (p / m - 1) }')
	printf '%-14s %22s %12s %8s %16s %14s\n' "$name" "$med ($lo-$hi)" "$pms" "$err" "$mib" "$pmib"
done
