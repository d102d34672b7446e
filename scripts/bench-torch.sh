#!/usr/bin/env bash
# bench-torch.sh measures gotron's training throughput (gotron bench, one rank
# on both cores) beside PyTorch's (tools/torchref/bench.py, the same small and
# medium models, 2 threads), in float32 and in bf16, side by side in one run:
#
#	gotron       bin/gotron bench --configs small,medium --iters 5 (fp32,
#	             one rank), out of the box: no OPENBLAS_CORETYPE
#	gotron-bf16  the same with --bf16
#	tuned        PyTorch at its best on this CPU (bench.py --tuned): the
#	             OpenMP build of OpenBLAS preloaded (one OpenMP pool for ATen
#	             and BLAS) with OPENBLAS_CORETYPE chosen from the CPU's
#	             features (bench.py --print-coretype), ATen's AVX-512 kernels
#	             where the CPU has them (bench.py --print-aten-isa), jemalloc
#	             without page decay, every thread count 2 before start-up
#	             (bench.py's doc says what else was tried and left out)
#	tuned-bf16   the same under torch.autocast("cpu", dtype=torch.bfloat16)
#	             (bench.py --tuned --bf16: fp32 weights and AdamW, bf16 GEMMs
#	             on PyTorch's oneDNN)
#	untuned      Debian's python3-torch as installed: its pthreads OpenBLAS
#	             (its own kernel choice), glibc malloc,
#	             torch.set_num_threads(2), fp32
#
# interleaved over ROUNDS rounds (default 3). It prints every run's header
# (the BLAS, oneDNN ISA and allocator actually loaded, the thread settings,
# the OpenBLAS kernel) and result lines, then per model and variant the median
# and range of tokens/s, the step's time and the peak resident memory, and
# the ratios of the median tokens/s: gotron / tuned in fp32 and in bf16, bf16
# / fp32 for each, tuned / untuned. An OPENBLAS_CORETYPE or
# ATEN_CPU_CAPABILITY in the caller's environment is unset for gotron and
# untuned and replaced for tuned (the script says so). scripts/deps.sh
# torchbench installs what it needs; make bench builds bin/gotron.
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
# OpenBLAS reads OPENBLAS_CORETYPE and ATen ATEN_CPU_CAPABILITY when they load:
# set here, on the command line of each PyTorch run. Empty: left unset.
coretype=$("$py" "$bench" --print-coretype)
atenisa=$("$py" "$bench" --print-aten-isa)
tuned_env=(
	LD_PRELOAD="$openblas:$jemalloc"
	LD_LIBRARY_PATH="$(dirname "$openblas")"
	MALLOC_CONF=background_thread:false,dirty_decay_ms:-1,muzzy_decay_ms:-1
	OMP_NUM_THREADS=2 OPENBLAS_NUM_THREADS=2 GOTO_NUM_THREADS=2 MKL_NUM_THREADS=2
)
[ -n "$coretype" ] && tuned_env+=(OPENBLAS_CORETYPE="$coretype")
[ -n "$atenisa" ] && tuned_env+=(ATEN_CPU_CAPABILITY="$atenisa")
out=$(mktemp)
trap 'rm -f "$out"' EXIT
variants=(gotron tuned gotron-bf16 tuned-bf16 untuned)
[ -x bin/gotron ] || { echo "bench-torch.sh: bin/gotron is missing: run make build" >&2; exit 1; }
# the machine, and those of its features that choose kernels
features=$(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -xE 'avx|avx2|fma|avx512(f|vl|bw|dq|cd)|avx512_(bf16|fp16)|amx_(bf16|tile)' | tr '\n' ' ' || true)
echo "# $(grep -m1 '^model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(nproc) CPU(s), features: ${features% }; $(date -u +%F)"
echo "# tuned PyTorch: OPENBLAS_CORETYPE ${coretype:-unset (OpenBLAS picks)}, ATEN_CPU_CAPABILITY ${atenisa:-unset (ATen picks)}"
if [ -n "${OPENBLAS_CORETYPE+set}" ]; then
	tuned_is=unset
	[ -n "$coretype" ] && tuned_is="OPENBLAS_CORETYPE=$coretype"
	echo "# the environment's OPENBLAS_CORETYPE=$OPENBLAS_CORETYPE: unset for gotron and untuned, $tuned_is for tuned"
