#!/usr/bin/python3
"""Independent reference of gotron's byte-level BPE tokenizers (data/tokenizer).

Regenerate the fixtures (plain Python 3 with Debian's python3-regex, no torch):

    /usr/bin/python3 tools/torchref/gpt2_bpe_ref.py            # write
    /usr/bin/python3 tools/torchref/gpt2_bpe_ref.py --check    # re-verify

Both default to data/tokenizer/testdata/ of this repository (--out DIR /
--check DIR choose another). GPT-2's vocabulary is read from the tiktoken ranks
file r50k_base.tiktoken (--ranks PATH; by default the copy in the Go module
cache, $(go env GOMODCACHE)/github.com/pkoukk/tiktoken-go-loader@v0.0.2/assets/,
which `go mod download` fetches). The output is deterministic.

GPT-2's encoder, written afresh from its published description:

    bytes_to_unicode: the bytes 0x21-0x7E, 0xA1-0xAC, 0xAE-0xFF stand for the
        code points of the same value; the other 68 bytes, in increasing order,
        for U+0100, U+0101, ... (so ' ' is U+0120 and '\\n' is U+010A).
    pattern: 's|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+
        applied with findall; each piece's UTF-8 bytes spelled in that alphabet.
    bpe: start from the piece's characters; while some adjacent pair is a merge,
        take the pair with the lowest merge rank and join every occurrence of it,
        left to right; the resulting symbols are looked up in the encoder.

r50k_base lists each token's bytes (base64) with its rank; the rank is the
token's id in GPT-2's encoder.json. The merges are derived here: the merge that
makes the token of rank r is found by repeatedly joining, in its bytes, the
adjacent pair whose concatenation has the lowest rank below r, until two parts
are left. The script checks that this gives 50000 merges whose results have the
ids 256, 257, ... in merge order (so the merge list is GPT-2's merges.txt), that
encoding by those merges equals encoding directly by ranks (tiktoken's way) on
every text, and a few widely published ids ("Hello world" = [15496, 995]).
"<|endoftext|>" (50256) is matched as a whole string before pre-tokenization, as
the Hugging Face GPT-2 tokenizer that Megatron's GPT2BPETokenizer uses does.

Files written:

    gpt2_ids.json        GPT-2 on TEXTS: {text, pieces (the findall of the
                         pattern over the whole text), ids}
    tiny_gpt2/vocab.json, tiny_gpt2/merges.txt
                         GPT-2 cut to its first TINY_MERGES merges (vocab.json:
                         the 256 bytes, the merges' results, "<|endoftext|>"),
                         in the files' usual formats
    tiny_gpt2_ids.json   that tiny GPT-2 on TEXTS: {text, ids}
    tiny_ids.json        the hand-written tiny_tokenizer.json (read, not
                         written) on TINY_TEXTS, by Hugging Face's rules:
                         added tokens (non-normalized first, then normalized,
                         leftmost-longest, single_word, lstrip, rstrip), ByteLevel
                         pre-tokenizer (add_prefix_space per segment), BPE merging
                         the lowest-ranked pair one at a time (leftmost first),
                         unknown characters as unk_token (fused), and the
                         TemplateProcessing post-processor.
"""

import argparse
import base64
import json
import os
import subprocess
import sys

