#!/usr/bin/env bash
# Runs every Go fuzz target of the repository for a while each. The targets
# are found by grepping the *_test.go files for `func FuzzXxx(f *testing.F)`,
# so a new one is never forgotten.
#
#   scripts/fuzz.sh [DURATION]
#
# DURATION is what go test -fuzztime takes (3s, 1m, 10000x); default
# $FUZZTIME, else 30s. `make fuzz` runs this with FUZZTIME (30s), `make test`
# with FUZZBRIEF (3s).
#
# Every target runs even when an earlier one fails; the script then lists the
# failures and exits 1. A failing input is written by go test to
# PKG/testdata/fuzz/NAME/HASH, where every later `go test` runs it: that is a
# real bug to fix (keep the file as its regression test). Anything else a run
# leaves in the package's directory is reported as a warning.
#
# Go 1.26's fuzz coordinator can end a run whose -fuzztime expires while a
# worker is busy with a bare "context deadline exceeded" and no input
# (go.dev/issue/75804, fixed in Go 1.27). Such a run counts as passed when
# nothing else failed and replaying the target's corpus passes; it is
# marked in the summary.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1

duration=${1:-${FUZZTIME:-30s}}
GO=${GO:-go}
# The fused kernels' vector paths need it, as in the Makefile; an explicit
# GOEXPERIMENT (even empty) is kept.
export GOEXPERIMENT=${GOEXPERIMENT-simd}

# The test files: tracked and untracked ones (not ignored) in a git checkout,
# else every one under the tree.
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
	files=$(git ls-files --cached --others --exclude-standard -- '*_test.go' | grep -v '/testdata/' | sort -u)
else
	files=$(find . -name '*_test.go' -not -path '*/testdata/*' | sed 's|^\./||' | sort)
fi
# One "package-dir name" line per target, sorted.
targets=$(
	for f in $files; do
		[ -f "$f" ] || continue # deleted but still in the index
		sed -nE 's/^func (Fuzz[A-Za-z0-9_]*)\([A-Za-z_][A-Za-z0-9_]* \*testing\.F\).*/\1/p' "$f" |
			while read -r name; do echo "$(dirname "$f") $name"; done
	done | sort -u
)
if [ -z "$targets" ]; then
	echo "fuzz.sh: no func Fuzz...(f *testing.F) found in the *_test.go files" >&2
	exit 1
fi
n=$(wc -l <<<"$targets")
echo "fuzz.sh: $n fuzz targets, $duration each (GOEXPERIMENT=$GOEXPERIMENT)"

out=$(mktemp)
trap 'rm -f "$out"' EXIT
failed=()
summary=()
while read -r dir name; do
	pkg=./$dir
	before=$(git status --porcelain --untracked-files=all -- "$dir" 2>/dev/null | grep '^??' | sort)
	echo "=== $name ($pkg)"
	start=$(date +%s.%N)
	"$GO" test -run '^$' -fuzz "^$name\$" -fuzztime "$duration" "$pkg" 2>&1 | tee "$out"
	rc=${PIPESTATUS[0]}
	secs=$(echo "$start $(date +%s.%N)" | awk '{printf "%.1f", $2 - $1}')
	execs=$(grep -oE 'execs: [0-9]+' "$out" | tail -n 1 | grep -oE '[0-9]+')
	status=ok
	if [ "$rc" -ne 0 ] && grep -q '^    context deadline exceeded$' "$out" &&
		! grep -qE 'testdata/fuzz/|panic:|Failing input|_test\.go:[0-9]+:' "$out" &&
		"$GO" test -count=1 -run "^$name\$" "$pkg" >/dev/null 2>&1; then
		rc=0
		status="ok (the -fuzztime shutdown race, go.dev/issue/75804; corpus replay passed)"
	fi
	if [ "$rc" -ne 0 ]; then
		status="FAILED (exit $rc)"
		crasher=$(grep -oE 'testdata/fuzz/[^ ]+' "$out" | head -n 1)
		[ -n "$crasher" ] && status="$status, input in $dir/$crasher"
	elif grep -q 'no fuzz tests to fuzz' "$out"; then
		# A build constraint excluded the file, or the name did not match.
		status="FAILED (go test found no fuzz target $name in $pkg)"
	fi
	[ "${status%% *}" = ok ] || failed+=("$name ($pkg): $status")
	after=$(git status --porcelain --untracked-files=all -- "$dir" 2>/dev/null | grep '^??' | sort)
	left=$(comm -13 <(echo "$before") <(echo "$after") | sed 's/^?? //' | grep -v '/testdata/fuzz/')
	if [ -n "$left" ]; then
		echo "fuzz.sh: warning: $name left files in the tree:" $left >&2
	fi
	summary+=("$(printf '%-28s %-22s %6ss %12s execs  %s' "$name" "$pkg" "$secs" "${execs:-?}" "$status")")
done <<<"$targets"

echo
echo "fuzz.sh: summary ($duration each)"
printf '  %s\n' "${summary[@]}"
if [ ${#failed[@]} -gt 0 ]; then
	echo "fuzz.sh: ${#failed[@]} of $n fuzz targets failed:" >&2
	printf '  %s\n' "${failed[@]}" >&2
	exit 1
fi
echo "fuzz.sh: all $n fuzz targets passed"
