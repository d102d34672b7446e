#!/usr/bin/python3
"""Independent reference of gotron's data-parallel gradient buffer layout.

Regenerate the fixtures (plain Python 3, no torch, from any directory):

    /usr/bin/python3 tools/torchref/bucket_layout_ref.py            # write
    /usr/bin/python3 tools/torchref/bucket_layout_ref.py --check    # re-verify

Both default to dp/testdata/layout/ of this repository (--out DIR / --check DIR
choose another). `make reference` runs the first form. The output is
deterministic: the same cases give the same bytes.

The rules are taken from docs/SEMANTICS.md § DDP buffers and buckets (the
buffer layout with and without the distributed optimizer) and § Distributed
optimizer shards (each data-parallel rank's shard of a bucket), written afresh
here; dp/layout_test.go (TestLayoutMatchesReference) compares gotron's
dp.DefaultLayout, dp.DistOptLayout and Layout.Shard with every file.

Layout (params in registration order; the buffer holds them in reverse):

    no distributed optimizer: params back to back, no padding; a bucket closes
        as soon as end - bucket_start >= bucket_size (None: never; 0: every
        param closes its own bucket); leftover params form the last bucket.
    distributed optimizer:
        pad(x, d) = ceil(x / d) * d,  divisor = lcm(dp, 128), or
        lcm(dp, 128, 2**16) with pad_buckets_for_high_nccl_busbw
        each param starts at pad(start, 64); a shared embedding closes the
        bucket before it (if non-empty) and closes its own bucket after it;
        closing at e records numel_unpadded = e - bucket_start and ends the
        bucket at pad(e, divisor), where the next bucket starts.

Shards (distributed optimizer only): bucket [o, o + n) gives rank r the world
range [ws, we) = [o + r*n/dp, o + (r+1)*n/dp); a param [s, e) overlapping it
contributes

    gbuf_local      = [max(0, s - ws), min(we - ws, e - ws))
    gbuf_world      = gbuf_local + ws
    gbuf_world_in_bucket = gbuf_world - o
    param_range     = [max(0, ws - s), max(0, ws - s) + len(gbuf_local))

Each file <case>.json holds:

    inputs: params [{name, numel, shared_embedding}] in registration order,
            bucket_size (null for no bucketing), dp,
            use_distributed_optimizer, pad_buckets_for_high_nccl_busbw
    numel, numel_unpadded
    buckets: [{start, end, numel_unpadded, params: [{name, start, end}]}],
             params in buffer order
    shards:  [{dp_rank, buckets: [{world_range, params: [{name, gbuf_world,
             gbuf_world_in_bucket, gbuf_local, param_range}]}]}], one entry per
             rank under the distributed optimizer, [] without it
"""

import argparse
import json
import math
import os
import sys

PARAM_ALIGN = 64  # elements every param starts on under the distributed optimizer
BUCKET_ALIGN = 128  # every bucket end divides by lcm(dp, BUCKET_ALIGN)
BUSBW_ALIGN = 2 ** 16  # ... and by this with pad_buckets_for_high_nccl_busbw

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_DIR = os.path.normpath(os.path.join(HERE, "..", "..", "dp", "testdata", "layout"))


def round_up(x, d):
    """The smallest multiple of d that is >= x."""
    return (x + d - 1) // d * d


def least_common_multiple(*xs):
    out = 1
    for x in xs:
        out = out * x // math.gcd(out, x)
    return out


class Param:
    def __init__(self, name, numel, shared=False):
        self.name, self.numel, self.shared = name, numel, shared


class Bucket:
    def __init__(self, start):
        self.start, self.end, self.unpadded, self.members = start, None, None, []


def layout_plain(params, bucket_size):
    """Section 2.15, no distributed optimizer. Returns (ranges, buckets)."""
    ranges, buckets = {}, []
    cursor = 0
    open_bucket = Bucket(0)
    for p in reversed(params):
        ranges[p.name] = (cursor, cursor + p.numel)
        open_bucket.members.append(p.name)
        cursor += p.numel
        if bucket_size is not None and cursor - open_bucket.start >= bucket_size:
            open_bucket.end = cursor
            open_bucket.unpadded = cursor - open_bucket.start
            buckets.append(open_bucket)
            open_bucket = Bucket(cursor)
    if open_bucket.members:
        open_bucket.end = cursor
        open_bucket.unpadded = cursor - open_bucket.start
        buckets.append(open_bucket)
    return ranges, buckets


