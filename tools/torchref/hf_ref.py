"""Independent Hugging Face model forwards for gotron's checkpoint conversion.

gotron converts its checkpoints to and from Hugging Face's layout for two
families (`gotron ckpt convert --to-hf` / `--from-hf`): GPT-2
(`GPT2LMHeadModel`) and Llama (`LlamaForCausalLM`). This script writes, for
each family, a small random model as Hugging Face stores it -- `config.json`
and `model.safetensors` with the family's tensor names and layouts -- and the
logits its forward pass gives for fixed token ids, computed here from the
families' published definitions:

GPT-2 (Radford et al. 2019; Hugging Face's modeling_gpt2):
    h = wte[ids] + wpe[positions]
    per block:  a = ln_1(h)
                q, k, v = split(a @ c_attn.weight + c_attn.bias)      Conv1D: weight [in, out]
                h = h + (causal softmax(q kT / sqrt(d)) v) @ c_proj.weight + c_proj.bias
                h = h + gelu(ln_2(h) @ c_fc.weight + c_fc.bias) @ mlp.c_proj.weight + bias
    logits = ln_f(h) @ wteT                                           (tied; lm_head.weight if not)
    gelu is activation_function: "gelu_new" (tanh form) or "gelu" (erf form).

Llama (Touvron et al. 2023; Hugging Face's modeling_llama):
    h = embed_tokens[ids]
    per layer:  a = rmsnorm(h) * input_layernorm.weight,  rmsnorm(x) = x / sqrt(mean(x^2) + eps)
                q, k, v = a @ q_projT, a @ k_projT, a @ v_projT        [heads, d], [kv heads, d]
                q, k = rope(q), rope(k): x*cos + rotate_half(x)*sin,
                       rotate_half(x) = cat(-x[d/2:], x[:d/2]), angle p * theta^(-2i/d)
                keys and values repeated to the query heads of their group
                h = h + (causal softmax(q kT / sqrt(d)) v) @ o_projT
                m = rmsnorm(h) * post_attention_layernorm.weight
                h = h + (silu(m @ gate_projT) * (m @ up_projT)) @ down_projT
    logits = (rmsnorm(h) * norm.weight) @ lm_head.weightT

It shares no code with gotron. Usage (Debian's python3-torch):

    /usr/bin/python3 tools/torchref/hf_ref.py --family gpt2 --out testdata/hf_gpt2
    /usr/bin/python3 tools/torchref/hf_ref.py --check testdata/hf_gpt2   # recompute, compare
    /usr/bin/python3 tools/torchref/hf_ref.py --logits testdata/hf_export_llama  # a gotron export's logits

The second kind of fixture, testdata/hf_export_{gpt2,llama}, goes the other
way: ckpt/hf's test writes a seeded gotron model exported to Hugging Face's
layout (GOTRON_UPDATE_HF_EXPORT=1 go test -run TestExportMatchesPyTorch
./ckpt/hf), and --logits adds the PyTorch forward's logits of those files,
which gotron's logits of the original model must match.
"""

import argparse
import json
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import st_io  # noqa: E402

# The fixtures' shapes: vocabularies that gotron pads (not multiples of
# 128), grouped-query attention and untied embeddings for Llama.
FAMILIES = {
    "gpt2": {
        "architectures": ["GPT2LMHeadModel"], "model_type": "gpt2",
        "vocab_size": 100, "n_positions": 16, "n_embd": 32, "n_layer": 2, "n_head": 4,
        "n_inner": None, "activation_function": "gelu_new", "layer_norm_epsilon": 1e-5,
        "resid_pdrop": 0.0, "embd_pdrop": 0.0, "attn_pdrop": 0.0,
        "tie_word_embeddings": True, "bos_token_id": 99, "eos_token_id": 99,
        "torch_dtype": "float32",
    },
    "llama": {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama",
        "vocab_size": 100, "hidden_size": 32, "intermediate_size": 48,
        "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
        "max_position_embeddings": 64, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
        "hidden_act": "silu", "tie_word_embeddings": False, "attention_bias": False,
        "mlp_bias": False, "torch_dtype": "float32",
    },
}

SEQ, ROWS = 12, 2


def gpt2_weights(c, g):
    h, n, f = c["n_embd"], c["n_layer"], c["n_inner"] or 4 * c["n_embd"]
    w = {"transformer.wte.weight": torch.randn(c["vocab_size"], h, generator=g) * 0.2,
         "transformer.wpe.weight": torch.randn(c["n_positions"], h, generator=g) * 0.1,
         "transformer.ln_f.weight": 1 + 0.1 * torch.randn(h, generator=g),
         "transformer.ln_f.bias": 0.1 * torch.randn(h, generator=g)}
    for i in range(n):
        p = "transformer.h.%d." % i
        for ln in ("ln_1", "ln_2"):
            w[p + ln + ".weight"] = 1 + 0.1 * torch.randn(h, generator=g)
            w[p + ln + ".bias"] = 0.1 * torch.randn(h, generator=g)
        for name, shape in (("attn.c_attn", (h, 3 * h)), ("attn.c_proj", (h, h)),
                            ("mlp.c_fc", (h, f)), ("mlp.c_proj", (f, h))):
            w[p + name + ".weight"] = torch.randn(*shape, generator=g) * 0.2
            w[p + name + ".bias"] = 0.1 * torch.randn(shape[1], generator=g)
    if not c["tie_word_embeddings"]:
        w["lm_head.weight"] = torch.randn(c["vocab_size"], h, generator=g) * 0.2
    return w


