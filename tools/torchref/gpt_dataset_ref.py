#!/usr/bin/python3
"""Independent reference of Megatron-Core's GPTDataset sample order (numpy only).

Regenerate or re-verify the fixtures of gotron's data/gptdata package:

    /usr/bin/python3 tools/torchref/gpt_dataset_ref.py            # write
    /usr/bin/python3 tools/torchref/gpt_dataset_ref.py --check    # re-verify

Both default to data/gptdata/testdata/ of this repository (--out DIR / --check
DIR choose another). The output is deterministic: the same numpy writes the
same bytes. Needs numpy only (no Megatron, no torch).

What it implements, written afresh from the behaviour of Megatron-Core's
datasets (gpt_dataset.py, helpers.cpp, blended_dataset.py,
blended_megatron_dataset_builder.py, utils.py, megatron_dataset.py) and of
megatron/training (get_train_valid_test_num_samples, get_blend_from_list):

  split     "969,30,1" -> the numbers in it, padded to 3 with 0, divided by
            their numpy sum; bookends [0, c1), [c1, c2), [c2, c3) of the
            running sums (the first one the int 0; an empty bookend is no
            split); a split of N documents is [round(lo*N), round(hi*N)) with
            Python's round (half to even).
  epochs    tokens/epoch T = sum of the split's document lengths; epochs E =
            the least E >= 1 with E*T >= n*seq + 1 (n requested samples; one
            epoch when n is None).
  separate  E > 1 and n - (((E-1)*T - 1) // seq) < int(0.80 * ((T - 1) // seq)):
            the final epoch is shuffled on its own.
  RandomState(seed), used in this order:
    document index  the split's documents repeated E times (int32), shuffled;
                    separate: the first E-1 epochs shuffled together, then the
                    final epoch shuffled alone, concatenated.
    sample index    build_sample_idx (Python loops below): [S+1, 2] rows
                    (position in the document index, offset), S = (E*T - 1) //
                    seq, consecutive samples overlapping by one token; int32
                    when max(len(document index), max length) fits, else int64.
    shuffle index   arange(S) shuffled (uint32, int64 when S >= 2^32 - 2);
                    separate: arange(S') and arange(S', S) shuffled one after
                    the other, S' the samples of the first E-1 epochs.
  sample i  rows shuffle[i] and shuffle[i]+1 of the sample index give seq+1
            tokens (padded with the pad id if short); inputs = [:-1], labels =
            [1:]; loss mask 1, 0 at inputs == eod with eod_mask_loss, 0 at
            labels == pad; position ids restart after every input eod with
            reset_position_ids; reset_attention_mask cuts the causal mask after
            every input eod (gotron's segments: eods among inputs 0..t-1); pad
            ids become 0.
  blends    weights normalised (numpy, twice: builder and BlendedDataset); per
            dataset ceil(ceil(n*w) * (1 + 0.005)) samples built, ceil(n*w)
            used; the blend has sum(ceil(n*w)) samples; build_blending_indices
            picks for sample k the dataset with the largest w*max(k,1) - count
            (first wins ties). Prefixes only: one epoch per dataset, weights =
            their lengths, size min(n, sum). A single prefix with no weight is
            a plain GPTDataset; with a weight (or per-split, never) a blend.
  per split --train/valid/test-data-path: split and split_matrix None, the
            whole dataset for its split; one prefix is a GPTDataset.
  counts    train = train_iters*gbs, valid = (train_iters//eval_interval + 1)
            *eval_iters*gbs, test = eval_iters*gbs.
  cache     description = json.dumps(OrderedDict(class, dataset_path,
            num_samples, index_split, random_seed, sequence_length, split,
            split_matrix), indent=4) (Megatron's keys minus "tokenizer": the
            indices do not depend on it; gotron's scheme), files
            {md5(description)}-GPTDataset-{split}-{description.txt,
            document_index.npy, sample_index.npy, shuffle_index.npy}; a blend
            {md5}-BlendedDataset-{split}-{description.txt, dataset_index.npy
            (int16), dataset_sample_index.npy (int64)} with description
            (class, datasets: [their dicts], split, weights, size).

Files written:

  corpus.json      seq_length, eod, and two synthetic corpora (lengths, flat
                   tokens), the in-memory datasets of the Go tests
  cases.json       per case: its inputs (blend or per-split blends, split,
                   seed, flags, pad id, requested samples and the run that
                   gives them) and per split the length, the first <= 100
                   samples' seq+1 tokens (pad ids as 0), masks for a few, and
                   the cache files gotron must write (name, sha256, dtype,
                   shape)
  cache_single/    the cache files of case "single", as numpy.save writes them
  nprand.json      numpy.random.RandomState draws, intervals and shuffles
  normalize.json   numpy's normalisation of weight vectors (pairwise sums)

--check also asserts, independently of build_sample_idx, that every sample
is the document stream (documents in document-index order) from s*seq to
s*seq + seq + 1.
"""

