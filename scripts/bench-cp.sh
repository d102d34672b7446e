#!/usr/bin/env bash
# bench-cp.sh measures context parallelism against one rank on the long
# configuration (4 layers, hidden 256, one sequence of 4096 tokens): one
# rank using both cores, then CP 2 with each attention type (p2p ring,
# all_gather, a2a) as two in-process ranks with one core each, interleaved
# over ROUNDS rounds (default 3). It prints every run's `gotron bench` line,
# then per layout the median and range of tokens/s, its ratio to one rank's
# median, and the share of the step the ring spent waiting on receives.
# OPENBLAS_CORETYPE is unset so OpenBLAS picks the machine's own kernel.
#
#	scripts/bench-cp.sh [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
bin=bin/gotron
out=$(mktemp)
trap 'rm -f "$out"' EXIT
layouts=(
	"one-rank|"
	"cp2-p2p|--context-parallel-size 2 --cp-comm-type p2p"
	"cp2-all_gather|--context-parallel-size 2 --cp-comm-type all_gather"
	"cp2-a2a|--context-parallel-size 2 --cp-comm-type a2a"
)
for r in $(seq "$rounds"); do
	for l in "${layouts[@]}"; do
		name=${l%%|*}
		flags=${l#*|}
		# shellcheck disable=SC2086
		env -u OPENBLAS_CORETYPE "$bin" bench --configs long --iters 3 $flags |
			awk -v n="$name" -v r="$r" 'NR==1 { print "# round " r ": " $0; next } NR>2 { print n, $0 }' | tee -a "$out"
	done
done
# median (min-max) of column $2 of the lines of "$out" whose first field is $1
stat() {
	awk -v k="$1" -v c="$2" '!/^#/ && $1 == k { v = $c; sub("%", "", v); print v }' "$out" | sort -g |
		awk '{ v[NR] = $1 } END { if (NR) printf "%s (%s-%s)", v[int((NR + 1) / 2)], v[1], v[NR] }'
}
median() { stat "$1" "$2" | awk '{ print $1 }'; }
base=$(median one-rank 9)
echo
printf "%-15s %-28s %-10s %s\n" layout "tokens/s median (min-max)" "vs 1 rank" "cp wait % median (min-max)"
for l in "${layouts[@]}"; do
	name=${l%%|*}
	printf "%-15s %-28s %-10s %s\n" "$name" "$(stat "$name" 9)" "$(awk -v a="$(median "$name" 9)" -v b="$base" 'BEGIN { printf "%.2f", a / b }')" "$(stat "$name" 20)"
done