import regex

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_DIR = os.path.normpath(os.path.join(HERE, "..", "..", "data", "tokenizer", "testdata"))
MODULE = "github.com/pkoukk/tiktoken-go-loader@v0.0.2"
EOT = "<|endoftext|>"
PATTERN = regex.compile(r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""")
TINY_MERGES = 300

PARAGRAPH = (
    "Before movable type reached Europe, a book was copied by hand, letter by letter, and a "
    "scribe who worked steadily might finish a few pages a day. The press changed the arithmetic "
    "of knowledge: once the type for a page had been set, each further copy cost only paper, ink "
    "and the labour of pulling the lever. Within fifty years of the first printed Bible, presses "
    "were running in more than two hundred towns, and the number of books in circulation grew "
    "from tens of thousands to millions. Prices fell; readers multiplied; spelling, which had "
    "wandered freely from one manuscript to the next, began to settle.\n\n"
    "It is easy to overstate the speed of the change. Many early printers went bankrupt, because "
    "a run of 300 copies tied up money for months before the last one was sold, and a single "
    "error in a forme could spoil a whole sheet. Scholars complained that cheap editions were "
    "full of mistakes (\"corrupted,\" one of them wrote, \"by ignorant compositors\"), and some "
    "collectors refused to keep printed books at all. Yet the economics were relentless. A "
    "workshop with two presses, six journeymen and a boy could produce 3,600 impressions in a "
    "working day of roughly 14 hours; a monastery's scriptorium could not compete.\n\n"
    "The consequences reached far beyond the book trade. Merchants printed price lists and "
    "exchange tables; governments printed proclamations, tax forms and maps; teachers printed "
    "grammars, so that pupils in different cities learned the same rules in the same order. "
    "Scientists could compare observations made hundreds of miles apart, because their tables "
    "were identical down to the last digit \u2014 or identically wrong, which was almost as "
    "useful, since a misprint could be corrected once and for everyone. News, too, became a "
    "commodity: by the early seventeenth century weekly sheets were sold in Strasbourg, Antwerp "
    "and Amsterdam, reporting battles, harvests and the arrival of ships.\n\n"
    "Today's readers inherit habits that the press created. We expect page numbers, indexes and "
    "title pages; we assume that two copies of the same edition say the same thing; we cite "
    "\u201cp. 217\u201d and trust the reference to hold. None of this was obvious in 1450. Each "
    "convention had to be invented, argued over and slowly adopted, often by printers who cared "
    "less about scholarship than about selling their stock before the rent was due. In that "
    "sense the history of printing is less the story of a machine than of thousands of small "
    "decisions \u2014 about fonts, margins, paper sizes, prices \u2014 made by people trying to "
    "stay in business, whose choices still shape the page you are reading now.\n"
)

TEXTS = [
    "Hello world",
    " the",
    "",
    " ",
    "   ",
    "a  b",
    "hello   world",
    "Hello\n\nworld\n",
    "\n",
    "\r\n",
    "\t\tindented\tcode\n    four spaces",
    "trailing spaces   ",
    "   leading spaces",
    "mixed \t \n whitespace \r\n runs",
    "I'm you're they've we'll he'd it's don't",
    "I'M YOU'RE THEY'VE",
    "'s's 's 'S ''' '",
    "Caf\u00e9 na\u00efve r\u00e9sum\u00e9 fa\u00e7ade \u00dcn\u00efc\u00f6d\u00e9 \u00c0\u00c9\u00ce\u00d5\u00dc \u00df \u1e9e",
    "e\u0301 combining acute, n\u0303",
    "\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8\u3068\u4e2d\u6587\u6587\u672c",
    "\ud55c\uad6d\uc5b4 \ud14d\uc2a4\ud2b8",
    "\u0420\u0443\u0441\u0441\u043a\u0438\u0439 \u0442\u0435\u043a\u0441\u0442, \u0395\u03bb\u03bb\u03b7\u03bd\u03b9\u03ba\u03ac, \u05e2\u05d1\u05e8\u05d9\u05ea, \u0627\u0644\u0639\u0631\u0628\u064a\u0629",
    "\u0939\u093f\u0928\u094d\u0926\u0940 \u092d\u093e\u0937\u093e",
    "Emoji \U0001f600\U0001f44d\U0001f3fd family \U0001f468\u200d\U0001f469\u200d\U0001f467\u200d\U0001f466 flag \U0001f1eb\U0001f1f7",
    "12345 3.14159 1,000,000 \uff12\uff10\uff12\uff14 \u00bd \u2153 \u216b 12345678901234567890",
    "x=1;y=2;z=x+y**2 // comment",
    "func main() {\n\tfmt.Println(\"hi\")\n}\n",
    "URL https://example.com/path?q=1&r=2#frag, email someone@example.org",
    "!!!???...,,,;;;::: --- ***",
    "\u00a0nbsp\u3000ideographic\u2028line\u2029para\u0085nel\u2003em",
    "zero\u200bwidth\u200djoiner\ufeffbom\u00adsoft",
    "control \x01\x02\x1b[0m chars \x7f\x1c\x1f end",
    "\x00 nul \x00",
    "<|endoftext|>",
    "Hello<|endoftext|>World",
    "<|endoftext|><|endoftext|> <|endoftext|>\n",
    "<|endoftext <|endoftext|",
    "pneumonoultramicroscopicsilicovolcanoconiosis" * 4,
    "=" * 300,
    "a" * 200,
    PARAGRAPH,
]

TINY_TEXTS = [
    "hello world",
    "hello world!",
    "hello",
    "bab",
    "aba abab",
    "<s>hello</s>",
    "<s>ab",
    "<s>abab",
    "hello   <mask> world",
    "hello<mask>",
    "<mask>",
    "hello wor world",
    "a wor",
    "awor",
    "wor!",
    "xyz",
    "h\u00e9llo",
    "hello\nworld",
    "",
    " ",
    "  hello",
    "</s></s>",
    "hello\nwor",
    "a\u0301wor wor_ wor\u3000",
]


def bytes_to_unicode():
    keep = list(range(0x21, 0x7F)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    table, extra = {}, 0
    for b in range(256):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return table


BYTE_ENCODER = bytes_to_unicode()


def spell(data):
    return "".join(BYTE_ENCODER[b] for b in data)


def load_ranks(path):
    tokens = []
    with open(path, "rb") as f:
        for n, line in enumerate(f.read().split(b"\n"), 1):
            if not line:
                continue
            b64, rank = line.split(b" ")
            if int(rank) != len(tokens):
                raise SystemExit("%s: line %d: rank %s, want %d" % (path, n, rank, len(tokens)))
            tokens.append(base64.b64decode(b64, validate=True))
    return tokens


def derive_merges(tokens):
    """The merge (left bytes, right bytes) of every token longer than one byte, in rank order."""
    rank = {t: r for r, t in enumerate(tokens)}
    merges = []
    for r, tok in enumerate(tokens):
        if len(tok) == 1:
            continue
        parts = [tok[i:i + 1] for i in range(len(tok))]
        while len(parts) > 2:
            cands = [(rank[parts[i] + parts[i + 1]], i) for i in range(len(parts) - 1)
                     if rank.get(parts[i] + parts[i + 1], r) < r]
            if not cands:
                break
            _, i = min(cands)
            parts[i:i + 2] = [parts[i] + parts[i + 1]]
        if len(parts) != 2:
            raise SystemExit("token %d %r does not split into two lower-ranked tokens" % (r, tok))
        merges.append((parts[0], parts[1], r))
    return merges


class GPT2:
    """GPT-2's encoder (encoder.py's algorithm) over a vocabulary and a merge list."""

    def __init__(self, encoder, merges):
        self.encoder = encoder  # spelled token -> id
        self.ranks = {pair: i for i, pair in enumerate(merges)}  # (spelled a, spelled b) -> rank
        self.cache = {}

    def bpe(self, word):
        if word in self.cache:
            return self.cache[word]
        syms = list(word)
        while len(syms) > 1:
            pairs = set(zip(syms, syms[1:]))
            best = min(pairs, key=lambda p: self.ranks.get(p, float("inf")))
            if best not in self.ranks:
                break
            out, i = [], 0
            while i < len(syms):
                if i + 1 < len(syms) and (syms[i], syms[i + 1]) == best:
                    out.append(syms[i] + syms[i + 1])
                    i += 2
                else:
                    out.append(syms[i])
                    i += 1
            syms = out
        self.cache[word] = syms
        return syms

    def encode(self, text):
        ids = []
        for k, seg in enumerate(text.split(EOT)):
            if k > 0:
                ids.append(self.encoder[EOT])
            for piece in PATTERN.findall(seg):
                ids.extend(self.encoder[s] for s in self.bpe(spell(piece.encode("utf-8"))))
        return ids


def rank_encode(rank, text, eot):
    """tiktoken's way: merge the adjacent pair whose concatenation has the lowest rank."""
    ids = []
    for k, seg in enumerate(text.split(EOT)):
        if k > 0:
            ids.append(eot)
        for piece in PATTERN.findall(seg):
            parts = [bytes([b]) for b in piece.encode("utf-8")]
            while len(parts) > 1:
                cands = [(rank[parts[i] + parts[i + 1]], i) for i in range(len(parts) - 1)
                         if parts[i] + parts[i + 1] in rank]
                if not cands:
                    break
                _, i = min(cands)
                parts[i:i + 2] = [parts[i] + parts[i + 1]]
            ids.extend(rank[p] for p in parts)
    return ids