import argparse
import hashlib
import io
import json
import math
import os
import re
import sys
from collections import OrderedDict

import numpy

DEFAULT_DIR = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "data", "gptdata", "testdata"))
SEQ = 16
EOD = 2
PAD_DEFAULT = -1
SURPLUS = 0.005
SPLITS = ("train", "valid", "test")
N_SAMPLES_STORED = (100, 32, 32)  # train, valid, test
N_MASKS_STORED = 24


# ---------------------------------------------------------------- corpus


def make_corpus(seed, n_docs):
    """Documents of 0..71 tokens, ids in [3, 1000), each non-empty one ending in EOD."""
    rs = numpy.random.RandomState(seed)
    lengths = []
    tokens = []
    for d in range(n_docs):
        u = rs.randint(100)
        if u < 2:
            n = 0
        elif u < 5:
            n = 1
        elif u < 65:
            n = int(rs.randint(2, SEQ))
        elif u < 90:
            n = int(rs.randint(SEQ, 40))
        else:
            n = int(rs.randint(3 * SEQ, 72))
        doc = [int(t) for t in rs.randint(3, 1000, size=n)]
        if n:
            doc[-1] = EOD
        lengths.append(n)
        tokens.extend(doc)
    return numpy.array(lengths, dtype=numpy.int32), numpy.array(tokens, dtype=numpy.int64)


class Corpus:
    def __init__(self, prefix, seed, n_docs):
        self.prefix = prefix
        self.sizes, self.flat = make_corpus(seed, n_docs)
        self.starts = numpy.concatenate([[0], numpy.cumsum(self.sizes, dtype=numpy.int64)])

    def get(self, doc, offset=0, length=None):
        if length is None:
            length = int(self.sizes[doc]) - offset
        b = int(self.starts[doc]) + offset
        assert 0 <= offset and offset + length <= self.sizes[doc]
        return self.flat[b : b + length]


# ---------------------------------------------------------------- Megatron's rules


def normalize(weights):
    w = numpy.array(weights, dtype=numpy.float64)
    return (w / numpy.sum(w)).tolist()


def parse_split(s):
    v = [float(x) for x in re.findall(r"[.0-9]+", s)]
    v = v + [0.0] * (3 - len(v))
    assert len(v) == 3
    return normalize(v)


def split_matrix(vector):
    exp = [0]
    for x in vector:
        exp.append(exp[-1] + x)
    out = []
    for lo, hi in zip(exp[:-1], exp[1:]):
        out.append(None if hi <= lo else (lo, hi))
    return out


def get_blend_from_list(blend):
    if len(blend) % 2 == 1:
        return [p.strip() for p in blend], None
    ws, ps = [], []
    for i in range(0, len(blend), 2):
        try:
            ws.append(float(blend[i]))
        except ValueError:
            return [p.strip() for p in blend], None
        ps.append(blend[i + 1].strip())
    return ps, ws


