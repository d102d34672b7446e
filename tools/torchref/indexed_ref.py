#!/usr/bin/python3
"""Independent reference of Megatron's indexed dataset files (PREFIX.idx + PREFIX.bin).

Writes, from the format's specification alone (numpy and the standard library; no
Megatron, no gotron code), one small dataset per token dtype and a JSON listing what
they hold, for data/indexed's tests (ref_test.go: gotron's reader must read back the
JSON's tokens, lengths and document indices, and gotron's writer must write the same
bytes from the JSON's documents).

    /usr/bin/python3 tools/torchref/indexed_ref.py --out data/indexed/testdata    # write
    /usr/bin/python3 tools/torchref/indexed_ref.py --check data/indexed/testdata  # re-verify

Without an option it writes to data/indexed/testdata of this repository. --check
regenerates everything in memory, requires every file to be byte-identical, and parses
the files with a separate reader to confirm they hold the JSON's documents (exit 1 on
any difference). The output is deterministic.

The format (all integers little-endian):

    .idx  offset  size   field
          0       9      magic b"MMIDIDX\\x00\\x00"
          9       8      uint64 version, 1
          17      1      uint8 dtype code: 1 uint8, 2 int8, 3 int16, 4 int32,
                         5 int64, 6 float64, 7 float32, 8 uint16
          18      8      uint64 S, the number of sequences
          26      8      uint64 D, the number of document indices (documents + 1)
          34      4*S    int32 sequence lengths (tokens)
          34+4S   8*S    int64 sequence pointers: byte offset of each sequence in the .bin,
                         pointer[0] = 0, pointer[i] = pointer[i-1] + length[i-1] * itemsize
          34+12S  8*D    int64 document indices: 0, then after each document the number
                         of sequences so far (an empty document repeats the previous one)
    .bin  the tokens of all sequences back to back, each an itemsize-byte value of the dtype

A document is added as (tokens, lengths): its tokens are appended to the .bin, its
lengths to the sequence lengths, and the sequence count to the document indices.
"""

import argparse
import json
import os
import struct
import sys

import numpy as np

MAGIC = b"MMIDIDX\x00\x00"
VERSION = 1

# name, code, little-endian numpy dtype, smallest and largest token id written
# (the dtype's range cut to int32; float32 holds every integer up to 2**24).
DTYPES = [
    ("uint8", 1, "<u1", 0, 255),
    ("int8", 2, "<i1", -128, 127),
    ("int16", 3, "<i2", -32768, 32767),
    ("int32", 4, "<i4", -(2 ** 31), 2 ** 31 - 1),
    ("int64", 5, "<i8", -(2 ** 31), 2 ** 31 - 1),
    ("float64", 6, "<f8", -(2 ** 31), 2 ** 31 - 1),
    ("float32", 7, "<f4", -(2 ** 24), 2 ** 24),
    ("uint16", 8, "<u2", 0, 65535),
]

# The documents' shapes: each is a list of sequence lengths. Document 2 is empty (no
# sequence: its document index repeats the previous one), document 5 is one sequence of
# no tokens, document 4 has an empty sequence between two others.
DOC_SHAPES = [[5], [2, 4, 1], [], [3], [2, 0, 3], [0], [40]]

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_DIR = os.path.normpath(os.path.join(HERE, "..", "..", "data", "indexed", "testdata"))
JSON_NAME = "indexed_ref.json"


def lcg(seed):
    """A 64-bit linear congruential generator (Knuth's MMIX constants), high bits out."""
    x = seed
    while True:
        x = (x * 6364136223846793005 + 1442695040888963407) % 2 ** 64
        yield x >> 16


def documents(code, lo, hi):
    """The fixture's documents for one dtype: [(tokens, lengths)]. Document 3 holds the
    dtype's extremes and 0; the others draw tokens uniformly from [lo, hi]."""
    rng = lcg(1000 + code)
    docs = []
    for d, lengths in enumerate(DOC_SHAPES):
        n = sum(lengths)
        if d == 3:
            tokens = [lo, hi, 0]
        else:
            tokens = [lo + next(rng) % (hi - lo + 1) for _ in range(n)]
        docs.append((tokens, list(lengths)))
    return docs


def build(code, npdtype, docs):
    """The .bin and .idx bytes of docs, and the index arrays."""
    itemsize = np.dtype(npdtype).itemsize
    all_tokens = [t for tokens, _ in docs for t in tokens]
    bin_bytes = np.array(all_tokens, dtype=npdtype).tobytes()
    lengths, doc_indices = [], [0]
    for tokens, seq_lengths in docs:
        assert sum(seq_lengths) == len(tokens)
        lengths.extend(seq_lengths)
        doc_indices.append(len(lengths))
    pointers, at = [], 0
    for n in lengths:
        pointers.append(at)
        at += n * itemsize
    idx = bytearray(MAGIC)
    idx += struct.pack("<Q", VERSION)
    idx += struct.pack("<B", code)
    idx += struct.pack("<Q", len(lengths))
    idx += struct.pack("<Q", len(doc_indices))
    idx += np.array(lengths, dtype="<i4").tobytes()
    idx += np.array(pointers, dtype="<i8").tobytes()
    idx += np.array(doc_indices, dtype="<i8").tobytes()
    return bin_bytes, bytes(idx), lengths, pointers, doc_indices


