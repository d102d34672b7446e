#!/usr/bin/env bash
# bench-preprocess.sh measures gotron preprocess on about 100 MB of JSONL:
# the *.go files of $(go env GOROOT)/src, one JSON object {"text": ...} per
# file, repeated until the file holds 100 MB, tokenized by GPT2BPETokenizer
# (GPT-2's vocabulary built into gotron) with --append-eod, with 1 and with 2
# workers, interleaved over ROUNDS rounds (default 3). Beside it, the time
# `cat` takes to read the same file (from the page cache: the ceiling of any
# reader). It prints every run's line, then the median and range of MB/s
# and tokens/s per worker count. It builds nothing: make bench builds
# bin/gotron. The JSONL and the outputs live in a temporary directory.
#
#	scripts/bench-preprocess.sh [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
bin=bin/gotron
[ -x "$bin" ] || { echo "bench-preprocess.sh: $bin is missing: run make build" >&2; exit 1; }
dir=$(mktemp -d)
out=$dir/results
trap 'rm -rf "$dir"' EXIT
src="$(go env GOROOT)/src"
/usr/bin/python3 - "$src" "$dir/corpus.jsonl" <<'PY'
import json, os, sys
src, dst = sys.argv[1], sys.argv[2]
files = sorted(os.path.join(d, f) for d, _, fs in os.walk(src) for f in fs if f.endswith(".go"))
docs = []
for p in files:
    with open(p, "rb") as fh:
        b = fh.read()
    if b"\0" not in b:
        docs.append(json.dumps({"text": b.decode("utf-8", "replace")}) + "\n")
size = 0
with open(dst, "w") as out:
    while size < 100_000_000:
        for d in docs:
            out.write(d)
            size += len(d.encode())
            if size >= 100_000_000:
                break
PY
bytes=$(stat -c %s "$dir/corpus.jsonl")
echo "# corpus: $bytes bytes of JSONL from $src; $(nproc) cores; $(date -u +%F)"
for r in $(seq "$rounds"); do
	t0=$(date +%s.%N)
	cat "$dir/corpus.jsonl" >/dev/null
	t1=$(date +%s.%N)
	echo "cat read $(echo "$bytes $t0 $t1" | awk '{ printf "%.1f", $1 / 1e6 / ($3 - $2) }')" | tee -a "$out"
	for w in 1 2; do
		line=$("$bin" preprocess --input "$dir/corpus.jsonl" --output-prefix "$dir/out/w$w" \
			--tokenizer-type GPT2BPETokenizer --append-eod --workers "$w" | head -1)
		echo "# round $r: $line"
		# "... in 12.34s: 8.10 MB/s, 2000000 tokens/s (2 workers)"
		echo "$line" | awk -v w="$w" '{ for (i = 1; i <= NF; i++) { if ($(i+1) == "MB/s,") mb = $i; if ($(i+1) == "tokens/s") tk = $i } print "w" w, "gpt2", mb, tk }' | tee -a "$out"
	done
done
# shellcheck source=scripts/stats.sh
. scripts/stats.sh
echo
printf "%-22s %-24s %s\n" run "MB/s median (min-max)" "tokens/s median (min-max)"
printf "%-22s %-24s %s\n" "cat (page cache)" "$(stat cat read 3)" "-"
for w in 1 2; do
	printf "%-22s %-24s %s\n" "preprocess, $w worker(s)" "$(stat "w$w" gpt2 3)" "$(stat "w$w" gpt2 4)"
done