def num_samples_for_run(train_iters, gbs, eval_interval, eval_iters):
    return [train_iters * gbs, (train_iters // eval_interval + 1) * eval_iters * gbs, eval_iters * gbs]


def size_per_dataset(weights, size, surplus):
    return [int(math.ceil(math.ceil(size * w) * (1 + surplus))) for w in weights]


def build_sample_idx(sizes, doc_idx, seq, epochs, tokens_per_epoch):
    """helpers.cpp build_sample_idx, drop_last_partial_sequence, one extra token."""
    extra = 1
    n = (epochs * tokens_per_epoch - extra) // seq
    dt = numpy.int32 if max(len(doc_idx), int(sizes.max())) <= numpy.iinfo(numpy.int32).max else numpy.int64
    out = numpy.zeros((n + 1, 2), dtype=dt)
    di, off = 0, 0
    for k in range(1, n + 1):
        remaining = seq + extra
        while remaining != 0:
            dl = int(sizes[doc_idx[di]]) - off
            remaining -= dl
            if remaining <= 0:
                off += remaining + dl - extra
                remaining = 0
            else:
                if di == len(doc_idx) - 1:
                    assert k == n
                    off = int(sizes[doc_idx[di]]) - extra
                    break
                di += 1
                off = 0
        out[k] = (di, off)
    return out


def build_document_index(docs, epochs, rs, separate):
    if not separate or epochs == 1:
        d = numpy.tile(numpy.asarray(docs, dtype=numpy.int32), epochs)
        rs.shuffle(d)
        return d
    first = build_document_index(docs, epochs - 1, rs, False)
    last = build_document_index(docs, 1, rs, False)
    return numpy.concatenate((first, last))


def build_shuffle_index(n, total, rs):
    dt = numpy.uint32 if total < numpy.iinfo(numpy.uint32).max - 1 else numpy.int64
    first = numpy.arange(n, dtype=dt)
    rs.shuffle(first)
    if n == total:
        return first
    last = numpy.arange(n, total, dtype=dt)
    rs.shuffle(last)
    return numpy.concatenate((first, last))


def build_blending_indices(weights, size):
    di = numpy.zeros(size, dtype=numpy.int16)
    dsi = numpy.zeros(size, dtype=numpy.int64)
    count = [0] * len(weights)
    for k in range(size):
        kd = max(float(k), 1.0)
        best, best_err = 0, weights[0] * kd - count[0]
        for d in range(1, len(weights)):
            err = weights[d] * kd - count[d]
            if err > best_err:
                best, best_err = d, err
        di[k] = best
        dsi[k] = count[best]
        count[best] += 1
    return di, dsi


def npy_bytes(a):
    b = io.BytesIO()
    numpy.save(b, a, allow_pickle=True)
    return b.getvalue()


def describe(ids):
    text = json.dumps(ids, indent=4)
    return text, hashlib.md5(text.encode("utf-8")).hexdigest()


class Config:
    def __init__(self, seed, split, reset_position_ids=False, reset_attention_mask=False, eod_mask_loss=False, pad=PAD_DEFAULT):
        self.seed = seed
        self.split = split
        self.matrix = None if split is None else split_matrix(parse_split(split))
        self.reset_position_ids = reset_position_ids
        self.reset_attention_mask = reset_attention_mask
        self.eod_mask_loss = eod_mask_loss
        self.pad = pad


class GPT:
    def __init__(self, corpus, bookend, num_samples, split, cfg):
        self.corpus, self.split, self.cfg, self.num_samples = corpus, split, cfg, num_samples
        n = len(corpus.sizes)
        beg, end = int(round(bookend[0] * float(n))), int(round(bookend[1] * float(n)))
        docs = numpy.arange(beg, end, dtype=numpy.int32)
        assert len(docs) > 0
        self.ids = OrderedDict()
        self.ids["class"] = "GPTDataset"
        self.ids["dataset_path"] = corpus.prefix
        self.ids["num_samples"] = num_samples
        self.ids["index_split"] = SPLITS[split]
        self.ids["random_seed"] = cfg.seed
        self.ids["sequence_length"] = SEQ
        self.ids["split"] = cfg.split
        self.ids["split_matrix"] = cfg.matrix
        self.description, self.hash = describe(self.ids)

        tpe = int(numpy.sum(corpus.sizes[docs]))
        assert tpe > 1
        epochs = 1
        if num_samples is not None:
            while epochs * tpe < num_samples * SEQ + 1:
                epochs += 1
        separate = False
        if epochs > 1:
            sans_final = ((epochs - 1) * tpe - 1) // SEQ
            per_epoch = (tpe - 1) // SEQ
            from_final = num_samples - sans_final
            assert 0 <= from_final <= per_epoch + 1
            separate = from_final < int(0.80 * per_epoch)
        self.epochs, self.separate = epochs, separate
        rs = numpy.random.RandomState(cfg.seed)
        self.doc_idx = build_document_index(docs, epochs, rs, separate)
        self.sample_idx = build_sample_idx(corpus.sizes, self.doc_idx, SEQ, epochs, tpe)
        total = self.sample_idx.shape[0] - 1
        self.shuffle_idx = build_shuffle_index(sans_final if separate else total, total, rs)
        self.check_stream()

    def __len__(self):
        return self.sample_idx.shape[0] - 1

    def files(self):
        base = "%s-GPTDataset-%s-" % (self.hash, SPLITS[self.split])
        return [
            (base + "description.txt", self.description.encode("utf-8"), None, None),
            (base + "document_index.npy", npy_bytes(self.doc_idx), self.doc_idx.dtype.str, list(self.doc_idx.shape)),
            (base + "sample_index.npy", npy_bytes(self.sample_idx), self.sample_idx.dtype.str, list(self.sample_idx.shape)),
            (base + "shuffle_index.npy", npy_bytes(self.shuffle_idx), self.shuffle_idx.dtype.str, list(self.shuffle_idx.shape)),
        ]

    def text(self, idx):
        """_query_document_sample_shuffle_indices: seq+1 tokens, padded."""
        idx = int(self.shuffle_idx[idx])
        b, bo = (int(x) for x in self.sample_idx[idx])
        e, eo = (int(x) for x in self.sample_idx[idx + 1])
        parts = []
        if b == e:
            parts.append(self.corpus.get(self.doc_idx[b], bo, eo - bo + 1))
        else:
            for i in range(b, e + 1):
                off = bo if i == b else 0
                ln = None if i < e else eo + 1
                parts.append(self.corpus.get(self.doc_idx[i], off, ln))
        text = numpy.concatenate(parts).astype(numpy.int64)
        if len(text) < SEQ + 1:
            text = numpy.concatenate([text, [self.cfg.pad] * (SEQ + 1 - len(text))]).astype(numpy.int64)
        return text

    def __getitem__(self, idx):
        return sample_from_text(self.text(idx), self.cfg)

    def check_stream(self):
        """Every unshuffled sample s is stream[s*seq : s*seq+seq+1] (a check of build_sample_idx)."""
        stream = numpy.concatenate([self.corpus.get(d) for d in self.doc_idx])
        at = numpy.concatenate([[0], numpy.cumsum(self.corpus.sizes[self.doc_idx], dtype=numpy.int64)])
        for s in range(len(self)):
            b, bo = (int(x) for x in self.sample_idx[s])
            e, eo = (int(x) for x in self.sample_idx[s + 1])
            pos_b, pos_e = int(at[b]) + bo, int(at[e]) + eo
            assert pos_b == s * SEQ and pos_e == (s + 1) * SEQ, (s, pos_b, pos_e)
            if s < 40 or s > len(self) - 3:
                want = stream[s * SEQ : s * SEQ + SEQ + 1]
                self.shuffle_idx, saved = numpy.arange(len(self)), self.shuffle_idx
                got = self.text(s)
                self.shuffle_idx = saved
                assert (got == want).all(), s
        assert sorted(self.shuffle_idx.tolist()) == list(range(len(self)))


def sample_from_text(text, cfg):
    """GPTDataset.__getitem__ and _get_ltor_masks_and_position_ids, with numpy."""
    tokens, labels = text[:-1].copy(), text[1:].copy()
    n = len(tokens)
    mask = numpy.tril(numpy.ones((n, n)))
    loss = numpy.ones(n, dtype=numpy.float32)
    if cfg.eod_mask_loss:
        loss[tokens == EOD] = 0.0
    pos = numpy.arange(n, dtype=numpy.int64)
    if cfg.reset_position_ids or cfg.reset_attention_mask:
        prev = 0
        for i in numpy.nonzero(tokens == EOD)[0]:
            if cfg.reset_attention_mask:
                mask[i + 1 :, : i + 1] = 0
            if cfg.reset_position_ids:
                pos[i + 1 :] -= i + 1 - prev
                prev = i + 1
    loss[labels == cfg.pad] = 0.0
    out = numpy.where(text == cfg.pad, 0, text)
    seg = numpy.concatenate([[0], numpy.cumsum(tokens == EOD)[:-1]])
    for t in range(n):  # the segments are the attention mask's block structure
        for u in range(n):
            assert bool(mask[t, u]) == (u <= t and (not cfg.reset_attention_mask or seg[u] == seg[t]))
    return {"tokens": out.tolist(), "loss_mask": loss.tolist(), "position_ids": pos.tolist(), "segments": seg.tolist()}


class Blended:
    def __init__(self, datasets, weights, size, split):
        assert all(w > 0 for w in weights)
        self.datasets, self.split = datasets, split
        self.weights = normalize(weights)
        self.size = size
        self.ids = OrderedDict()
        self.ids["class"] = "BlendedDataset"
        self.ids["datasets"] = [d.ids for d in datasets]
        self.ids["split"] = SPLITS[split]
        self.ids["weights"] = self.weights
        self.ids["size"] = size
        self.description, self.hash = describe(self.ids)
        self.dataset_index, self.dataset_sample_index = build_blending_indices(self.weights, size)
        for d, ds in enumerate(datasets):
            assert int(numpy.sum(self.dataset_index == d)) <= len(ds)

    def __len__(self):
        return self.size

    def files(self):
        base = "%s-BlendedDataset-%s-" % (self.hash, SPLITS[self.split])
        out = [(base + "description.txt", self.description.encode("utf-8"), None, None)]
        out.append((base + "dataset_index.npy", npy_bytes(self.dataset_index), "<i2", [self.size]))
        out.append((base + "dataset_sample_index.npy", npy_bytes(self.dataset_sample_index), "<i8", [self.size]))
        for d in self.datasets:
            out.extend(d.files())
        return out

    def __getitem__(self, idx):
        return self.datasets[self.dataset_index[idx]][int(self.dataset_sample_index[idx])]


def build_blend(corpora, prefixes, weights, cfg, matrix, sizes, split):
    """The builder's blend of one split (prefixes > 1, or weighted)."""
    if weights is not None:
        weights = normalize(weights)
        target = size_per_dataset(weights, sizes[split], 0.0)
        buffer = size_per_dataset(weights, sizes[split], SURPLUS)
        mids = [GPT(corpora[p], matrix[split], buffer[i], split, cfg) for i, p in enumerate(prefixes)]
        return Blended(mids, weights, sum(target), split)
    mids = [GPT(corpora[p], matrix[split], None, split, cfg) for p in prefixes]
    lens = [len(m) for m in mids]
    return Blended(mids, lens, min(sizes[split], sum(lens)), split)


def build(corpora, data_path, cfg, sizes):
    """BlendedMegatronDatasetBuilder with --data-path and --split; None for 0 samples."""
    prefixes, weights = get_blend_from_list(data_path)
    out = [None, None, None]
    for i in range(3):
        if cfg.matrix[i] is None or sizes[i] == 0:
            continue
        if len(prefixes) == 1 and weights is None:
            out[i] = GPT(corpora[prefixes[0]], cfg.matrix[i], sizes[i], i, cfg)
        else:
            out[i] = build_blend(corpora, prefixes, weights, cfg, cfg.matrix, sizes, i)
    return out


def build_per_split(corpora, paths, cfg, sizes):
    """The builder with --train/valid/test-data-path."""
    out = [None, None, None]
    for i in range(3):
        if paths[i] is None or sizes[i] == 0:
            continue
        prefixes, weights = get_blend_from_list(paths[i])
        spoof = [None, None, None]
        spoof[i] = (0.0, 1.0)
        if len(prefixes) == 1:
            out[i] = GPT(corpora[prefixes[0]], spoof[i], sizes[i], i, cfg)
        else:
            out[i] = build_blend(corpora, prefixes, weights, cfg, spoof, sizes, i)
    return out


# ---------------------------------------------------------------- cases


def cases():
    """name -> inputs. data_path / per_split hold the flags' values as lists of strings."""
    return OrderedDict(
        [
            ("single", dict(data_path=["corpus_a"], split="969,30,1", seed=1234, run=(25, 16, 10, 2), store_files=True)),
            ("masks", dict(data_path=["corpus_a"], split="969,30,1", seed=77, num_samples=[160, 0, 0], reset_position_ids=True, reset_attention_mask=True, eod_mask_loss=True, pad=7)),
            ("masks_position_only", dict(data_path=["corpus_a"], split="969,30,1", seed=77, num_samples=[160, 0, 0], reset_position_ids=True, stored=N_MASKS_STORED)),
            # corpus_b's 98 % split: 2777 tokens, 173 samples per epoch, threshold int(0.8*173) = 138,
            # 347 samples in two epochs: 484 takes 137 from the third epoch (separate), 485 takes 138.
            ("epochs_separate", dict(data_path=["corpus_b"], split="98,2,0", seed=5, num_samples=[484, 0, 0], want_epochs=3, want_separate=True)),
            ("epochs_joint", dict(data_path=["corpus_b"], split="98,2,0", seed=5, num_samples=[485, 0, 0], want_epochs=3, want_separate=False)),
            ("blend_weighted", dict(data_path=["0.3", "corpus_a", "0.7", "corpus_b"], split="90,8,2", seed=42, num_samples=[300, 40, 0])),
            ("blend_prefixes", dict(data_path=["corpus_a", "corpus_b"], split="90,8,2", seed=42, num_samples=[300, 40, 0])),
            ("blend_one_weighted", dict(data_path=["2", "corpus_b"], split="100,0,0", seed=9, num_samples=[120, 0, 0])),
            ("per_split", dict(per_split=[["corpus_a"], ["40", "corpus_a", "60", "corpus_b"], None], seed=3, num_samples=[200, 48, 0])),
        ]
    )


def compute(corpora, name, c):
    cfg = Config(
        c["seed"],
        c.get("split"),
        c.get("reset_position_ids", False),
        c.get("reset_attention_mask", False),
        c.get("eod_mask_loss", False),
        c.get("pad", PAD_DEFAULT),
    )
    sizes = num_samples_for_run(*c["run"]) if "run" in c else c["num_samples"]
    if "per_split" in c:
        ds = build_per_split(corpora, c["per_split"], cfg, sizes)
    else:
        ds = build(corpora, c["data_path"], cfg, sizes)
    if "want_epochs" in c:
        assert (ds[0].epochs, ds[0].separate) == (c["want_epochs"], c["want_separate"]), (ds[0].epochs, ds[0].separate)
    out = OrderedDict()
    out["name"] = name
    for k in ("data_path", "per_split", "split", "seed"):
        if k in c:
            out[k] = c[k]
    out["reset_position_ids"] = cfg.reset_position_ids
    out["reset_attention_mask"] = cfg.reset_attention_mask
    out["eod_mask_loss"] = cfg.eod_mask_loss
    out["pad"] = cfg.pad
    if "run" in c:
        out["run"] = OrderedDict(zip(("train_iters", "global_batch_size", "eval_interval", "eval_iters"), c["run"]))
    out["num_samples"] = sizes
    splits = []
    files = {}
    for i, d in enumerate(ds):
        if d is None:
            splits.append(None)
            continue
        s = OrderedDict()
        s["len"] = len(d)
        s["kind"] = type(d).__name__
        if isinstance(d, GPT):
            s["epochs"] = d.epochs
            s["separate_final_epoch"] = d.separate
        samples = [d[k] for k in range(min(c.get("stored", N_SAMPLES_STORED[i]), len(d)))]
        s["tokens"] = [x["tokens"] for x in samples]
        if cfg.pad != PAD_DEFAULT:  # a data token equal to the pad id: masked and zeroed
            assert any(0 in t for t in s["tokens"])
        if cfg.reset_position_ids or cfg.reset_attention_mask or cfg.eod_mask_loss or cfg.pad != PAD_DEFAULT:
            s["loss_mask"] = [x["loss_mask"] for x in samples[:N_MASKS_STORED]]
            s["position_ids"] = [x["position_ids"] for x in samples[:N_MASKS_STORED]] if cfg.reset_position_ids else None
            s["segments"] = [x["segments"] for x in samples[:N_MASKS_STORED]] if cfg.reset_attention_mask else None
        fl = []
        for fname, data, dtype, shape in d.files():
            files[fname] = data
            fl.append(OrderedDict([("name", fname), ("sha256", hashlib.sha256(data).hexdigest()), ("dtype", dtype), ("shape", shape)]))
        s["files"] = fl
        splits.append(s)
    out["splits"] = splits
    stored = files if c.get("store_files") else {}
    return out, stored


# ---------------------------------------------------------------- numpy fixtures


def nprand_fixture():
    out = OrderedDict()
    raws = []
    for seed in (0, 1, 1234, 5489, 2**32 - 1):
        rs = numpy.random.RandomState(seed)
        draws = [int(x) for x in rs.randint(0, 2**32, size=1000, dtype=numpy.uint64)]
        assert draws == [int(x) for x in numpy.random.RandomState(seed)._bit_generator.random_raw(1000)]
        raws.append(OrderedDict([("seed", seed), ("first", draws[:8]), ("at_999", draws[999])]))
    out["uint32"] = raws
    intervals = []
    for seed, mx in [(7, 1), (7, 2), (7, 3), (7, 5), (7, 100), (7, 1000), (8, 2**31 - 1), (8, 2**31), (8, 2**31 + 1), (9, 2**32 - 2), (9, 2**32 - 1), (10, 2**32), (10, 2**32 + 1), (11, 2**40 + 12345), (12, 2**63 + 5), (13, 2**64 - 2)]:
        rs = numpy.random.RandomState(seed)
        intervals.append(OrderedDict([("seed", seed), ("max", str(mx)), ("draws", [str(int(rs.randint(0, mx + 1, dtype=numpy.uint64))) for _ in range(12)])]))
    out["interval"] = intervals
    shuffles = []
    for seed, n, dt in [(1, 0, "int32"), (1, 1, "int32"), (1, 2, "int32"), (2, 10, "int32"), (3, 100, "uint32"), (4, 1000, "int64"), (1234, 257, "int32")]:
        rs = numpy.random.RandomState(seed)
        a = numpy.arange(n, dtype=dt)
        rs.shuffle(a)
        b = numpy.arange(n // 2 + 3, dtype=dt)
        rs.shuffle(b)  # the same state, continued
        shuffles.append(OrderedDict([("seed", seed), ("n", n), ("dtype", dt), ("first", a.tolist()), ("then", b.tolist())]))
    out["shuffle"] = shuffles
    return out


def normalize_fixture():
    rs = numpy.random.RandomState(31)
    vecs = [[0.3, 0.7], [969.0, 30.0, 1.0], [1.0, 1.0, 1.0], [0.1] * 7, [0.1] * 8, [0.1] * 9]
    for n in (5, 8, 13, 17, 130):
        vecs.append([float(x) for x in rs.exponential(size=n) * 10.0 ** rs.randint(-3, 4, size=n)])
    return [OrderedDict([("weights", v), ("normalized", normalize(v)), ("twice", normalize(normalize(v)))]) for v in vecs]


def generate():
    """relative path -> bytes."""
    corpora = OrderedDict()
    corpora["corpus_a"] = Corpus("corpus_a", 2024, 520)
    corpora["corpus_b"] = Corpus("corpus_b", 7, 150)
    files = OrderedDict()
    cj = OrderedDict([("seq_length", SEQ), ("eod", EOD), ("corpora", OrderedDict())])
    for name, c in corpora.items():
        cj["corpora"][name] = OrderedDict([("lengths", c.sizes.tolist()), ("tokens", c.flat.tolist())])
    files["corpus.json"] = dump(cj)
    all_cases = []
    for name, c in cases().items():
        out, stored = compute(corpora, name, c)
        all_cases.append(out)
        for fname, data in sorted(stored.items()):
            files["cache_%s/%s" % (name, fname)] = data
    files["cases.json"] = dump(all_cases)
    files["nprand.json"] = dump(nprand_fixture())
    files["normalize.json"] = dump(normalize_fixture())
    return files


def dump(v):
    """JSON with one short list per line, so the files stay small and diffable."""
    return (json.dumps(v, separators=(",", ":")).replace("],[", "],\n[") + "\n").encode("utf-8")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--out", metavar="DIR", help="write the fixtures here (default data/gptdata/testdata)")
    g.add_argument("--check", metavar="DIR", nargs="?", const=DEFAULT_DIR, help="recompute and compare the fixtures in DIR")
    args = ap.parse_args()
    files = generate()
    total = sum(len(b) for b in files.values())
    assert total < 200 * 1024, "fixtures of %d bytes: keep them under 200 KB" % total
    if args.check:
        bad = []
        for rel, data in files.items():
            path = os.path.join(args.check, rel)
            try:
                with open(path, "rb") as f:
                    if f.read() != data:
                        bad.append("differs: " + path)
            except OSError as e:
                bad.append("%s (%s)" % (path, e))
        for d in sorted({os.path.dirname(r) for r in files}):
            p = os.path.join(args.check, d)
            for name in sorted(os.listdir(p)) if os.path.isdir(p) else []:
                rel = os.path.join(d, name) if d else name
                if rel not in files and (d or name.endswith(".json")):
                    bad.append("not generated: " + os.path.join(args.check, rel))
        for b in bad:
            print(b, file=sys.stderr)
        if bad:
            sys.exit(1)
        print("%d gptdata fixtures (%d bytes) match in %s" % (len(files), total, args.check))
        return
    out = args.out or DEFAULT_DIR
    for rel, data in files.items():
        path = os.path.join(out, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)
    print("wrote %d gptdata fixtures (%d bytes) to %s" % (len(files), total, out))


if __name__ == "__main__":
    main()
