#!/usr/bin/env bash
# bench-torch.sh measures gotron's training throughput (gotron bench, one rank
# on both cores, fp32) beside PyTorch's (tools/torchref/bench.py, the same
# small and medium models, 2 threads, fp32) run two ways, side by side in one
# run:
#
#	gotron   bin/gotron bench --configs small,medium --iters 5 (fp32, one rank)
#	untuned  Debian's python3-torch as installed: its
#	         pthreads OpenBLAS, glibc malloc, torch.set_num_threads(2)
#	tuned    PyTorch at its best on this CPU (bench.py --tuned): the OpenMP
#	         build of OpenBLAS preloaded (one OpenMP pool for ATen and BLAS),
#	         jemalloc without page decay, every thread count 2 before start-up
#	         (bench.py's doc says what else was tried and left out)
#
# interleaved over ROUNDS rounds (default 3). It prints every run's header
# (the BLAS and allocator actually loaded, the thread settings) and result
# lines, then per model and variant the median and range of tokens/s, the
# step's time and the peak resident memory, and gotron/tuned and
# tuned/untuned of the median tokens/s. OPENBLAS_CORETYPE is unset for all,
# so OpenBLAS picks the machine's own kernel. scripts/deps.sh torchbench
# installs what it needs; make bench builds bin/gotron.
#
#	scripts/bench-torch.sh [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
scripts/deps.sh torchbench
py=/usr/bin/python3
bench=tools/torchref/bench.py
openblas=/usr/lib/x86_64-linux-gnu/openblas-openmp/libopenblas.so.0
jemalloc=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2
tuned_env=(
	LD_PRELOAD="$openblas:$jemalloc"
	LD_LIBRARY_PATH="$(dirname "$openblas")"
	MALLOC_CONF=background_thread:false,dirty_decay_ms:-1,muzzy_decay_ms:-1
	OMP_NUM_THREADS=2 OPENBLAS_NUM_THREADS=2 GOTO_NUM_THREADS=2 MKL_NUM_THREADS=2
)
out=$(mktemp)
trap 'rm -f "$out"' EXIT
variants=(gotron tuned untuned)
[ -x bin/gotron ] || { echo "bench-torch.sh: bin/gotron is missing: run make build" >&2; exit 1; }
echo "# gotron:  env -u OPENBLAS_CORETYPE bin/gotron bench --configs small,medium --iters 5"
echo "# untuned: env -u OPENBLAS_CORETYPE $py $bench --threads 2"
echo "# tuned:   env -u OPENBLAS_CORETYPE ${tuned_env[*]} $py $bench --threads 2 --tuned"
for r in $(seq "$rounds"); do
	for v in "${variants[@]}"; do
		case $v in
		gotron)
			# gotron's columns 10 and 11 are peak MiB and step ms: swapped
			# into PyTorch's order (step ms, peak MiB).
			env -u OPENBLAS_CORETYPE bin/gotron bench --configs small,medium --iters 5 |
				awk -v n="$v" -v r="$r" 'NR==1 { print "# round " r ": " $0; next } NR>2 { print n, $1, $2, $3, $4, $5, $6, $7, $8, $9, $11, $10 }' | tee -a "$out"
			continue ;;
		tuned) cmd=(env -u OPENBLAS_CORETYPE "${tuned_env[@]}" "$py" "$bench" --threads 2 --tuned) ;;
		*) cmd=(env -u OPENBLAS_CORETYPE "$py" "$bench" --threads 2) ;;
		esac
		"${cmd[@]}" |
			awk -v n="$v" -v r="$r" 'NR==1 { print "# round " r ": " $0; next } NR>2 { print n, $0 }' | tee -a "$out"
	done
done
# shellcheck source=scripts/stats.sh
. scripts/stats.sh
echo
printf "%-7s %-8s %-26s %-26s %s\n" model variant "tokens/s median (min-max)" "step ms median (min-max)" "peak MiB median (min-max)"
for m in small medium; do
	for v in "${variants[@]}"; do
		printf "%-7s %-8s %-26s %-26s %s\n" "$m" "$v" "$(stat "$v" "$m" 9)" "$(stat "$v" "$m" 11)" "$(stat "$v" "$m" 12)"
	done
	awk -v m="$m" -v g="$(med gotron "$m" 9)" -v u="$(med untuned "$m" 9)" -v t="$(med tuned "$m" 9)" 'BEGIN { printf "%s: gotron / tuned PyTorch tokens/s (medians): %.2fx; tuned / untuned PyTorch: %.2fx\n", m, g / t, t / u }'
done