def layout_distopt(params, bucket_size, dp, busbw):
    """Section 2.15, distributed optimizer. Returns (ranges, buckets)."""
    divisor = least_common_multiple(dp, BUCKET_ALIGN, BUSBW_ALIGN) if busbw else least_common_multiple(dp, BUCKET_ALIGN)
    ranges, buckets = {}, []
    open_bucket = Bucket(0)
    cursor = 0
    last_end = 0

    def close(at):
        # The bucket's unpadded length runs to `at`, which may include the
        # alignment gap before a shared embedding (the quirk of 2.15).
        nonlocal open_bucket
        open_bucket.unpadded = at - open_bucket.start
        open_bucket.end = round_up(at, divisor)
        buckets.append(open_bucket)
        open_bucket = Bucket(open_bucket.end)
        return open_bucket.start

    for p in reversed(params):
        cursor = round_up(cursor, PARAM_ALIGN)
        if p.shared and open_bucket.members:
            cursor = close(cursor)
        last_end = cursor + p.numel
        ranges[p.name] = (cursor, last_end)
        open_bucket.members.append(p.name)
        full = bucket_size is not None and last_end - open_bucket.start >= bucket_size
        cursor = close(last_end) if full or p.shared else last_end
    if open_bucket.members:
        close(last_end)
    return ranges, buckets


def shard(ranges, bucket, dp, rank):
    """Section 2.16: rank's part of one bucket."""
    n = bucket.end - bucket.start
    assert n % dp == 0, "bucket of %d elements does not split over %d ranks" % (n, dp)
    width = n // dp
    ws = bucket.start + rank * width
    we = bucket.start + min(n, (rank + 1) * width)
    pieces = []
    for name in bucket.members:
        s, e = ranges[name]
        lo, hi = max(0, s - ws), min(we - ws, e - ws)
        if hi <= lo:
            continue
        first = max(0, ws - s)
        pieces.append({
            "name": name,
            "gbuf_world": [lo + ws, hi + ws],
            "gbuf_world_in_bucket": [lo + ws - bucket.start, hi + ws - bucket.start],
            "gbuf_local": [lo, hi],
            "param_range": [first, first + hi - lo],
        })
    return {"world_range": [ws, we], "params": pieces}


def check(params, ranges, buckets, dp, distopt):
    """Sanity checks of the result, independent of how it was built."""
    pos = 0
    for b in buckets:
        assert b.start == pos and b.end >= b.start + b.unpadded, "buckets must tile the buffer"
        pos = b.end
        for name in b.members:
            s, e = ranges[name]
            assert b.start <= s <= e <= b.start + b.unpadded
            if distopt:
                assert s % PARAM_ALIGN == 0
        if distopt:
            assert b.start % dp == 0 and b.end % dp == 0
        else:
            assert b.end == b.start + b.unpadded
    assert sorted(n for b in buckets for n in b.members) == sorted(p.name for p in params)


def compute(case):
    params = [Param(n, k, s) for n, k, s in case["params"]]
    bs, dp, distopt, busbw = case["bucket_size"], case["dp"], case["distopt"], case["busbw"]
    if distopt:
        ranges, buckets = layout_distopt(params, bs, dp, busbw)
    else:
        ranges, buckets = layout_plain(params, bs)
    check(params, ranges, buckets, dp, distopt)
    doc = {
        "inputs": {
            "params": [{"name": p.name, "numel": p.numel, "shared_embedding": p.shared} for p in params],
            "bucket_size": bs,
            "dp": dp,
            "use_distributed_optimizer": distopt,
            "pad_buckets_for_high_nccl_busbw": busbw,
        },
        "numel": buckets[-1].end if buckets else 0,
        "numel_unpadded": sum(b.unpadded for b in buckets),
        "buckets": [{
            "start": b.start, "end": b.end, "numel_unpadded": b.unpadded,
            "params": [{"name": n, "start": ranges[n][0], "end": ranges[n][1]} for n in b.members],
        } for b in buckets],
        "shards": [],
    }
    if distopt:
        doc["shards"] = [{"dp_rank": r, "buckets": [shard(ranges, b, dp, r) for b in buckets]} for r in range(dp)]
    return doc


# ---- The cases ----


def gpt_layers(first, count, h, ffn, biases):
    """A decoder layer's params in registration order (hidden h, MLP width ffn)."""
    out = []
    for i in range(first, first + count):
        pre = "decoder.layers.%d." % i
        for mod, w in (("input_layernorm", h), ("self_attention.linear_proj", h * h),
                       ("self_attention.linear_qkv", 3 * h * h), ("pre_mlp_layernorm", h),
                       ("mlp.linear_fc1", ffn * h), ("mlp.linear_fc2", h * ffn)):
            b = {"self_attention.linear_qkv": 3 * h, "mlp.linear_fc1": ffn}.get(mod, h)
            out.append((pre + mod + ".weight", w, False))
            if biases:
                out.append((pre + mod + ".bias", b, False))
    return out


