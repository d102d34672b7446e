"""Checks of the reference model against independent computations.

Run through `gpt_ref.py --selftest`. Each check compares model.py with
something that does not share its code: PyTorch's built-in layers, a naive
per-query attention loop, PyTorch's multi-head attention with the weights
permuted to its layout, finite differences (gradcheck, float64), and the
Adam(W) and clipping formulas written out.
"""

import math

import torch
import torch.nn.functional as F

import mock_data
import model
import st_io

TINY = {
    "num_layers": 2,
    "hidden_size": 8,
    "num_attention_heads": 2,
    "ffn_hidden_size": 12,
    "seq_length": 5,
    "max_position_embeddings": 6,
    "vocab_size": 11,
    "micro_batch_size": 2,
    "global_batch_size": 4,
    "seed": 7,
}


class _Result:
    def __init__(self):
        self.failed = 0

    def close(self, got, want, tol, what):
        err = (got - want).abs().max().item()
        ok = err <= tol
        print(f"{'ok  ' if ok else 'FAIL'}  {what}: max |diff| {err:.3g} (tol {tol:g})")
        self.failed += not ok

    def true(self, ok, what):
        print(f"{'ok  ' if ok else 'FAIL'}  {what}")
        self.failed += not ok


def random_params(cfg, gen, dtype=torch.float64):
    """Params with non-trivial values everywhere (LayerNorm and biases too)."""
    p = {}
    for name, shape in model.param_shapes(cfg):
        t = torch.randn(shape, generator=gen, dtype=dtype)
        if "layernorm.weight" in name:
            t = 1.0 + 0.3 * t
        elif name.endswith(".bias"):
            t = 0.2 * t
        else:
            t = 0.4 * t
        p[name] = t
    return p


def naive_attention(x, p, prefix, heads):
    """Per batch row, head and query: explicit masked softmax over keys 0..i."""
    s, b, h = x.shape
    hd = h // heads
    qkv = x @ p[prefix + "linear_qkv.weight"].t() + p[prefix + "linear_qkv.bias"]
    ctx = torch.zeros(s, b, h, dtype=x.dtype)
    for bi in range(b):
        for n in range(heads):
            base = n * 3 * hd  # head n's rows: q, k, v
            q = qkv[:, bi, base : base + hd]
            k = qkv[:, bi, base + hd : base + 2 * hd]
            v = qkv[:, bi, base + 2 * hd : base + 3 * hd]
            for i in range(s):
                sc = torch.stack([(q[i] * k[j]).sum() / math.sqrt(hd) for j in range(i + 1)])
                e = torch.exp(sc - sc.max())
                w = e / e.sum()
                ctx[i, bi, n * hd : (n + 1) * hd] = (w.unsqueeze(1) * v[: i + 1]).sum(0)
    return ctx @ p[prefix + "linear_proj.weight"].t() + p[prefix + "linear_proj.bias"]


def torch_mha_attention(x, p, prefix, heads):
    """PyTorch's multi_head_attention_forward with Megatron's QKV rows regrouped.

    PyTorch's in_proj is [q all heads; k all heads; v all heads]; Megatron's is
    [head0 q,k,v; head1 q,k,v; ...]. Regroup [heads, 3, hd, h] -> [3, heads, hd, h].
    """
    s, b, h = x.shape
    hd = h // heads
    w = p[prefix + "linear_qkv.weight"].reshape(heads, 3, hd, h).transpose(0, 1).reshape(3 * h, h)
    c = p[prefix + "linear_qkv.bias"].reshape(heads, 3, hd).transpose(0, 1).reshape(3 * h)
    mask = torch.triu(torch.ones(s, s, dtype=torch.bool), diagonal=1)
    out, _ = F.multi_head_attention_forward(
        x, x, x, h, heads, w, c, None, None, False, 0.0,
        p[prefix + "linear_proj.weight"], p[prefix + "linear_proj.bias"],
        training=False, need_weights=False, attn_mask=mask,
    )
    return out


def check_ops(r, gen):
    x = torch.randn(3, 2, 8, generator=gen, dtype=torch.float64)
    w = torch.randn(8, generator=gen, dtype=torch.float64)
    b = torch.randn(8, generator=gen, dtype=torch.float64)
    r.close(model.layer_norm(x, w, b), F.layer_norm(x, (8,), w, b, eps=1e-5), 1e-12, "layer_norm vs F.layer_norm")
    z = 4 * torch.randn(1000, generator=gen, dtype=torch.float64)
    r.close(model.gelu_tanh(z), F.gelu(z, approximate="tanh"), 1e-12, "gelu_tanh vs F.gelu(approximate='tanh')")
    lg = 5 * torch.randn(6, 3, 11, generator=gen, dtype=torch.float64)
    lab = torch.randint(0, 11, (6, 3), generator=gen)
    want = F.cross_entropy(lg.reshape(-1, 11), lab.reshape(-1), reduction="none").reshape(6, 3)
    r.close(model.cross_entropy(lg, lab), want, 1e-12, "cross_entropy vs F.cross_entropy")
    wl = torch.randn(5, 8, generator=gen, dtype=torch.float64)
    r.close(model.linear(x, wl, b[:5]), F.linear(x, wl, b[:5]), 1e-12, "linear vs F.linear")


