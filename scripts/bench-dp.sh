#!/usr/bin/env bash
# bench-dp.sh measures data parallelism at DP 2 under mpirun -np 2 (comm/mpi:
# one process per rank, one core each) on the medium model, 2 microbatches
# per replica per iteration, in three settings whose flags differ by one
# each:
#
#	sync     the default: the gradients reduced after backward, one bucket
#	overlap  --overlap-grad-reduce: each bucket reduced as soon as backward
#	         completes it; --ddp-bucket-size 3000000 gives the medium model
#	         7 buckets (about a layer each, the embeddings in the last);
#	         without the overlap the size is ignored (one bucket), so
#	         every setting passes it
#	distopt  --use-distributed-optimizer: gradients reduce-scattered after
#	         backward, each rank's Adam update of its half, the parameters
#	         all-gathered
#	zero2    --use-megatron-fsdp --data-parallel-sharding-strategy
#	         optim_grads: each layer's gradients reduce-scattered into
#	         shards after every micro-batch as backward completes them
#	zero3    --use-megatron-fsdp (optim_grads_params): each layer's
#	         parameters gathered for its forward and backward, the next
#	         one prefetched, and released after
#
# and the first three with --bf16 (bf16-sync, bf16-overlap, bf16-distopt:
# bfloat16 parameters, float32 gradients, the parameter all-gather in
# bfloat16),
#
# interleaved over ROUNDS rounds (default 3). It prints every run's
# `gotron bench` line, then the median and range per setting of tokens/s,
# the iteration's time, and the optimizer step's two parts: the Adam update
# and the distributed optimizer's parameter all-gather (timed after the
# timed iterations, on their last gradients). OPENBLAS_CORETYPE is unset
# for these commands so OpenBLAS picks the machine's own kernel. It builds
# nothing: make bench builds bin/gotron-mpi.
#
#	scripts/bench-dp.sh [ROUNDS]
#	SETTINGS=distopt,zero2,zero3 scripts/bench-dp.sh [ROUNDS]   only those
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
bin=bin/gotron-mpi
[ -x "$bin" ] || { echo "bench-dp.sh: $bin is missing: run make build-mpi" >&2; exit 1; }
# mpirun flags as comm/mpi/run_tests.sh explains them.
mpirun=(mpirun --allow-run-as-root --oversubscribe --bind-to none --mca btl self,vader -np 2)
common="--configs medium --num-microbatches 2 --ddp-bucket-size 3000000"
out=$(mktemp)
trap 'rm -f "$out"' EXIT
settings=(
	"sync|"
	"overlap|--overlap-grad-reduce"
	"distopt|--use-distributed-optimizer"
	"zero2|--use-megatron-fsdp --data-parallel-sharding-strategy optim_grads"
	"zero3|--use-megatron-fsdp"
	"bf16-sync|--bf16"
	"bf16-overlap|--bf16 --overlap-grad-reduce"
	"bf16-distopt|--bf16 --use-distributed-optimizer"
)
if [ -n "${SETTINGS:-}" ]; then
	keep=()
	for s in "${settings[@]}"; do
		case ",$SETTINGS," in *",${s%%|*},"*) keep+=("$s") ;; esac
	done
	settings=("${keep[@]}")
fi
for r in $(seq "$rounds"); do
	for s in "${settings[@]}"; do
		name=${s%%|*}
		flags=${s#*|}
		# shellcheck disable=SC2086
		env -u OPENBLAS_CORETYPE "${mpirun[@]}" "$bin" bench --backend mpi $common $flags |
			awk -v n="$name" -v r="$r" 'NR==1 { print "# round " r ": " $0; next } NR>2 { print n, $0 }' | tee -a "$out"
	done
done
# the values of column $2 of the lines of "$out" whose first field is $1, sorted
vals() { awk -v k="$1" -v c="$2" '!/^#/ && $1 == k { print $c }' "$out" | sort -g; }
# median (min-max) of those values
stat() { vals "$1" "$2" | awk '{ v[NR] = $1 } END { if (NR) printf "%s (%s-%s)", v[int((NR + 1) / 2)], v[1], v[NR] }'; }
med() { vals "$1" "$2" | awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)] }'; }
echo
printf "%-12s %-26s %-26s %-8s %-24s %s\n" setting "tokens/s median (min-max)" "step ms median (min-max)" buckets "adam ms median (min-max)" "gather ms median (min-max)"
for s in "${settings[@]}"; do
	name=${s%%|*}
	b=$(awk -v k="$name" '!/^#/ && $1 == k { v = $16 } END { print v }' "$out")
	printf "%-12s %-26s %-26s %-8s %-24s %s\n" "$name" "$(stat "$name" 9)" "$(stat "$name" 12)" "$b" "$(stat "$name" 17)" "$(stat "$name" 18)"
done
for p in "" bf16-; do
	[ -n "$(med "${p}sync" 9)" ] && [ -n "$(med "${p}overlap" 9)" ] && [ -n "$(med "${p}distopt" 9)" ] || continue
	awk -v p="$p" -v s="$(med "${p}sync" 9)" -v o="$(med "${p}overlap" 9)" -v a="$(med "${p}sync" 17)" -v da="$(med "${p}distopt" 17)" -v dg="$(med "${p}distopt" 18)" 'BEGIN {
		printf "%soverlap / %ssync tokens/s (medians): %.1f%%\n", p, p, 100 * o / s
		printf "%soptimizer step (medians): unsharded Adam %.1f ms; distributed optimizer %.1f ms Adam (%.0f%%) + %.1f ms all-gather = %.1f ms\n", p, a, da, 100 * da / a, dg, da + dg
	}'
done
if [ -n "$(med distopt 9)" ] && [ -n "$(med zero2 9)" ] && [ -n "$(med zero3 9)" ]; then
	awk -v d="$(med distopt 9)" -v z2="$(med zero2 9)" -v z3="$(med zero3 9)" 'BEGIN {
		printf "Megatron-FSDP tokens/s over the distributed optimizer'"'"'s (medians): ZeRO-2 %.2f, ZeRO-3 %.2f\n", z2 / d, z3 / d
	}'
fi