def param_lists():
    h, ffn, vocab, pos = 24, 40, 100, 16
    word = "embedding.word_embeddings.weight"
    emb = [(word, vocab * h, False), ("embedding.position_embeddings.weight", pos * h, False)]
    final = [("decoder.final_layernorm.weight", h, False), ("decoder.final_layernorm.bias", h, False)]
    return {
        # A whole model (one pipeline stage): the tied embedding is not split.
        "bias": emb + gpt_layers(0, 2, h, ffn, True) + final,
        "nobias": emb[:1] + gpt_layers(0, 2, h, ffn, False) + final[:1],
        # First pipeline stage: the shared embedding first in registration
        # order, so last in the buffer.
        "sharedfirst": [(word, vocab * h, True)] + emb[1:] + gpt_layers(0, 1, h, ffn, True),
        # Last pipeline stage: the shared embedding last in registration
        # order, so first in the buffer.
        "sharedlast": gpt_layers(3, 1, h, ffn, True) + final + [(word, vocab * h, True)],
        # Sizes around the 64-element alignment, a shared embedding between.
        "odd": [("p%d" % i, n, n == 130) for i, n in enumerate([1, 63, 64, 65, 127, 130, 129, 1000, 3])],
    }


BUCKET_SIZES = [("none", None), ("0", 0), ("300", 300), ("4000", 4000)]


def cases():
    out = {}
    for lname, params in param_lists().items():
        for bname, bs in BUCKET_SIZES:
            out["%s_plain_bs%s" % (lname, bname)] = dict(params=params, bucket_size=bs, dp=1, distopt=False, busbw=False)
            for dp in (1, 2, 4, 8):
                out["%s_distopt_dp%d_bs%s" % (lname, dp, bname)] = dict(params=params, bucket_size=bs, dp=dp, distopt=True, busbw=False)
            if bname in ("none", "300"):
                for dp in (2, 8):
                    out["%s_busbw_dp%d_bs%s" % (lname, dp, bname)] = dict(params=params, bucket_size=bs, dp=dp, distopt=True, busbw=True)
    return out


def encode(doc):
    """JSON with every object that fits in 200 characters on one line, one
    object of a list per line."""
    return _encode(doc, "") + "\n"


def _encode(v, indent):
    flat = json.dumps(v, separators=(", ", ": "))
    of_objects = isinstance(v, list) and any(isinstance(x, dict) for x in v)
    if not v or not isinstance(v, (dict, list)) or (len(indent) + len(flat) <= 200 and not of_objects):
        return flat
    inner = indent + " "
    if isinstance(v, dict):
        items = ["%s%s: %s" % (inner, json.dumps(k), _encode(x, inner)) for k, x in v.items()]
        return "{\n" + ",\n".join(items) + "\n" + indent + "}"
    return "[\n" + ",\n".join(inner + _encode(x, inner) for x in v) + "\n" + indent + "]"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--out", metavar="DIR", help="write the fixtures here (default %s)" % DEFAULT_DIR)
    g.add_argument("--check", metavar="DIR", nargs="?", const=DEFAULT_DIR, help="compare the fixtures in DIR instead of writing")
    args = ap.parse_args()
    docs = {name: encode(compute(c)) for name, c in sorted(cases().items())}
    if args.check:
        bad = []
        for name, text in docs.items():
            path = os.path.join(args.check, name + ".json")
            try:
                with open(path) as f:
                    if f.read() != text:
                        bad.append(path)
            except OSError as e:
                bad.append("%s (%s)" % (path, e))
        extra = sorted(set(os.listdir(args.check)) - {n + ".json" for n in docs}) if os.path.isdir(args.check) else []
        for path in bad:
            print("differs: " + path, file=sys.stderr)
        for name in extra:
            print("not a case: " + os.path.join(args.check, name), file=sys.stderr)
        if bad or extra:
            sys.exit(1)
        print("%d layout fixtures match in %s" % (len(docs), args.check))
        return
    out = args.out or DEFAULT_DIR
    os.makedirs(out, exist_ok=True)
    for name in os.listdir(out):  # cases no longer generated
        if name.endswith(".json") and name[:-5] not in docs:
            os.remove(os.path.join(out, name))
    for name, text in docs.items():
        with open(os.path.join(out, name + ".json"), "w") as f:
            f.write(text)
    print("wrote %d layout fixtures to %s" % (len(docs), out))


if __name__ == "__main__":
    main()