def check_attention(r, gen):
    cfg = dict(TINY, hidden_size=12, num_attention_heads=3)
    p = random_params(cfg, gen)
    x = torch.randn(7, 2, 12, generator=gen, dtype=torch.float64)
    pre = "decoder.layers.0.self_attention."
    got = model.self_attention(x, p, pre, 3)
    r.close(got, naive_attention(x, p, pre, 3), 1e-12, "attention vs naive per-query masked softmax")
    r.close(got, torch_mha_attention(x, p, pre, 3), 1e-12, "attention vs F.multi_head_attention_forward (regrouped QKV)")
    p32 = {n: t.float() for n, t in p.items()}
    got32 = model.self_attention(x.float(), p32, pre, 3)
    r.close(got32.double(), naive_attention(x, p, pre, 3), 1e-5, "float32 attention vs float64 naive")


def check_causal(r, gen):
    cfg = TINY
    p = random_params(cfg, gen)
    ids = torch.randint(0, cfg["vocab_size"], (2, cfg["seq_length"]), generator=gen)
    lab = torch.randint(0, cfg["vocab_size"], (2, cfg["seq_length"]), generator=gen)
    a = model.token_losses(p, cfg, ids, lab)
    ids2 = ids.clone()
    ids2[:, -1] = (ids2[:, -1] + 1) % cfg["vocab_size"]
    b = model.token_losses(p, cfg, ids2, lab)
    r.close(a[:, :-1], b[:, :-1], 0.0, "changing the last input token leaves earlier losses unchanged (causal)")
    r.true((a[:, -1] - b[:, -1]).abs().max().item() > 0, "...and changes the last token's loss")


def check_gradcheck(r, gen):
    cfg = TINY
    names = [n for n, _ in model.param_shapes(cfg)]
    p = random_params(cfg, gen)
    ids = torch.randint(0, cfg["vocab_size"], (2, cfg["seq_length"]), generator=gen)
    lab = torch.randint(0, cfg["vocab_size"], (2, cfg["seq_length"]), generator=gen)
    inputs = tuple(p[n].clone().requires_grad_(True) for n in names)

    def f(*ts):
        return model.token_losses(dict(zip(names, ts)), cfg, ids, lab).mean()

    ok = torch.autograd.gradcheck(f, inputs, eps=1e-6, atol=1e-7, rtol=1e-5)
    r.true(ok, f"gradcheck (float64) of the mean loss w.r.t. all {len(names)} parameters, tiny config")


def check_tied_grad(r, gen):
    cfg = TINY
    p = {n: t.requires_grad_(True) for n, t in random_params(cfg, gen).items()}
    ids = torch.randint(0, cfg["vocab_size"], (2, cfg["seq_length"]), generator=gen)
    lab = torch.randint(0, cfg["vocab_size"], (2, cfg["seq_length"]), generator=gen)
    wname = "embedding.word_embeddings.weight"
    (g_tied,) = torch.autograd.grad(model.token_losses(p, cfg, ids, lab).mean(), [p[wname]])
    out_w = p[wname].detach().clone().requires_grad_(True)
    loss = model.token_losses(p, cfg, ids, lab, output_weight=out_w).mean()
    g_lookup, g_out = torch.autograd.grad(loss, [p[wname], out_w])
    r.close(g_tied, g_lookup + g_out, 1e-14, "tied embedding grad = lookup grad + output-layer grad")
    r.true(g_lookup.abs().max().item() > 0 and g_out.abs().max().item() > 0, "...both parts are non-zero")


def check_accumulation(r, gen):
    """Accumulated microbatch gradients equal the gradient of the global-batch mean."""
    from gpt_ref import accumulate_grads

    cfg = TINY
    p = {n: t.clone().requires_grad_(True) for n, t in random_params(cfg, gen).items()}
    loss = accumulate_grads(p, cfg, 3)
    tok = mock_data.global_batch(cfg, 3)
    q = {n: t.detach().clone().requires_grad_(True) for n, t in p.items()}
    whole = model.token_losses(q, cfg, tok[:, :-1], tok[:, 1:]).mean()
    whole.backward()
    r.close(torch.tensor(loss, dtype=torch.float64), whole.detach(), 1e-12, "loss of 2 microbatches = mean over the global batch")
    err = max((p[n].grad - q[n].grad).abs().max().item() for n in p)
    r.close(torch.tensor(err), torch.tensor(0.0), 1e-12, "accumulated microbatch grads = global-batch grads")