fi
if [ -n "${ATEN_CPU_CAPABILITY+set}" ]; then
	tuned_is=unset
	[ -n "$atenisa" ] && tuned_is="ATEN_CPU_CAPABILITY=$atenisa"
	echo "# the environment's ATEN_CPU_CAPABILITY=$ATEN_CPU_CAPABILITY: unset for untuned, $tuned_is for tuned"
fi
gotron_cmd=(env -u OPENBLAS_CORETYPE bin/gotron bench --configs small,medium --iters 5)
tuned_cmd=(env -u OPENBLAS_CORETYPE -u ATEN_CPU_CAPABILITY "${tuned_env[@]}" "$py" "$bench" --threads 2 --tuned)
untuned_cmd=(env -u OPENBLAS_CORETYPE -u ATEN_CPU_CAPABILITY "$py" "$bench" --threads 2)
echo "# gotron:      ${gotron_cmd[*]}"
echo "# gotron-bf16: ${gotron_cmd[*]} --bf16"
echo "# tuned:       ${tuned_cmd[*]}"
echo "# tuned-bf16:  ${tuned_cmd[*]} --bf16"
echo "# untuned:     ${untuned_cmd[*]}"
for r in $(seq "$rounds"); do
	for v in "${variants[@]}"; do
		case $v in
		gotron | gotron-bf16)
			args=()
			[ "$v" = gotron-bf16 ] && args=(--bf16)
			# gotron's columns 10 and 11 are peak MiB and step ms: swapped
			# into PyTorch's order (step ms, peak MiB).
			"${gotron_cmd[@]}" "${args[@]}" |
				awk -v n="$v" -v r="$r" 'NR==1 { print "# round " r ": " $0; next } NR>2 { print n, $1, $2, $3, $4, $5, $6, $7, $8, $9, $11, $10 }' | tee -a "$out"
			continue ;;
		tuned) cmd=("${tuned_cmd[@]}") ;;
		tuned-bf16) cmd=("${tuned_cmd[@]}" --bf16) ;;
		*) cmd=("${untuned_cmd[@]}") ;;
		esac
		"${cmd[@]}" |
			awk -v n="$v" -v r="$r" 'NR==1 { print "# round " r ": " $0; next } NR>2 { print n, $0 }' | tee -a "$out"
	done
done
# shellcheck source=scripts/stats.sh
. scripts/stats.sh
echo
printf "%-7s %-11s %-26s %-26s %s\n" model variant "tokens/s median (min-max)" "step ms median (min-max)" "peak MiB median (min-max)"
for m in small medium; do
	for v in "${variants[@]}"; do
		printf "%-7s %-11s %-26s %-26s %s\n" "$m" "$v" "$(stat "$v" "$m" 9)" "$(stat "$v" "$m" 11)" "$(stat "$v" "$m" 12)"
	done
	awk -v m="$m" -v g="$(med gotron "$m" 9)" -v gb="$(med gotron-bf16 "$m" 9)" -v t="$(med tuned "$m" 9)" \
		-v tb="$(med tuned-bf16 "$m" 9)" -v u="$(med untuned "$m" 9)" 'BEGIN {
		printf "%s: gotron / tuned PyTorch tokens/s (medians): fp32 %.2fx, bf16 %.2fx; bf16 / fp32: gotron %.2fx, tuned PyTorch %.2fx; tuned / untuned PyTorch (fp32): %.2fx\n",
			m, g / t, gb / tb, gb / g, tb / t, t / u }'
done