# ---- Hugging Face tokenizer.json rules, for the tiny hand-written file ----

# \Z, not $: Python's $ also matches before a final newline; Rust's (Hugging Face's) does not.
WORD_END = regex.compile(r"\w\Z")
WORD_START = regex.compile(r"\A\w")
SPACE_END = regex.compile(r"\s*\Z")
SPACE_START = regex.compile(r"\A\s*")


class HFTiny:
    def __init__(self, cfg):
        model = cfg["model"]
        assert model["type"] == "BPE" and cfg["pre_tokenizer"]["type"] == "ByteLevel"
        self.vocab = model["vocab"]
        self.ranks = {}
        for i, m in enumerate(model["merges"]):
            a, b = m.split(" ") if isinstance(m, str) else m
            self.ranks[(a, b)] = i
        self.unk = model.get("unk_token")
        self.fuse_unk = model.get("fuse_unk", False)
        self.prefix_space = cfg["pre_tokenizer"].get("add_prefix_space", False)
        self.added = cfg["added_tokens"]
        self.pre, self.post = self.template(cfg["post_processor"])

    @staticmethod
    def template(proc):
        if proc["type"] == "Sequence":
            pre, post = [], []
            for p in proc["processors"]:
                a, b = HFTiny.template(p)
                pre, post = a + pre, post + b
            return pre, post
        if proc["type"] == "ByteLevel":
            return [], []
        assert proc["type"] == "TemplateProcessing"
        pre, post, seen = [], [], False
        for piece in proc["single"]:
            if "Sequence" in piece:
                seen = True
            else:
                (post if seen else pre).extend(proc["special_tokens"][piece["SpecialToken"]["id"]]["ids"])
        return pre, post

    def find(self, text, tokens):
        """Split text at the tokens: [(text, None) | (matched text, id)]."""
        out, done, i = [], 0, 0
        while i < len(text):
            hits = [t for t in tokens if text.startswith(t["content"], i)]
            if not hits:
                i += 1
                continue
            t = max(hits, key=lambda t: len(t["content"]))
            start, stop = i, i + len(t["content"])
            i = stop
            if start < done:  # inside whitespace an rstrip took (Hugging Face would overlap)
                continue
            if t.get("single_word") and (WORD_END.search(text[:start]) or WORD_START.search(text[stop:])):
                continue
            if t.get("lstrip"):
                start = max(SPACE_END.search(text[:start]).start(), done)
            if t.get("rstrip"):
                stop += SPACE_START.search(text[stop:]).end()
            if done < start:
                out.append((text[done:start], None))
            out.append((text[start:stop], t["id"]))
            done = stop
        if done < len(text):
            out.append((text[done:], None))
        return out

    def bpe(self, word):
        syms, prev_unk = [], False
        for ch in word:
            if ch in self.vocab:
                syms.append(ch)
                prev_unk = False
            else:
                if not (self.fuse_unk and prev_unk):
                    syms.append(self.unk)
                prev_unk = True
        while True:
            cands = [(self.ranks[(syms[i], syms[i + 1])], i) for i in range(len(syms) - 1)
                     if (syms[i], syms[i + 1]) in self.ranks]
            if not cands:
                return [self.vocab[s] for s in syms]
            _, i = min(cands)
            syms[i:i + 2] = [syms[i] + syms[i + 1]]

    def encode(self, text):
        raw = [t for t in self.added if not t.get("normalized")]
        norm = [t for t in self.added if t.get("normalized")]
        ids = list(self.pre)
        for seg, sid in self.find(text, raw):
            if sid is not None:
                ids.append(sid)
                continue
            for seg2, sid2 in self.find(seg, norm):
                if sid2 is not None:
                    ids.append(sid2)
                    continue
                if self.prefix_space and not seg2.startswith(" "):
                    seg2 = " " + seg2
                for piece in PATTERN.findall(seg2):
                    ids.extend(self.bpe(spell(piece.encode("utf-8"))))
        return ids + self.post


