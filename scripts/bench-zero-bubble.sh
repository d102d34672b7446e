#!/usr/bin/env bash
# bench-zero-bubble.sh measures the zero-bubble schedules against 1F1B at
# PP 2 on the medium model (8 micro-batches, in-process ranks, a core
# each): 1F1B and ZB-H1 on the even split (E ttt | ttt L), the interleaved
# schedule, ZB-V and DualPipeV on two chunks per rank (Et|tt|tt|tL),
# interleaved over ROUNDS rounds (default 6). It prints every run's
# tokens/s and bubble, then per schedule the median (min-max) of tokens/s,
# the median of each round's ratio to that round's 1F1B, and in how many
# rounds that ratio reached 1.05. OPENBLAS_CORETYPE is unset so OpenBLAS
# picks the machine's own kernel. It builds nothing: run make build.
#
#	scripts/bench-zero-bubble.sh [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-6}
bin=bin/gotron
[ -x "$bin" ] || { echo "bench-zero-bubble.sh: $bin is missing: run make build" >&2; exit 1; }
v='--pipeline-model-parallel-layout Et|tt|tt|tL'
schedules=(
	"1f1b|"
	"zb-h1|--pipeline-schedule zb-h1"
	"interleaved|$v"
	"zb-v|$v --pipeline-schedule zb-v"
	"dualpipev|$v --pipeline-schedule dualpipev"
)
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for r in $(seq "$rounds"); do
	for s in "${schedules[@]}"; do
		name=${s%%|*}
		flags=${s#*|}
		# shellcheck disable=SC2086
		line=$(env -u OPENBLAS_CORETYPE "$bin" bench --configs medium --pipeline-model-parallel-size 2 --num-microbatches 8 --iters 2 $flags |
			awk '$1 == "medium" { print $8, $12 }')
		echo "$r $name $line" | tee -a "$out"
	done
done
echo "schedule tokens/s: median (min-max); ratio to the round's 1F1B: median (min-max); rounds >= 1.05"
# the median (min-max) of the numbers on stdin
mmm() { sort -g | awk '{ v[NR] = $1 } END { if (NR) printf "%s (%s-%s)", v[int((NR + 1) / 2)], v[1], v[NR] }'; }
for s in "${schedules[@]}"; do
	name=${s%%|*}
	tok=$(awk -v n="$name" '$2 == n { print $3 }' "$out" | mmm)
	ratios=$(awk -v n="$name" '$2 == "1f1b" { b[$1] = $3 } $2 == n { t[$1] = $3 } END { for (r in t) printf "%.3f\n", t[r] / b[r] }' "$out")
	hit=$(printf '%s\n' "$ratios" | awk '$1 >= 1.05 { h++ } END { printf "%d of %d", h, NR }')
	printf '%-12s %s; %s; %s\n' "$name" "$tok" "$(printf '%s\n' "$ratios" | mmm)" "$hit"
done
