#!/usr/bin/env bash
# run_tests.sh builds comm/mpi's tests (build tag mpi) into one binary and
# runs it under Open MPI with 2 and with 4 ranks, one process per rank.
# It exits non-zero when any rank fails.
#
#	comm/mpi/run_tests.sh          tests at -np 2 and -np 4
#	comm/mpi/run_tests.sh -bench   also the benchmarks, at -np 2
#
# mpirun flags, for a container with no network but loopback:
#	--allow-run-as-root   the container runs as root
#	--oversubscribe       allow more ranks than cores (4 ranks on 2 cores)
#	--bind-to none        let the kernel place ranks (cores are shared)
#	--mca btl self,vader  shared memory only: skip the tcp/openib/ofi probes
#	--tag-output          prefix each line with [job,rank]
#	-x NAME=value         pass an environment variable to every rank
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
bin=$work/mpi.test

mpirun=(mpirun --allow-run-as-root --oversubscribe --bind-to none --mca btl self,vader)

echo "building $bin"
(cd "$root" && go test -c -tags mpi -o "$bin" ./comm/mpi)

status=0
for np in 2 4; do
	echo "== tests, mpirun -np $np"
	if ! timeout 600 "${mpirun[@]}" --tag-output -np "$np" "$bin" -test.timeout 5m -test.v 2>&1 |
		grep -Ev '^\[[0-9]+,[0-9]+\]<stdout>:(=== RUN|=== PAUSE|=== CONT)'; then
		status=1
	fi
	# grep's status hides mpirun's: check the pipeline's first element.
	if [ "${PIPESTATUS[0]}" -ne 0 ]; then
		echo "FAIL: tests at -np $np"
		status=1
	fi
done

# Whole programs through mpi.Run (GOTRON_MPI_MAIN, see main_test.go):
# the exit codes and messages mpirun reports.
scenario() { # name, want-status, want-text
	local out st
	set +e
	out=$(timeout 120 "${mpirun[@]}" --tag-output -np 2 -x GOTRON_MPI_MAIN="$1" "$bin" 2>&1)
	st=$?
	set -e
	if [ "$2" = 0 ] && [ "$st" -ne 0 ] || [ "$2" != 0 ] && { [ "$st" -eq 0 ] || [ "$st" -eq 124 ]; }; then
		echo "FAIL: scenario $1 exited $st, want $2"; echo "$out"; status=1; return
	fi
	if [ "$(grep -c -- "$3" <<<"$out")" -lt "$4" ]; then
		echo "FAIL: scenario $1: want $4 lines mentioning \"$3\""; echo "$out"; status=1; return
	fi
	echo "ok: scenario $1 (exit $st)"
}
echo "== whole programs, mpirun -np 2"
scenario ok 0 "scenario ok: ok" 2
scenario fail 1 "scenario fail: mpi: rank 1 failed: scenario failure" 2
scenario stuck 1 "aborting the job" 1

if [ "${1:-}" = "-bench" ]; then
	echo "== benchmarks, mpirun -np 2 (fixed iteration count: every rank must run the same); rank 0's output:"
	if ! timeout 600 "${mpirun[@]}" --output-filename "$work/bench" -np 2 "$bin" \
		-test.run '^$' -test.bench . -test.benchtime 20x >/dev/null 2>&1; then
		echo "FAIL: benchmarks"
		status=1
	fi
	cat "$work"/bench/1/rank.0/stdout
fi

if [ "$status" -eq 0 ]; then
	echo "ok: comm/mpi at -np 2 and -np 4"
fi
exit "$status"
