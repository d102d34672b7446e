#!/usr/bin/env bash
# bench-moe.sh measures the MoE model against the dense model of the same
# active size, and expert parallelism against one rank, in one run
# interleaved over ROUNDS rounds (default 3): medium-llama (6 layers,
# hidden 512, 8 heads, sequence 512, vocabulary 8192, micro-batch 4,
# SwiGLU ffn 1344) and medium-moe (the same with 8 experts of width 672 in
# every layer, top-2, the grouped GEMM: the active MLP is medium-llama's)
# on one rank with two cores, then medium-moe with its experts over 2
# in-process ranks (expert parallel 2 with the all-to-all dispatcher, one
# core each, data parallel 2 for the dense part). It prints every run's
# `gotron bench` line, the median and range of GFLOP/s (active weights
# only for the MoE model: bench.Config.FLOPs) and tokens/s, and the two
# ratios the MoE work aims at: medium-moe / medium-llama GFLOP/s (target
# 0.80) and EP 2 / one rank tokens/s (target 0.85). OPENBLAS_CORETYPE is
# unset for these commands so OpenBLAS picks the machine's own kernel. It
# builds nothing: make bench builds bin/gotron.
#
#	scripts/bench-moe.sh [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
bin=bin/gotron
[ -x "$bin" ] || { echo "bench-moe.sh: $bin is missing: run make build" >&2; exit 1; }
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for r in $(seq "$rounds"); do
	for m in medium-llama medium-moe; do
		env -u OPENBLAS_CORETYPE "$bin" bench --configs "$m" --iters 5 |
			awk -v r="$r" 'NR==1 { print "# round " r ": " $0; next } NR>2 { print "one", $0 }' | tee -a "$out"
	done
	env -u OPENBLAS_CORETYPE "$bin" bench --configs medium-moe --iters 5 --expert-model-parallel-size 2 \
		--data-parallel-size 2 --moe-token-dispatcher-type alltoall |
		awk -v r="$r" 'NR==1 { print "# round " r ": " $0; next } NR>2 { print "ep2", $0 }' | tee -a "$out"
done
# shellcheck source=scripts/stats.sh
. scripts/stats.sh
echo
printf "%-18s %-26s %s\n" run "GFLOP/s median (min-max)" "tokens/s median (min-max)"
for m in medium-llama medium-moe; do
	printf "%-18s %-26s %s\n" "$m" "$(stat one "$m" 10)" "$(stat one "$m" 9)"
done
printf "%-18s %-26s %s\n" "medium-moe EP 2" "$(stat ep2 medium-moe 10)" "$(stat ep2 medium-moe 9)"
awk -v d="$(med one medium-llama 10)" -v m="$(med one medium-moe 10)" 'BEGIN { printf "medium-moe / medium-llama GFLOP/s (medians): %.2f (target 0.80)\n", m / d }'
awk -v o="$(med one medium-moe 9)" -v e="$(med ep2 medium-moe 9)" 'BEGIN { printf "EP 2 / one rank tokens/s (medians): %.2f (target 0.85)\n", e / o }'
