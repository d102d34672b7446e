#!/usr/bin/env bash
# bench-precision.sh measures mixed precision against float32 on one rank
# (two cores), on the small and medium models, side by side in one run:
#
#	fp32  the default: float32 parameters and GEMMs (OpenBLAS)
#	bf16  --bf16: bfloat16 parameters and GEMM inputs (oneDNN on AVX-512
#	      BF16), float32 main parameters and gradients
#
# interleaved over ROUNDS rounds (default 3). It prints every run's
# `gotron bench` line, then per model and setting the median and range of
# tokens/s, the iteration's time and the peak memory, and bf16/fp32 of
# the median tokens/s. OPENBLAS_CORETYPE is unset for these commands so
# OpenBLAS picks the machine's own kernel (float32 at its best). It builds
# nothing: make bench builds bin/gotron.
#
#	scripts/bench-precision.sh [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
bin=bin/gotron
[ -x "$bin" ] || { echo "bench-precision.sh: $bin is missing: run make build" >&2; exit 1; }
out=$(mktemp)
trap 'rm -f "$out"' EXIT
settings=("fp32|" "bf16|--bf16")
for r in $(seq "$rounds"); do
	for s in "${settings[@]}"; do
		name=${s%%|*}
		flags=${s#*|}
		# shellcheck disable=SC2086
		env -u OPENBLAS_CORETYPE "$bin" bench --configs small,medium --iters 5 $flags |
			awk -v n="$name" -v r="$r" 'NR==1 { print "# round " r ": " $0; next } NR>2 { print n, $0 }' | tee -a "$out"
	done
done
# shellcheck source=scripts/stats.sh
. scripts/stats.sh
echo
printf "%-7s %-8s %-26s %-26s %s\n" model setting "tokens/s median (min-max)" "step ms median (min-max)" "peak MiB median (min-max)"
for m in small medium; do
	for s in "${settings[@]}"; do
		name=${s%%|*}
		printf "%-7s %-8s %-26s %-26s %s\n" "$m" "$name" "$(stat "$name" "$m" 9)" "$(stat "$name" "$m" 12)" "$(stat "$name" "$m" 11)"
	done
	awk -v m="$m" -v f="$(med fp32 "$m" 9)" -v b="$(med bf16 "$m" 9)" 'BEGIN { printf "%s: bf16 / fp32 tokens/s (medians): %.2fx\n", m, b / f }'
done