def generate():
    """{file name: bytes} of every fixture file, the JSON included."""
    files, fixtures = {}, []
    for name, code, npdtype, lo, hi in DTYPES:
        docs = documents(code, lo, hi)
        bin_bytes, idx_bytes, lengths, pointers, doc_indices = build(code, npdtype, docs)
        prefix = "ref_%s_text_document" % name
        files[prefix + ".bin"] = bin_bytes
        files[prefix + ".idx"] = idx_bytes
        fixtures.append({
            "prefix": prefix,
            "dtype": name,
            "dtype_code": code,
            "itemsize": np.dtype(npdtype).itemsize,
            "documents": [{"tokens": t, "lengths": l} for t, l in docs],
            "sequence_lengths": lengths,
            "sequence_pointers": pointers,
            "document_indices": doc_indices,
            "num_tokens": sum(lengths),
            "bin_size": len(bin_bytes),
            "idx_size": len(idx_bytes),
        })
    doc = {
        "comment": "Megatron indexed datasets (PREFIX.idx + PREFIX.bin), one per token dtype, "
                   "written from the format's specification with numpy",
        "producer": "tools/torchref/indexed_ref.py",
        "fixtures": fixtures,
    }
    files[JSON_NAME] = (json.dumps(doc, indent=1) + "\n").encode()
    return files


def parse(idx, bin_bytes):
    """A separate reader: (code, lengths, pointers, doc indices, tokens per sequence)."""
    assert idx[:9] == MAGIC, "magic"
    version, code, nseq, ndoc = struct.unpack_from("<QBQQ", idx, 9)
    assert version == VERSION, "version"
    npdtype = {c: t for _, c, t, _, _ in DTYPES}[code]
    itemsize = np.dtype(npdtype).itemsize
    lengths = np.frombuffer(idx, dtype="<i4", count=nseq, offset=34)
    pointers = np.frombuffer(idx, dtype="<i8", count=nseq, offset=34 + 4 * nseq)
    docs = np.frombuffer(idx, dtype="<i8", count=ndoc, offset=34 + 12 * nseq)
    assert len(idx) == 34 + 12 * nseq + 8 * ndoc, "idx size"
    assert len(bin_bytes) == int(lengths.sum()) * itemsize, "bin size"
    seqs = []
    for p, n in zip(pointers.tolist(), lengths.tolist()):
        seqs.append(np.frombuffer(bin_bytes, dtype=npdtype, count=n, offset=p).tolist())
    return code, lengths.tolist(), pointers.tolist(), docs.tolist(), seqs


def check(directory):
    """Compare the files in directory with a fresh generation and re-read them."""
    ok = True
    files = generate()
    for name, want in sorted(files.items()):
        path = os.path.join(directory, name)
        try:
            with open(path, "rb") as f:
                got = f.read()
        except OSError as e:
            print("FAIL %s: %s" % (name, e))
            ok = False
            continue
        if got != want:
            print("FAIL %s: differs from a fresh write (%d bytes, want %d)" % (name, len(got), len(want)))
            ok = False
    total = sum(len(b) for b in files.values())
    if total > 200_000:
        print("FAIL the fixture takes %d bytes, more than 200 KB" % total)
        ok = False
    ref = json.loads(files[JSON_NAME])
    for fx in ref["fixtures"]:
        code, lengths, pointers, docs, seqs = parse(files[fx["prefix"] + ".idx"], files[fx["prefix"] + ".bin"])
        # Split every document's tokens by its lengths, independently of build().
        want_seqs = []
        for d in fx["documents"]:
            start = 0
            for n in d["lengths"]:
                want_seqs.append(d["tokens"][start:start + n])
                start += n
        want_docs = [0]
        for d in fx["documents"]:
            want_docs.append(want_docs[-1] + len(d["lengths"]))
        checks = [
            ("dtype code", code, fx["dtype_code"]),
            ("sequence lengths", lengths, fx["sequence_lengths"]),
            ("sequence pointers", pointers, fx["sequence_pointers"]),
            ("document indices", docs, fx["document_indices"]),
            ("document indices from the documents", docs, want_docs),
            ("tokens", [[int(t) for t in s] for s in seqs], want_seqs),
        ]
        for what, got, want in checks:
            if got != want:
                print("FAIL %s: %s %r, want %r" % (fx["prefix"], what, got, want))
                ok = False
    print("%s: %s (%d files, %d bytes)" % (directory, "ok" if ok else "FAILED", len(files), total))
    return ok


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", metavar="DIR", help="write the fixture into DIR")
    ap.add_argument("--check", metavar="DIR", help="re-verify the fixture in DIR")
    args = ap.parse_args()
    if args.out is None and args.check is None:
        args.out = DEFAULT_DIR
    if args.out is not None:
        os.makedirs(args.out, exist_ok=True)
        for name, data in sorted(generate().items()):
            with open(os.path.join(args.out, name), "wb") as f:
                f.write(data)
        print("wrote %s" % args.out)
    if args.check is not None and not check(args.check):
        sys.exit(1)


if __name__ == "__main__":
    main()
