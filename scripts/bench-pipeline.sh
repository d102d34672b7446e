#!/usr/bin/env bash
# bench-pipeline.sh measures pipeline parallelism against one rank on the
# same global batch of 8 microbatches: one rank using both cores, PP 2
# (1F1B), PP 2 under the zero-bubble ZB-H1 and ZB-H2 schedules, PP 2 under 1F1B with
# the output layer's weight gradients deferred to the flush, and PP 2 with 2 model
# chunks per stage (interleaved 1F1B, small model: its 4 layers split into
# 4 chunks), each as in-process ranks with one core each, interleaved over
# ROUNDS rounds (default 3). It prints every
# run's `gotron bench` line, then the median and range of tokens/s and of
# the measured bubble (the busiest rank's idle time) and of the mean idle
# time of the ranks per layout. OPENBLAS_CORETYPE is unset so OpenBLAS
# picks the machine's own kernel.
#
#	scripts/bench-pipeline.sh [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
bin=bin/gotron
out=$(mktemp)
trap 'rm -f "$out"' EXIT
layouts=(
	"one-rank|--num-microbatches 8"
	"pp2|--pipeline-model-parallel-size 2 --num-microbatches 8"
	"pp2-zbh1|--pipeline-model-parallel-size 2 --num-microbatches 8 --pipeline-schedule zb-h1"
	"pp2-zbh2|--pipeline-model-parallel-size 2 --num-microbatches 8 --pipeline-schedule zb-h2"
	"pp2-defer|--pipeline-model-parallel-size 2 --num-microbatches 8 --defer-embedding-wgrad-compute"
	"pp2-vpp2|--pipeline-model-parallel-size 2 --virtual-pipeline-model-parallel-size 2 --num-microbatches 8"
)
for r in $(seq "$rounds"); do
	for l in "${layouts[@]}"; do
		name=${l%%|*}
		flags=${l#*|}
		configs="small,medium"
		[ "$name" = pp2-vpp2 ] && configs=small
		# shellcheck disable=SC2086
		env -u OPENBLAS_CORETYPE "$bin" bench --configs "$configs" $flags |
			awk -v n="$name" -v r="$r" 'NR==1 { print "# round " r ": " $0; next } NR>2 { print n, $0 }' | tee -a "$out"
	done
done
# median (min-max) of column $3 of the lines of "$out" whose first two fields are $1 $2
stat() {
	awk -v k="$1 $2" -v c="$3" '!/^#/ && $1 " " $2 == k { v = $c; sub("%", "", v); print v }' "$out" | sort -g |
		awk '{ v[NR] = $1 } END { if (NR) printf "%s (%s-%s)", v[int((NR + 1) / 2)], v[1], v[NR] }'
}
echo
printf "%-9s %-7s %-28s %-22s %-7s %s\n" layout config "tokens/s median (min-max)" "bubble % median (min-max)" "theory" "idle % median (min-max)"
for l in "${layouts[@]}"; do
	name=${l%%|*}
	for c in small medium; do
		t=$(stat "$name" "$c" 9)
		[ -z "$t" ] && continue
		th=$(awk -v k="$name $c" '!/^#/ && $1 " " $2 == k { v = $14 } END { print v }' "$out")
		printf "%-9s %-7s %-28s %-22s %-7s %s\n" "$name" "$c" "$t" "$(stat "$name" "$c" 13)" "$th" "$(stat "$name" "$c" 15)"
	done
done