def check_optimizer(r, gen):
    """torch's AdamW and clip_grad_norm_ follow the formulas the README states."""
    from gpt_ref import make_optimizer

    cfg = {"lr": 1e-2, "adam_beta1": 0.9, "adam_beta2": 0.999, "adam_eps": 1e-8, "weight_decay": 0.1}
    w = torch.randn(5, 10, generator=gen, dtype=torch.float64, requires_grad=True)
    ref = w.detach().clone()
    m = torch.zeros_like(ref)
    v = torch.zeros_like(ref)
    opt = make_optimizer([("w", w)], cfg)
    lr, b1, b2, eps, wd = 1e-2, 0.9, 0.999, 1e-8, 0.1
    for t in range(1, 5):
        g = torch.randn(5, 10, generator=gen, dtype=torch.float64)
        w.grad = g.clone()
        opt.step()
        ref = ref * (1 - lr * wd)
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        ref = ref - lr / (1 - b1**t) * m / (v.sqrt() / math.sqrt(1 - b2**t) + eps)
    r.close(w.detach(), ref, 1e-14, "torch AdamW = decoupled-decay Adam formula with bias correction")

    gs = [torch.randn(7, generator=gen, dtype=torch.float64) for _ in range(3)]
    ps = [torch.zeros(7, dtype=torch.float64, requires_grad=True) for _ in range(3)]
    for p, g in zip(ps, gs):
        p.grad = g.clone()
    norm = torch.nn.utils.clip_grad_norm_(ps, 0.5)
    want = math.sqrt(sum(float((g * g).sum()) for g in gs))
    coef = min(1.0, 0.5 / (want + 1e-6))
    r.close(norm, torch.tensor(want, dtype=torch.float64), 1e-12, "clip_grad_norm_ returns the pre-clip global L2 norm")
    r.close(torch.cat([p.grad for p in ps]), torch.cat(gs) * coef, 1e-14, "clip scales grads by min(1, max/(norm+1e-6))")


def check_io_and_data(r, gen, tmpdir):
    import os

    ts = {
        "b.x": torch.randn(3, 4, generator=gen),
        "a": torch.randn(5, generator=gen),
        "c": torch.tensor(2.5),
    }
    path = os.path.join(tmpdir, "t.safetensors")
    st_io.save(path, ts, {"k": "v"})
    back, meta = st_io.load(path)
    r.true(meta == {"k": "v"} and set(back) == set(ts), "safetensors round trip: names and metadata")
    r.true(all(torch.equal(back[n], ts[n]) and back[n].shape == ts[n].shape for n in ts), "safetensors round trip: bits and shapes")
    with open(path, "rb") as f:
        raw = f.read()
    n = int.from_bytes(raw[:8], "little")
    r.true((8 + n) % 8 == 0 and raw[8 + n :][:4] == back["a"][:1].numpy().tobytes(), "header padded to 8 bytes; data sorted by name")

    # SplitMix64 with state 0 yields 0xE220A8397B1DCDAF, 0x6E789E6AA1B965F4, ... (Vigna's splitmix64.c).
    r.true(mock_data.splitmix64(0) == 0xE220A8397B1DCDAF, "splitmix64(0) = 0xE220A8397B1DCDAF")
    r.true(mock_data.splitmix64(0x9E3779B97F4A7C15) == 0x6E789E6AA1B965F4, "splitmix64(golden) = 0x6E789E6AA1B965F4")
    toks = mock_data.row_tokens(1234, 0, 0, 4, 32, 128)
    stride = (toks[1] - toks[0]) % 128
    r.true(len(toks) == 33 and all((toks[t + 1] - toks[t]) % 128 == stride for t in range(32)) and 1 <= stride <= 16,
           "mock row: seq+1 tokens in an arithmetic progression mod vocab with stride in 1..16")


def run():
    """Run every check; print one line each; return the number of failures."""
    import tempfile

    gen = torch.Generator().manual_seed(20240611)
    r = _Result()
    check_ops(r, gen)
    check_attention(r, gen)
    check_causal(r, gen)
    check_tied_grad(r, gen)
    check_accumulation(r, gen)
    check_optimizer(r, gen)
    with tempfile.TemporaryDirectory() as d:
        check_io_and_data(r, gen, d)
    check_gradcheck(r, gen)
    print(f"selftest: {r.failed} failure(s)")
    return r.failed