def llama_weights(c, g):
    h, n, f = c["hidden_size"], c["num_hidden_layers"], c["intermediate_size"]
    d = c.get("head_dim") or h // c["num_attention_heads"]
    kv = c["num_key_value_heads"] * d
    q = c["num_attention_heads"] * d
    w = {"model.embed_tokens.weight": torch.randn(c["vocab_size"], h, generator=g) * 0.2,
         "model.norm.weight": 1 + 0.1 * torch.randn(h, generator=g)}
    for i in range(n):
        p = "model.layers.%d." % i
        w[p + "input_layernorm.weight"] = 1 + 0.1 * torch.randn(h, generator=g)
        w[p + "post_attention_layernorm.weight"] = 1 + 0.1 * torch.randn(h, generator=g)
        for name, shape in (("self_attn.q_proj", (q, h)), ("self_attn.k_proj", (kv, h)),
                            ("self_attn.v_proj", (kv, h)), ("self_attn.o_proj", (h, q)),
                            ("mlp.gate_proj", (f, h)), ("mlp.up_proj", (f, h)),
                            ("mlp.down_proj", (h, f))):
            w[p + name + ".weight"] = torch.randn(*shape, generator=g) * 0.2
    if not c["tie_word_embeddings"]:
        w["lm_head.weight"] = torch.randn(c["vocab_size"], h, generator=g) * 0.2
    return w


def causal_attention(q, k, v):
    """q, k, v [b, heads, s, d] -> [b, s, heads*d]."""
    d = q.shape[-1]
    s = q.shape[2]
    scores = q @ k.transpose(-1, -2) / math.sqrt(d)
    mask = torch.triu(torch.ones(s, s, dtype=torch.bool), diagonal=1)
    scores = scores.masked_fill(mask, float("-inf"))
    out = torch.softmax(scores, dim=-1) @ v
    return out.transpose(1, 2).reshape(q.shape[0], s, -1)


def layer_norm(x, w, b, eps):
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).mean(-1, keepdim=True)
    return (x - mean) / torch.sqrt(var + eps) * w + b


def gelu(x, form):
    if form == "gelu_new":
        return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
    if form == "gelu":
        return 0.5 * x * (1 + torch.erf(x / math.sqrt(2)))
    raise SystemExit("hf_ref: activation_function %r is not GPT-2's gelu_new or gelu" % form)


def strip(w, prefix):
    return {k[len(prefix):] if k.startswith(prefix) else k: v for k, v in w.items()}


def gpt2_logits(c, w, ids):
    w = strip(w, "transformer.")
    b, s = ids.shape
    nh = c["n_head"]
    eps = c["layer_norm_epsilon"]
    x = w["wte.weight"][ids] + w["wpe.weight"][:s]
    for i in range(c["n_layer"]):
        p = "h.%d." % i
        a = layer_norm(x, w[p + "ln_1.weight"], w[p + "ln_1.bias"], eps)
        qkv = a @ w[p + "attn.c_attn.weight"] + w[p + "attn.c_attn.bias"]
        q, k, v = qkv.split(c["n_embd"], dim=-1)
        heads = lambda t: t.reshape(b, s, nh, -1).transpose(1, 2)  # noqa: E731
        ctx = causal_attention(heads(q), heads(k), heads(v))
        x = x + ctx @ w[p + "attn.c_proj.weight"] + w[p + "attn.c_proj.bias"]
        m = layer_norm(x, w[p + "ln_2.weight"], w[p + "ln_2.bias"], eps)
        m = gelu(m @ w[p + "mlp.c_fc.weight"] + w[p + "mlp.c_fc.bias"], c["activation_function"])
        x = x + m @ w[p + "mlp.c_proj.weight"] + w[p + "mlp.c_proj.bias"]
    x = layer_norm(x, w["ln_f.weight"], w["ln_f.bias"], eps)
    head = w.get("lm_head.weight", w["wte.weight"])
    return x @ head.t()


def rms_norm(x, w, eps):
    return x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps) * w


