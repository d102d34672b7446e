#!/usr/bin/env bash
# precision-curve.sh trains the `make train` model twice, in float32 and
# with --bf16 (same flags, same data, same seed), and compares the two loss
# curves: it prints both at every logged iteration (--log-interval, the
# mean of the interval's losses, as the iteration line prints it) and
# every iteration's relative difference, and fails when bf16 is more than
# 2% from float32 at any logged iteration. Its arguments are the training
# flags of both runs (make precision passes make train's). It builds
# nothing: make precision builds bin/gotron.
#
#	scripts/precision-curve.sh TRAIN_FLAGS...
set -euo pipefail
cd "$(dirname "$0")/.."
bin=bin/gotron
[ -x "$bin" ] || { echo "precision-curve.sh: $bin is missing: run make build" >&2; exit 1; }
[ $# -gt 0 ] || { echo "precision-curve.sh: give the training flags (make precision passes make train's)" >&2; exit 2; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
for p in fp32 bf16; do
	flag=""
	[ "$p" = bf16 ] && flag=--bf16
	echo "# $p: $bin train $* $flag"
	# shellcheck disable=SC2086
	"$bin" train "$@" $flag --sample 0 --log-json "$dir/$p.jsonl" | grep -E "iteration|validation" | tail -4
done
/usr/bin/python3 - "$dir/fp32.jsonl" "$dir/bf16.jsonl" "$*" <<'PY'
import json, re, sys

def losses(path):
    out = {}
    for line in open(path):
        r = json.loads(line)
        if "loss" in r:
            out[r["iteration"]] = r["loss"]
    return out

f32, b16 = losses(sys.argv[1]), losses(sys.argv[2])
m = re.search(r"--log-interval\s+(\d+)", sys.argv[3])
interval = int(m.group(1)) if m else 100
its = sorted(f32)
worst_it, worst = 0, 0.0
print(f"{'iteration':>9} {'fp32 loss':>10} {'bf16 loss':>10} {'rel diff':>9}")
bad = []
for end in range(interval, its[-1] + 1, interval):
    window = [i for i in its if end - interval < i <= end]
    a = sum(f32[i] for i in window) / len(window)
    b = sum(b16[i] for i in window) / len(window)
    d = abs(b - a) / abs(a)
    print(f"{end:>9} {a:>10.4f} {b:>10.4f} {100 * d:>8.2f}%")
    if d > 0.02:
        bad.append(end)
for i in its:
    d = abs(b16[i] - f32[i]) / abs(f32[i])
    if d > worst:
        worst_it, worst = i, d
print(f"largest difference of a single iteration: {100 * worst:.2f}% at iteration {worst_it}")
if bad:
    sys.exit(f"bf16 is more than 2% from float32 at logged iteration(s) {bad}")
print("bf16 is within 2% of float32 at every logged iteration")
PY
