#!/usr/bin/env bash
# bench-precision.sh measures mixed precision against float32 on one rank
# (two cores), on the small and medium models, side by side in one run:
#
#	fp32  the default: float32 parameters and GEMMs
#	bf16  --bf16: bfloat16 parameters and GEMM inputs, float32 main
#	      parameters and gradients; the GEMMs native or widened to float32
#	      as dnnl.Plan decides on this machine (the header names it)
#
# and, on a CPU with AMX, the same two with oneDNN held to AVX-512 BF16
# (ONEDNN_MAX_CPU_ISA=AVX512_CORE_BF16, what a Cooper Lake Xeon runs:
# there the plan widens), fp32-noamx and bf16-noamx. Interleaved over
# ROUNDS rounds (default 3). It prints every run's `gotron bench` line,
# then per model and setting the median and range of tokens/s, the
# iteration's time, the first iteration's and the peak memory, and
# bf16/fp32 of the median tokens/s. OPENBLAS_CORETYPE is unset for these
# commands so gotron picks OpenBLAS's kernel itself. It builds nothing:
# make bench builds bin/gotron.
#
#	scripts/bench-precision.sh [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
bin=bin/gotron
[ -x "$bin" ] || { echo "bench-precision.sh: $bin is missing: run make build" >&2; exit 1; }
out=$(mktemp)
trap 'rm -f "$out"' EXIT
settings=("fp32||" "bf16|--bf16|")
if grep -qw amx_bf16 /proc/cpuinfo; then
	settings+=("fp32-noamx||ONEDNN_MAX_CPU_ISA=AVX512_CORE_BF16" "bf16-noamx|--bf16|ONEDNN_MAX_CPU_ISA=AVX512_CORE_BF16")
fi
for r in $(seq "$rounds"); do
	for s in "${settings[@]}"; do
		IFS='|' read -r name flags envs <<<"$s"
		# shellcheck disable=SC2086
		env -u OPENBLAS_CORETYPE $envs "$bin" bench --configs small,medium --iters 5 $flags |
			awk -v n="$name" -v r="$r" 'NR==1 { print "# round " r ": " $0; next } NR>2 { print n, $0 }' | tee -a "$out"
	done
done
# shellcheck source=scripts/stats.sh
. scripts/stats.sh
echo
printf "%-7s %-11s %-26s %-26s %-26s %s\n" model setting "tokens/s median (min-max)" "step ms median (min-max)" "first ms median (min-max)" "peak MiB median (min-max)"
for m in small medium; do
	for s in "${settings[@]}"; do
		name=${s%%|*}
		printf "%-7s %-11s %-26s %-26s %-26s %s\n" "$m" "$name" "$(stat "$name" "$m" 9)" "$(stat "$name" "$m" 12)" "$(stat "$name" "$m" 19)" "$(stat "$name" "$m" 11)"
	done
	awk -v m="$m" -v f="$(med fp32 "$m" 9)" -v b="$(med bf16 "$m" 9)" 'BEGIN { printf "%s: bf16 / fp32 tokens/s (medians): %.2fx\n", m, b / f }'
	if grep -qw amx_bf16 /proc/cpuinfo; then
		awk -v m="$m" -v f="$(med fp32-noamx "$m" 9)" -v b="$(med bf16-noamx "$m" 9)" 'BEGIN { printf "%s: without AMX, bf16 / fp32 tokens/s (medians): %.2fx\n", m, b / f }'
	fi
done