def rope(x, theta):
    """x [b, heads, s, d], rotate_half form."""
    d, s = x.shape[-1], x.shape[2]
    inv = 1.0 / (theta ** (torch.arange(0, d, 2, dtype=torch.float64) / d))
    ang = torch.outer(torch.arange(s, dtype=torch.float64), inv)
    ang = torch.cat([ang, ang], dim=-1)
    cos, sin = ang.cos().to(x.dtype), ang.sin().to(x.dtype)
    half = torch.cat([-x[..., d // 2:], x[..., : d // 2]], dim=-1)
    return x * cos + half * sin


def llama_logits(c, w, ids):
    w = strip(w, "model.")
    b, s = ids.shape
    nh, nkv = c["num_attention_heads"], c["num_key_value_heads"]
    eps, theta = c["rms_norm_eps"], c["rope_theta"]
    x = w["embed_tokens.weight"][ids]
    for i in range(c["num_hidden_layers"]):
        p = "layers.%d." % i
        a = rms_norm(x, w[p + "input_layernorm.weight"], eps)
        q = (a @ w[p + "self_attn.q_proj.weight"].t()).reshape(b, s, nh, -1).transpose(1, 2)
        k = (a @ w[p + "self_attn.k_proj.weight"].t()).reshape(b, s, nkv, -1).transpose(1, 2)
        v = (a @ w[p + "self_attn.v_proj.weight"].t()).reshape(b, s, nkv, -1).transpose(1, 2)
        q, k = rope(q, theta), rope(k, theta)
        k = k.repeat_interleave(nh // nkv, dim=1)
        v = v.repeat_interleave(nh // nkv, dim=1)
        x = x + causal_attention(q, k, v) @ w[p + "self_attn.o_proj.weight"].t()
        m = rms_norm(x, w[p + "post_attention_layernorm.weight"], eps)
        gate = m @ w[p + "mlp.gate_proj.weight"].t()
        up = m @ w[p + "mlp.up_proj.weight"].t()
        x = x + (torch.nn.functional.silu(gate) * up) @ w[p + "mlp.down_proj.weight"].t()
    x = rms_norm(x, w["norm.weight"], eps)
    head = w["lm_head.weight"] if "lm_head.weight" in w else w["embed_tokens.weight"]
    return x @ head.t()


def logits_of(c, w, ids):
    if c["model_type"] == "gpt2":
        return gpt2_logits(c, w, ids)
    if c["model_type"] == "llama":
        return llama_logits(c, w, ids)
    raise SystemExit("hf_ref: model_type %r: gpt2 or llama" % c["model_type"])


def fixed_ids(vocab):
    """ROWS rows of SEQ token ids, every id of the vocabulary's ends among them."""
    g = torch.Generator().manual_seed(7)
    ids = torch.randint(0, vocab, (ROWS, SEQ), generator=g)
    ids[0, 0], ids[1, 1] = 0, vocab - 1
    return ids


def write(family, out):
    c = FAMILIES[family]
    g = torch.Generator().manual_seed(2026)
    w = (gpt2_weights if family == "gpt2" else llama_weights)(c, g)
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(c, f, indent=2, sort_keys=True)
        f.write("\n")
    st_io.save(os.path.join(out, "model.safetensors"), w, metadata={"format": "pt"})
    ids = fixed_ids(c["vocab_size"])
    with torch.no_grad():
        logits = logits_of(c, w, ids)
    st_io.save(os.path.join(out, "logits.safetensors"),
               {"logits": logits, "input_ids": ids.to(torch.float32)})
    print("hf_ref: wrote %s (%s, logits %s)" % (out, family, list(logits.shape)))


def logits_for(d):
    """Write d/logits.safetensors for the model d holds (a gotron export)."""
    with open(os.path.join(d, "config.json")) as f:
        c = json.load(f)
    w, _ = st_io.load(os.path.join(d, "model.safetensors"))
    ids = fixed_ids(c["vocab_size"])
    with torch.no_grad():
        logits = logits_of(c, w, ids)
    st_io.save(os.path.join(d, "logits.safetensors"),
               {"logits": logits, "input_ids": ids.to(torch.float32)})
    print("hf_ref: wrote %s/logits.safetensors (%s, logits %s)" % (d, c["model_type"], list(logits.shape)))


def check(d):
    with open(os.path.join(d, "config.json")) as f:
        c = json.load(f)
    w, _ = st_io.load(os.path.join(d, "model.safetensors"))
    ref, _ = st_io.load(os.path.join(d, "logits.safetensors"))
    ids = ref["input_ids"].to(torch.int64)
    with torch.no_grad():
        logits = logits_of(c, w, ids)
    err = ((logits - ref["logits"]).abs().max() / ref["logits"].abs().max()).item()
    print("hf_ref: %s: logits agree to %.2g (relative to the largest)" % (d, err))
    return err <= 1e-6


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--family", choices=sorted(FAMILIES))
    ap.add_argument("--out", help="write the family's fixture into this directory")
    ap.add_argument("--check", help="recompute a fixture's logits and compare")
    ap.add_argument("--logits", help="compute the logits of the model in this directory (a gotron export) into it")
    a = ap.parse_args()
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    if a.out:
        if not a.family:
            ap.error("--out needs --family")
        write(a.family, a.out)
    if a.logits:
        logits_for(a.logits)
    if a.check and not check(a.check):
        sys.exit(1)
    if not a.out and not a.check and not a.logits:
        ap.error("pass --family F --out DIR, --logits DIR or --check DIR")


if __name__ == "__main__":
    main()
