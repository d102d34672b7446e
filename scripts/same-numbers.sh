#!/usr/bin/env bash
# Checks that two gotron binaries compute the same numbers, bit for bit: a
# refactor or a speed change must not move a loss or a gradient by one bit
# unless its commit explains why.
#
#   scripts/same-numbers.sh OLD_BINARY NEW_BINARY
#
# e.g. after building the commit before a change into /tmp/gotron-old:
#
#   git worktree add /tmp/old HEAD~1 && (cd /tmp/old && GOEXPERIMENT=simd go build -o /tmp/gotron-old ./cmd/gotron)
#   make build && scripts/same-numbers.sh /tmp/gotron-old bin/gotron
#
# Each case trains a small GPT on mock data for 4 iterations with both
# binaries and compares every iteration's record (--log-json: loss, grad
# norm, learning rate, loss scale, memory; timings left out) and the first
# iteration's gradients (--dump-grads, each tensor byte for byte; a
# resumed run has none). The cases: one rank
# in fp32, bf16 and fp16, dropout on, TP 2 with sequence parallelism, PP 2
# with VPP 2, DP 2 with the distributed optimizer and overlapped
# reductions, CP 2, EP 2 with a MoE model, a Llama-style model, and a
# resume across layouts (saved under PP 2, loaded under TP 2). Exit status
# 1 if any case differs or fails. About a minute on two cores.
set -euo pipefail

if [[ $# -ne 2 || ! -x $1 || ! -x $2 ]]; then
	echo "usage: $0 OLD_BINARY NEW_BINARY (two gotron executables)" >&2
	exit 2
fi
old=$1 new=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

base=(--mock-data --vocab-size 256 --num-layers 4 --hidden-size 64 --num-attention-heads 4
	--seq-length 64 --micro-batch-size 4 --global-batch-size 16 --train-iters 4 --lr 2e-3 --lr-decay-iters 4
	--log-interval 1 --hidden-dropout 0 --attention-dropout 0)
cases=(
	""
	"--bf16"
	"--fp16"
	"--attention-dropout 0.1 --hidden-dropout 0.1"
	"--world-size 2 --tensor-model-parallel-size 2 --sequence-parallel"
	"--world-size 2 --pipeline-model-parallel-size 2 --virtual-pipeline-model-parallel-size 2"
	"--world-size 2 --use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather"
	"--world-size 2 --context-parallel-size 2"
	"--world-size 2 --expert-model-parallel-size 2 --num-experts 4 --moe-router-topk 2 --moe-aux-loss-coeff 0.01 --moe-z-loss-coeff 0.001 --disable-bias-linear"
	"--swiglu --normalization RMSNorm --position-embedding-type rope --group-query-attention --num-query-groups 2"
	"resume"
)

# run BINARY TAG FLAGS...: one case's records and gradients under $work/TAG.
run() {
	local bin=$1 tag=$2
	shift 2
	env -u OPENBLAS_CORETYPE "$bin" train "${base[@]}" "$@" \
		--log-json "$work/$tag.json" --dump-grads "$work/$tag.grads" >"$work/$tag.log" 2>&1
}

# resume BINARY TAG: 2 iterations saved under PP 2, 2 more loaded under TP 2.
resume() {
	local bin=$1 tag=$2
	run "$bin" "$tag.save" --world-size 2 --pipeline-model-parallel-size 2 --train-iters 2 --save "$work/$tag.ckpt" &&
		run "$bin" "$tag" --world-size 2 --tensor-model-parallel-size 2 --load "$work/$tag.ckpt"
}

# same A B: the two runs' records (without timings) and gradients agree.
same() {
	python3 - "$1" "$2" <<'EOF'
import json, sys
def load(p):
    rows = [json.loads(l) for l in open(p + ".json")]
    for r in rows:
        for k in ("tokens_per_s", "step_ms"):
            r.pop(k, None)
    try:  # a resumed run dumps none: its first iteration is not 1
        return rows, tensors(open(p + ".grads", "rb").read())
    except FileNotFoundError:
        return rows, None
def tensors(b):
    # safetensors: an 8-byte header length, the JSON header, the data; the
    # tensors by name, each its dtype, shape and bytes (the file's order
    # of tensors is not compared)
    n = int.from_bytes(b[:8], "little")
    head, data = json.loads(b[8:8 + n]), b[8 + n:]
    head.pop("__metadata__", None)
    return {k: (v["dtype"], v["shape"], data[v["data_offsets"][0]:v["data_offsets"][1]]) for k, v in head.items()}
(ra, ga), (rb, gb) = load(sys.argv[1]), load(sys.argv[2])
if ra != rb:
    for x, y in zip(ra, rb):
        if x != y:
            print("    first differing record:\n      old", x, "\n      new", y)
            break
    sys.exit(1)
if ga != gb:
    print("    the first iteration's gradients differ")
    sys.exit(1)
EOF
}

status=0
for i in "${!cases[@]}"; do
	c=${cases[$i]}
	ok=1
	for side in old new; do
		bin=$old
		[[ $side == new ]] && bin=$new
		if [[ $c == resume ]]; then
			resume "$bin" "$side$i" || ok=0
		else
			# shellcheck disable=SC2086 # the case is a list of flags
			run "$bin" "$side$i" $c || ok=0
		fi
		if [[ $ok == 0 ]]; then
			echo "FAILED  ${c:-one rank, fp32} ($side: $(tail -1 "$work/$side$i.log"))"
			status=1
			continue 2
		fi
	done
	if same "$work/old$i" "$work/new$i"; then
		echo "same    ${c:-one rank, fp32}"
	else
		echo "DIFFER  ${c:-one rank, fp32}"
		status=1
	fi
done
exit $status