def dump(doc):
    """JSON with one case per line."""
    head = ",\n".join("  %s: %s" % (json.dumps(k), json.dumps(v)) for k, v in doc.items() if k != "cases")
    cases = ",\n".join("    " + json.dumps(c) for c in doc["cases"])
    return "{\n%s,\n  \"cases\": [\n%s\n  ]\n}\n" % (head, cases)


def default_ranks():
    try:
        cache = subprocess.run(["go", "env", "GOMODCACHE"], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError) as e:
        raise SystemExit("cannot run `go env GOMODCACHE` (%s): give --ranks PATH to r50k_base.tiktoken" % e)
    return os.path.join(cache, MODULE, "assets", "r50k_base.tiktoken")


def build(ranks_path, testdata):
    tokens = load_ranks(ranks_path)
    rank = {t: r for r, t in enumerate(tokens)}
    eot = len(tokens)
    merges = derive_merges(tokens)
    if len(tokens) != 50256 or len(merges) != 50000:
        raise SystemExit("r50k: %d tokens and %d merges, want 50256 and 50000" % (len(tokens), len(merges)))
    for i, (a, b, r) in enumerate(merges):
        if r != 256 + i:
            raise SystemExit("merge %d makes the token of rank %d, want %d" % (i, r, 256 + i))
    encoder = {spell(t): r for r, t in enumerate(tokens)}
    encoder[EOT] = eot
    spelled = [(spell(a), spell(b)) for a, b, _ in merges]
    gpt2 = GPT2(encoder, spelled)

    published = {"Hello world": [15496, 995], " the": [262], EOT: [50256], "\n\n": [628]}
    for text, want in published.items():
        if gpt2.encode(text) != want:
            raise SystemExit("GPT-2 %r: %r, want the published %r" % (text, gpt2.encode(text), want))

    files = {}
    cases = []
    for text in TEXTS:
        ids = gpt2.encode(text)
        if ids != rank_encode(rank, text, eot):
            raise SystemExit("%r: merge encoding and rank encoding differ" % text)
        if b"".join(tokens[i] if i < eot else EOT.encode() for i in ids) != text.encode("utf-8"):
            raise SystemExit("%r: the ids do not decode to the text" % text)
        cases.append({"text": text, "pieces": PATTERN.findall(text), "ids": ids})
    files["gpt2_ids.json"] = dump({
        "comment": "GPT-2 (r50k_base ranks, merges derived from them) on varied texts; pieces = findall of GPT-2's pattern over the whole text",
        "producer": "tools/torchref/gpt2_bpe_ref.py",
        "vocab_size": eot + 1,
        "eod": eot,
        "cases": cases,
    })

    tiny_encoder = {spell(t): r for r, t in enumerate(tokens) if r < 256 + TINY_MERGES}
    tiny_encoder[EOT] = 256 + TINY_MERGES
    tiny = GPT2(tiny_encoder, spelled[:TINY_MERGES])
    files["tiny_gpt2/vocab.json"] = json.dumps(tiny_encoder)
    files["tiny_gpt2/merges.txt"] = "#version: 0.2\n" + "".join("%s %s\n" % p for p in spelled[:TINY_MERGES])
    files["tiny_gpt2_ids.json"] = dump({
        "comment": "GPT-2 cut to its first %d merges (tiny_gpt2/) on the texts of gpt2_ids.json" % TINY_MERGES,
        "producer": "tools/torchref/gpt2_bpe_ref.py",
        "vocab_size": 256 + TINY_MERGES + 1,
        "eod": 256 + TINY_MERGES,
        "cases": [{"text": t, "ids": tiny.encode(t)} for t in TEXTS],
    })

    with open(os.path.join(testdata, "tiny_tokenizer.json"), encoding="utf-8") as f:
        hf = HFTiny(json.load(f))
    files["tiny_ids.json"] = dump({
        "comment": "the hand-written tiny_tokenizer.json on small texts, by Hugging Face's rules",
        "producer": "tools/torchref/gpt2_bpe_ref.py",
        "cases": [{"text": t, "ids": hf.encode(t)} for t in TINY_TEXTS],
    })
    return files


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--out", metavar="DIR", help="write the fixtures here (default %s)" % DEFAULT_DIR)
    g.add_argument("--check", metavar="DIR", nargs="?", const=DEFAULT_DIR, help="compare the fixtures in DIR instead of writing")
    ap.add_argument("--ranks", metavar="PATH", help="r50k_base.tiktoken (default: the Go module cache's copy)")
    args = ap.parse_args()
    ranks = args.ranks or default_ranks()
    testdata = args.check or args.out or DEFAULT_DIR
    files = build(ranks, testdata)
    if args.check:
        bad = []
        for name, text in files.items():
            path = os.path.join(testdata, name)
            try:
                with open(path, encoding="utf-8", newline="") as f:
                    if f.read() != text:
                        bad.append(path)
            except OSError as e:
                bad.append("%s (%s)" % (path, e))
        for path in bad:
            print("differs: " + path, file=sys.stderr)
        if bad:
            sys.exit(1)
        print("%d tokenizer fixtures match in %s" % (len(files), testdata))
        return
    for name, text in files.items():
        path = os.path.join(testdata, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8", newline="") as f:
            f.write(text)
    print("wrote %d tokenizer fixtures to %s" % (len(files), testdata))


if __name__ == "__main__":
    main()
