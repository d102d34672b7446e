#!/usr/bin/env bash
# bench-llama.sh measures the Llama-shaped model against the GPT-2-shaped
# one on one rank (two cores), side by side in one run: the medium
# configuration (6 layers, hidden 512, 8 heads, sequence 512, vocabulary
# 8192, micro-batch 4) and medium-llama, the same sizes with RMSNorm,
# SwiGLU (ffn 1344), RoPE, 4 query groups, an untied output layer and no
# biases, interleaved over ROUNDS rounds (default 3). It prints every run's
# `gotron bench` line, then per model the median and range of GFLOP/s
# (each model's own FLOPs: bench.Config.FLOPs) and tokens/s, and
# medium-llama/medium of the median GFLOP/s. OPENBLAS_CORETYPE is unset
# for these commands so OpenBLAS picks the machine's own kernel. It builds
# nothing: make bench builds bin/gotron.
#
#	scripts/bench-llama.sh [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
bin=bin/gotron
[ -x "$bin" ] || { echo "bench-llama.sh: $bin is missing: run make build" >&2; exit 1; }
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for r in $(seq "$rounds"); do
	for m in medium medium-llama; do
		env -u OPENBLAS_CORETYPE "$bin" bench --configs "$m" --iters 5 |
			awk -v r="$r" 'NR==1 { print "# round " r ": " $0; next } NR>2 { print "fp32", $0 }' | tee -a "$out"
	done
done
# shellcheck source=scripts/stats.sh
. scripts/stats.sh
echo
printf "%-13s %-26s %s\n" model "GFLOP/s median (min-max)" "tokens/s median (min-max)"
for m in medium medium-llama; do
	printf "%-13s %-26s %s\n" "$m" "$(stat fp32 "$m" 10)" "$(stat fp32 "$m" 9)"
done
awk -v g="$(med fp32 medium 10)" -v l="$(med fp32 medium-llama 10)" 'BEGIN { printf "medium-llama / medium GFLOP/s (medians): %.2f (target 0.95)\n", l / g }'
