#!/usr/bin/env bash
# bench-coretype.sh measures gotron's float32 training throughput with
# OpenBLAS's kernel chosen four ways, side by side in one run: unset
# (gotron picks it from the CPU's features, blas.CoreTypeFor), Cooperlake
# and SkylakeX set by hand (the AVX-512 kernels), and Prescott (OpenBLAS's
# generic kernel, its fallback on a CPU model it does not know). One rank
# on both cores, bin/gotron bench --configs small,medium --iters 5,
# interleaved over ROUNDS rounds (default 3); it prints every run's line,
# then per model and setting the median (min-max) of tokens/s, and out of
# the box over the best hand-set median. It builds nothing: make bench
# builds bin/gotron.
#
#	scripts/bench-coretype.sh [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
bin=bin/gotron
[ -x "$bin" ] || { echo "bench-coretype.sh: $bin is missing: run make build" >&2; exit 1; }
out=$(mktemp)
trap 'rm -f "$out"' EXIT
settings=(unset Cooperlake SkylakeX Prescott)
for r in $(seq "$rounds"); do
	for s in "${settings[@]}"; do
		if [ "$s" = unset ]; then envs=(env -u OPENBLAS_CORETYPE); else envs=(env OPENBLAS_CORETYPE="$s"); fi
		"${envs[@]}" "$bin" bench --configs small,medium --iters 5 |
			awk -v n="$s" -v r="$r" 'NR==1 { print "# round " r ": " $0; next } NR>2 { print n, $0 }' | tee -a "$out"
	done
done
# shellcheck source=scripts/stats.sh
. scripts/stats.sh
echo
printf "%-7s %-11s %s\n" model setting "tokens/s median (min-max)"
for m in small medium; do
	for s in "${settings[@]}"; do
		printf "%-7s %-11s %s\n" "$m" "$s" "$(stat "$s" "$m" 9)"
	done
	awk -v m="$m" -v u="$(med unset "$m" 9)" -v c="$(med Cooperlake "$m" 9)" -v k="$(med SkylakeX "$m" 9)" -v p="$(med Prescott "$m" 9)" \
		'BEGIN { b = c > k ? c : k; printf "%s: out of the box / best hand-set kernel %.2fx; Prescott / out of the box %.2fx\n", m, u / b, p / u }'
done
