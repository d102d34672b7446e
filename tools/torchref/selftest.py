"""Checks of the reference model against independent computations.

Run through `gpt_ref.py --selftest`. Each check compares model.py with
something that does not share its code: PyTorch's built-in layers and
activations, a complex-number RoPE, a naive per-query attention loop that
indexes each query head's key/value group itself, PyTorch's multi-head
attention with the weights permuted (and the key/value rows repeated) to its
layout, a whole forward pass written with torch.nn.functional, finite
differences (gradcheck, float64) of every fixture's model kind, and the
Adam(W) and clipping formulas written out. The MoE layer is compared with a
per-token loop over Python-loop routing (moe_ref.brute_routing and
brute_dropping), the tiny MoE GPTs with gradcheck, and the auxiliary-loss
objective with Megatron's MoEAuxLossAutoScaler.
"""

import math

import torch
import torch.nn.functional as F

import mock_data
import model
import moe_ref
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


def opt(cfg, key):
    """cfg[key], or its GPT-2 value when cfg lacks it (written here, not taken from model.py)."""
    n = cfg["num_attention_heads"]
    gpt2 = {
        "normalization": "LayerNorm", "apply_layernorm_1p": False, "qk_layernorm": False,
        "swiglu": False, "squared_relu": False, "bias_gelu_fusion": True,
        "position_embedding_type": "learned_absolute", "rotary_base": 10000, "rotary_percent": 1.0,
        "rotary_interleaved": False, "group_query_attention": False, "num_query_groups": n,
        "kv_channels": cfg["hidden_size"] // n, "untie_embeddings_and_output_weights": False,
        "add_bias_linear": True, "add_qkv_bias": True,
        "apply_residual_connection_post_layernorm": False, "layernorm_epsilon": 1e-5,
    }
    v = cfg.get(key, gpt2[key])
    if key == "num_query_groups" and not opt(cfg, "group_query_attention"):
        v = n
    return v


def ref_rms_norm(x, w, eps):
    """RMSNorm through F.layer_norm: [x, -x] has mean 0 and biased variance mean(x^2)."""
    h = x.shape[-1]
    return F.layer_norm(torch.cat((x, -x), dim=-1), (2 * h,), eps=eps)[..., :h] * w


def ref_norm(x, p, name, cfg):
    """The configured norm by PyTorch's F.layer_norm (RMSNorm by ref_rms_norm)."""
    w = p[name + ".weight"]
    if opt(cfg, "apply_layernorm_1p"):
        w = w + 1.0
    eps = opt(cfg, "layernorm_epsilon")
    if opt(cfg, "normalization") == "RMSNorm":
        return ref_rms_norm(x, w, eps)
    return F.layer_norm(x, (x.shape[-1],), w, p[name + ".bias"], eps=eps)


def spec_angles(s, d, cfg):
    """The rotary angles [s, rot/2] as Megatron computes them (megatron/core/models/common/embeddings/rotary_pos_embedding.py), float32."""
    rot = int(d * opt(cfg, "rotary_percent"))
    base = opt(cfg, "rotary_base")
    inv_freq = 1.0 / (base ** (torch.arange(0, rot, 2, dtype=torch.float32) / rot))
    pos = torch.arange(s, dtype=torch.float32)
    return pos[:, None] * inv_freq[None, :]


def complex_rope(x, angles, interleaved, unit_dtype=torch.float64):
    """RoPE as a complex product: x [s, ..., d], angles [s, rot/2] (pairs rotated by e^{i angle}).

    Channel pairs (j, j + rot/2) (not interleaved, GPT-NeoX) or (2j, 2j+1)
    (interleaved, GPT-J / Meta Llama) are the real and imaginary parts of
    complex number j; channels past rot pass through. e^{i angle} =
    cos + i sin is computed in unit_dtype (float32: as Megatron's tables).
    """
    half = angles.shape[-1]
    rot = 2 * half
    xr = x[..., :rot]
    if interleaved:
        z = torch.view_as_complex(xr.reshape(*xr.shape[:-1], half, 2).contiguous())
    else:
        z = torch.complex(xr[..., :half], xr[..., half:])
    a = angles.to(unit_dtype).reshape(angles.shape[0], *([1] * (x.dim() - 2)), half)
    rotated = z * torch.complex(torch.cos(a).double(), torch.sin(a).double())
    if interleaved:
        out = torch.view_as_real(rotated).reshape(xr.shape)
    else:
        out = torch.cat((rotated.real, rotated.imag), dim=-1)
    return torch.cat((out.to(x.dtype), x[..., rot:]), dim=-1)


def naive_attention(x, p, prefix, cfg):
    """Per batch row, query head and query: explicit masked softmax over keys 0..i.

    Query head i reads its rows of linear_qkv and those of its group
    i // (heads/groups)'s key and value directly (the grouped loop), applies
    the q/k norm by F.layer_norm and RoPE as a complex product.
    """
    s, b, h = x.shape
    n = cfg["num_attention_heads"]
    g = opt(cfg, "num_query_groups")
    d = opt(cfg, "kv_channels")
    per = n // g
    bias = p.get(prefix + "linear_qkv.bias")
    qkv = x @ p[prefix + "linear_qkv.weight"].t()
    if bias is not None:
        qkv = qkv + bias
    rope = opt(cfg, "position_embedding_type") == "rope"
    if rope:
        angles = spec_angles(s, d, cfg)
    ctx = torch.zeros(s, b, n * d, dtype=x.dtype)
    for bi in range(b):
        for i in range(n):
            grp = i // per
            base = grp * (per + 2) * d  # group grp's rows: per query heads, key, value
            q = qkv[:, bi, base + (i % per) * d : base + (i % per + 1) * d]
            k = qkv[:, bi, base + per * d : base + (per + 1) * d]
            v = qkv[:, bi, base + (per + 1) * d : base + (per + 2) * d]
            if opt(cfg, "qk_layernorm"):
                q = ref_norm(q, p, prefix + "q_layernorm", cfg)
                k = ref_norm(k, p, prefix + "k_layernorm", cfg)
            if rope:
                q = complex_rope(q, angles, opt(cfg, "rotary_interleaved"), torch.float32)
                k = complex_rope(k, angles, opt(cfg, "rotary_interleaved"), torch.float32)
            for t in range(s):
                sc = torch.stack([(q[t] * k[j]).sum() / math.sqrt(d) for j in range(t + 1)])
                e = torch.exp(sc - sc.max())
                w = e / e.sum()
                ctx[t, bi, i * d : (i + 1) * d] = (w.unsqueeze(1) * v[: t + 1]).sum(0)
    out = ctx @ p[prefix + "linear_proj.weight"].t()
    pb = p.get(prefix + "linear_proj.bias")
    return out if pb is None else out + pb


def torch_mha_attention(x, p, prefix, cfg):
    """PyTorch's multi_head_attention_forward with Megatron's QKV rows regrouped.

    PyTorch's in_proj is [q all heads; k all heads; v all heads]; Megatron's is
    [group0: its query heads, k, v; group1: ...]. Query head i's key and value
    are its group's, so the key/value rows are repeated per query head
    (PyTorch's multi-head attention is GQA with every group's k, v copied).
    Needs kv_channels = hidden / heads, no q/k norm, no RoPE.
    """
    s, b, h = x.shape
    n = cfg["num_attention_heads"]
    g = opt(cfg, "num_query_groups")
    per = n // g
    d = h // n
    w = p[prefix + "linear_qkv.weight"].reshape(g, per + 2, d, h)
    c = p.get(prefix + "linear_qkv.bias")
    c = torch.zeros((n + 2 * g) * d, dtype=x.dtype) if c is None else c
    c = c.reshape(g, per + 2, d)
    wq = w[:, :per].reshape(n * d, h)
    wk = w[:, per].repeat_interleave(per, dim=0).reshape(n * d, h)
    wv = w[:, per + 1].repeat_interleave(per, dim=0).reshape(n * d, h)
    cq = c[:, :per].reshape(n * d)
    ck = c[:, per].repeat_interleave(per, dim=0).reshape(n * d)
    cv = c[:, per + 1].repeat_interleave(per, dim=0).reshape(n * d)
    pb = p.get(prefix + "linear_proj.bias")
    mask = torch.triu(torch.ones(s, s, dtype=torch.bool), diagonal=1)
    out, _ = F.multi_head_attention_forward(
        x, x, x, h, n, torch.cat((wq, wk, wv)), torch.cat((cq, ck, cv)), None, None, False, 0.0,
        p[prefix + "linear_proj.weight"], torch.zeros(h, dtype=x.dtype) if pb is None else pb,
        training=False, need_weights=False, attn_mask=mask,
    )
    return out


def ref_mlp(x, p, prefix, cfg):
    """The MLP by F.linear and PyTorch's activations; SwiGLU's gate is fc1's first f rows."""
    w1 = p[prefix + "linear_fc1.weight"]
    b1 = p.get(prefix + "linear_fc1.bias")
    if opt(cfg, "swiglu"):
        f = w1.shape[0] // 2
        gate = F.linear(x, w1[:f], None if b1 is None else b1[:f])
        up = F.linear(x, w1[f:], None if b1 is None else b1[f:])
        y = F.silu(gate) * up
    else:
        u = F.linear(x, w1, b1)
        if opt(cfg, "squared_relu"):
            y = torch.pow(F.relu(u), 2)
        elif opt(cfg, "bias_gelu_fusion") and opt(cfg, "add_bias_linear"):
            y = F.gelu(u, approximate="tanh")
        else:
            y = F.gelu(u)
    return F.linear(y, p[prefix + "linear_fc2.weight"], p.get(prefix + "linear_fc2.bias"))


def ref_token_losses(p, cfg, ids, labels):
    """The whole model's per-token losses [b, s] from torch.nn.functional and the naive attention."""
    b, s = ids.shape
    hs = F.embedding(ids, p["embedding.word_embeddings.weight"])  # [b, s, h]
    if opt(cfg, "position_embedding_type") == "learned_absolute":
        hs = hs + F.embedding(torch.arange(s), p["embedding.position_embeddings.weight"]).unsqueeze(0)
    hs = hs.transpose(0, 1)  # [s, b, h]
    post = opt(cfg, "apply_residual_connection_post_layernorm")
    for i in range(cfg["num_layers"]):
        pre = f"decoder.layers.{i}."
        ln = ref_norm(hs, p, pre + "input_layernorm", cfg)
        hs = (ln if post else hs) + naive_attention(ln, p, pre + "self_attention.", cfg)
        ln = ref_norm(hs, p, pre + "pre_mlp_layernorm", cfg)
        hs = (ln if post else hs) + ref_mlp(ln, p, pre + "mlp.", cfg)
    hs = ref_norm(hs, p, "decoder.final_layernorm", cfg)
    untied = opt(cfg, "untie_embeddings_and_output_weights")
    lg = F.linear(hs, p["output_layer.weight" if untied else "embedding.word_embeddings.weight"])
    v = lg.shape[-1]
    return F.cross_entropy(lg.transpose(0, 1).reshape(-1, v), labels.reshape(-1), reduction="none").reshape(b, s)


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
    r.close(model.gelu_erf(z), F.gelu(z), 1e-12, "gelu_erf vs F.gelu (exact erf form)")
    r.close(model.silu(z), F.silu(z), 1e-12, "silu vs F.silu")
    r.close(model.squared_relu(z), torch.pow(F.relu(z), 2), 1e-12, "squared_relu vs torch.pow(F.relu(x), 2)")
    r.true((model.gelu_erf(z) - model.gelu_tanh(z)).abs().max().item() > 1e-4, "...the erf and tanh GELUs differ (by > 1e-4 on 4·N(0, 1) samples)")
    r.close(model.rms_norm(x, w, 1e-5), ref_rms_norm(x, w, 1e-5), 1e-12, "rms_norm vs F.layer_norm of [x, -x] (mean 0, var mean(x^2))")
    r.close(model.rms_norm(x, w, 0.0), F.normalize(x, dim=-1, eps=0.0) * math.sqrt(8) * w, 1e-12, "rms_norm (eps 0) vs F.normalize(x) * sqrt(h)")
    pn = {"n.weight": w, "n.bias": b}
    for kind in ("LayerNorm", "RMSNorm"):
        for one_p in (False, True):
            cfg = {"num_attention_heads": 2, "hidden_size": 8, "normalization": kind, "apply_layernorm_1p": one_p}
            r.close(model.norm(x, pn, "n", model.options(cfg)), ref_norm(x, pn, "n", cfg), 1e-12,
                    f"norm {kind}{' 1p (weight + 1)' if one_p else ''} vs F.layer_norm")
    xh = torch.randn(5, 2, 3, 4, generator=gen, dtype=torch.float64)  # [s, b, heads, d]: q/k norm per head
    wh, bh = torch.randn(4, generator=gen, dtype=torch.float64), torch.randn(4, generator=gen, dtype=torch.float64)
    r.close(model.layer_norm(xh, wh, bh), F.layer_norm(xh, (4,), wh, bh, eps=1e-5), 1e-12, "layer_norm over each head's d channels vs F.layer_norm")


def check_attention(r, gen):
    cfg = dict(TINY, hidden_size=12, num_attention_heads=3)
    p = random_params(cfg, gen)
    x = torch.randn(7, 2, 12, generator=gen, dtype=torch.float64)
    pre = "decoder.layers.0.self_attention."
    got = model.self_attention(x, p, pre, cfg)
    r.close(got, naive_attention(x, p, pre, cfg), 1e-12, "attention vs naive per-query masked softmax")
    r.close(got, torch_mha_attention(x, p, pre, cfg), 1e-12, "attention vs F.multi_head_attention_forward (regrouped QKV)")
    p32 = {n: t.float() for n, t in p.items()}
    got32 = model.self_attention(x.float(), p32, pre, cfg)
    r.close(got32.double(), naive_attention(x, p, pre, cfg), 1e-5, "float32 attention vs float64 naive")


def check_rope(r, gen):
    """RoPE against the complex-number formulation, both rotate styles, whole and partial."""
    s, d = 9, 12
    x = torch.randn(s, 2, 3, d, generator=gen, dtype=torch.float64)  # [s, b, heads, d]
    for interleaved in (False, True):
        for percent, base in ((1.0, 10000), (0.5, 500)):
            cfg = {"num_attention_heads": 3, "hidden_size": 36, "position_embedding_type": "rope", "kv_channels": d,
                   "rotary_percent": percent, "rotary_base": base, "rotary_interleaved": interleaved}
            o = model.options(cfg)
            style = f"{'interleaved' if interleaved else 'rotate-half'}, percent {percent}, base {base}"
            angles = spec_angles(s, d, cfg)
            cos, sin = model.rope_tables(s, o, torch.float64, table_dtype=torch.float64)
            got = model.apply_rope(x, cos, sin, interleaved)
            r.close(got, complex_rope(x, angles, interleaved), 1e-12, f"RoPE vs complex product x*e^(i angle) ({style})")
            if o["rot"] < d:
                r.close(got[..., o["rot"]:], x[..., o["rot"]:], 0.0, f"...channels past rot = {o['rot']} pass through")
            cos32, sin32 = model.rope_tables(s, o, torch.float64)
            r.close(torch.cat((cos32, sin32)), torch.cat((cos, sin)), 1.2e-7, "...float32 cos/sin tables = float64 cos/sin of the same angles to fp32 rounding")
            rot = o["rot"]
            exact = torch.arange(s, dtype=torch.float64)[:, None] * base ** (-torch.arange(0, rot, 2, dtype=torch.float64) / rot)
            r.close(angles.double(), exact, 1e-5, "...float32 angles = position * base^(-2j/rot)")
            # Relative positions: <R_m q, R_n k> depends on m - n only.
            cos_l, sin_l = model.rope_tables(2 * s, o, torch.float64, table_dtype=torch.float64)
            q = x[:1, 0].expand(2 * s, 3, d).unsqueeze(1)
            k = x[1:2, 0].expand(2 * s, 3, d).unsqueeze(1)
            qr, kr = model.apply_rope(q, cos_l, sin_l, interleaved), model.apply_rope(k, cos_l, sin_l, interleaved)
            sc = torch.einsum("mhd,nhd->mnh", qr[:, 0], kr[:, 0])
            shift = sc[s:, s:] - sc[:s, :s]
            r.close(shift, torch.zeros_like(shift), 1e-5, "...q.k after RoPE depends only on the position difference")


def check_gqa(r, gen):
    """Grouped-query attention: the model's repeat_interleave vs the grouped loop and PyTorch's MHA."""
    pre = "decoder.layers.0.self_attention."
    for g in (1, 2, 4):
        cfg = dict(TINY, hidden_size=16, num_attention_heads=4, group_query_attention=g < 4, num_query_groups=g)
        p = random_params(cfg, gen)
        x = torch.randn(6, 2, 16, generator=gen, dtype=torch.float64)
        got = model.self_attention(x, p, pre, cfg)
        r.close(got, naive_attention(x, p, pre, cfg), 1e-12, f"4 heads in {g} group(s): attention (repeat_interleave) vs the grouped loop")
        r.close(got, torch_mha_attention(x, p, pre, cfg), 1e-12, f"4 heads in {g} group(s): attention vs F.multi_head_attention_forward (k, v rows repeated)")
    cfg = dict(TINY, hidden_size=8, num_attention_heads=4, group_query_attention=True, num_query_groups=2, kv_channels=6,
               add_bias_linear=False, add_qkv_bias=False, qk_layernorm=True, normalization="RMSNorm",
               position_embedding_type="rope", rotary_interleaved=True)
    p = random_params(cfg, gen)
    x = torch.randn(6, 2, 8, generator=gen, dtype=torch.float64)
    r.close(model.self_attention(x, p, pre, cfg), naive_attention(x, p, pre, cfg), 1e-12,
            "GQA, kv_channels 6 != h/n, RMS q/k norm, interleaved RoPE, no biases: attention vs the grouped loop")


def check_mlp(r, gen):
    """Each activation of the MLP against F.linear with PyTorch's activations."""
    pre = "decoder.layers.0.mlp."
    x = 2 * torch.randn(5, 2, 8, generator=gen, dtype=torch.float64)
    for label, extra in (
        ("gelu tanh (bias_gelu_fusion, biases)", {}),
        ("gelu erf (biases, no fusion)", {"bias_gelu_fusion": False}),
        ("gelu erf (no biases)", {"add_bias_linear": False, "add_qkv_bias": False}),
        ("squared relu", {"squared_relu": True}),
        ("swiglu, no biases", {"swiglu": True, "add_bias_linear": False, "add_qkv_bias": False}),
        ("swiglu, biases", {"swiglu": True}),
    ):
        cfg = dict(TINY, **extra)
        p = random_params(cfg, gen)
        r.close(model.mlp(x, p, pre, cfg), ref_mlp(x, p, pre, cfg), 1e-12, f"mlp {label} vs F.linear and F.* activations")


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


def tiny_variant(name):
    """The fixture CONFIGS[name]'s model options on a tiny model (4 heads, hidden 8)."""
    from gpt_ref import CONFIGS

    cfg = dict(CONFIGS[name], **TINY)
    cfg.update(num_attention_heads=4, kv_channels=TINY_KV[name])
    if not cfg["group_query_attention"]:
        cfg["num_query_groups"] = 4
    return cfg


# kv_channels of the tiny variants: RoPE keeps >= 2 frequencies (variant_a's
# rotary_percent 0.5 of 8); variant_a's n*d = 32 != h as in its fixture.
TINY_KV = {"llama": 4, "variant_a": 8, "variant_b": 4, "variant_c": 2}

# The number of tensors of each fixture (README's tables).
FIXTURE_TENSORS = {"gpt2": 28, "llama": 15, "variant_a": 29, "variant_b": 26, "variant_c": 29,
                   "moe_a": 29, "moe_b": 32}


def check_variants(r, gen):
    """Each fixture's model kind: parameter names, a functional forward, causality."""
    from gpt_ref import CONFIGS

    for name, cfg in CONFIGS.items():
        shapes = model.param_shapes(cfg)
        r.true(len(shapes) == FIXTURE_TENSORS[name] and len({n for n, _ in shapes}) == len(shapes),
               f"{name}: {FIXTURE_TENSORS[name]} distinct tensors")
        init = model.init_params(cfg, 1)
        norms = [t for n, t in init.items() if "layernorm" in n and n.endswith(".weight")]
        want = 0.0 if opt(cfg, "apply_layernorm_1p") else 1.0
        r.true(all(bool((t == want).all()) for t in norms), f"{name}: norm weights start at {want} (scale 1)")
    for name in ("gpt2", "llama", "variant_a", "variant_b", "variant_c"):
        cfg = TINY if name == "gpt2" else tiny_variant(name)
        p = random_params(cfg, gen)
        ids = torch.randint(0, cfg["vocab_size"], (2, cfg["seq_length"]), generator=gen)
        lab = torch.randint(0, cfg["vocab_size"], (2, cfg["seq_length"]), generator=gen)
        a = model.token_losses(p, cfg, ids, lab)
        r.close(a, ref_token_losses(p, cfg, ids, lab), 1e-12, f"{name} (tiny): token losses vs a forward by torch.nn.functional and the naive attention")
        ids2 = ids.clone()
        ids2[:, -1] = (ids2[:, -1] + 1) % cfg["vocab_size"]
        b = model.token_losses(p, cfg, ids2, lab)
        r.true((a[:, :-1] - b[:, :-1]).abs().max().item() == 0 and (a[:, -1] - b[:, -1]).abs().max().item() > 0,
               f"{name} (tiny): changing the last input token changes only the last loss (causal)")


def check_gradcheck(r, gen, name="gpt2"):
    cfg = TINY if name == "gpt2" else tiny_variant(name)
    names = [n for n, _ in model.param_shapes(cfg)]
    p = random_params(cfg, gen)
    ids = torch.randint(0, cfg["vocab_size"], (2, cfg["seq_length"]), generator=gen)
    lab = torch.randint(0, cfg["vocab_size"], (2, cfg["seq_length"]), generator=gen)
    inputs = tuple(p[n].clone().requires_grad_(True) for n in names)

    def f(*ts):
        return model.token_losses(dict(zip(names, ts)), cfg, ids, lab).mean()

    ok = torch.autograd.gradcheck(f, inputs, eps=1e-6, atol=1e-7, rtol=1e-5)
    r.true(ok, f"{name}: gradcheck (float64) of the mean loss w.r.t. all {len(names)} parameters, tiny config")


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


# ---------------------------------------------------------------------------
# MoE


def tiny_moe(name, **extra):
    """The MoE fixture CONFIGS[name]'s options on the tiny llama model (hidden 8, 4 heads).

    Experts of width 6 (moe_a) or 4 (moe_b), a shared expert of 10; extra
    overrides any key.
    """
    from gpt_ref import CONFIGS, MOE_KEYS

    cfg = tiny_variant("llama")
    src = CONFIGS[name]
    cfg.update((k, src[k]) for k in MOE_KEYS)
    cfg["moe_ffn_hidden_size"] = 6 if name == "moe_a" else 4
    if cfg["moe_shared_expert_intermediate_size"]:
        cfg["moe_shared_expert_intermediate_size"] = 10
    cfg.update(extra)
    model.moe_options(cfg)  # validate
    return cfg


def _sigmoid(v):
    return 1.0 / (1.0 + math.exp(-v)) if v >= 0 else math.exp(v) / (1.0 + math.exp(v))


def ref_moe_layer(x, p, prefix, cfg, bias):
    """The MoE layer by a loop over tokens, float64 (no code shared with model.moe_layer).

    Routing and dropping by moe_ref's per-token and per-expert Python loops
    (brute_routing, brute_dropping); each token's chosen experts run on that
    token alone (F.linear, F.silu/F.gelu) and their outputs are summed times
    the probability (the probability after linear_fc2: equal to Megatron's
    before-linear_fc2 weighting up to rounding); plus the shared expert
    (ref_mlp). The losses by their definitions: E * sum_e f_e P_e * coeff
    (per sequence for seq_aux_loss, then averaged), mean lse^2 * coeff.

    Returns (out [s, b, h], final map [T][E] bools, routed map, losses {name: float}, smallest gap).
    """
    m = {k: cfg.get(k, v) for k, v in model.MOE_DEFAULTS.items()}
    s_len, b, h = x.shape
    e_num, k = m["num_experts"], m["moe_router_topk"]
    fn = m["moe_router_score_function"]
    w_r = p[prefix + "router.weight"]
    toks = [x[i, j] for i in range(s_len) for j in range(b)]  # token t = i*b + j
    rows = [F.linear(t, w_r).tolist() for t in toks]
    probs, rmap, gap = moe_ref.brute_routing(
        rows, k, fn, m["moe_router_pre_softmax"], m["moe_router_num_groups"], m["moe_router_group_topk"],
        m["moe_router_topk_scaling_factor"], None if bias is None else bias.double().tolist())
    routed = rmap
    if m["moe_expert_capacity_factor"] is not None:
        probs, rmap = moe_ref.brute_dropping(probs, rmap, k, m["moe_expert_capacity_factor"],
                                             m["moe_token_drop_policy"], m["moe_pad_expert_input_to_capacity"])

    def expert(t, q):
        w1 = p[q + "linear_fc1.weight"]
        if opt(cfg, "swiglu"):
            f = w1.shape[0] // 2
            y = F.silu(F.linear(t, w1[:f])) * F.linear(t, w1[f:])
        else:
            y = F.gelu(F.linear(t, w1))
        return F.linear(y, p[q + "linear_fc2.weight"])

    out = []
    for t, tok in enumerate(toks):
        acc = torch.zeros(h, dtype=x.dtype)
        for e in range(e_num):
            if rmap[t][e]:
                acc = acc + probs[t][e] * expert(tok, f"{prefix}experts.local_experts.{e}.")
        out.append(acc)
    out = torch.stack(out).reshape(s_len, b, h)
    if m["moe_shared_expert_intermediate_size"]:
        out = out + ref_mlp(x, p, prefix + "shared_experts.", cfg)

    losses = {}
    if fn == "softmax":
        scores = [moe_ref._softmax_list(r) for r in rows]
    else:
        sg = [[_sigmoid(v) for v in r] for r in rows]
        scores = [[v / (sum(r) + 1e-20) for v in r] for r in sg]
    amap = [[e in moe_ref._best(r, range(e_num), k) for e in range(e_num)] for r in scores]

    def switch(tokens):
        n = len(tokens)
        f = [sum(amap[t][e] for t in tokens) / (n * k) for e in range(e_num)]
        pe = [sum(scores[t][e] for t in tokens) / n for e in range(e_num)]
        return e_num * sum(a * c for a, c in zip(f, pe))

    types = m["moe_router_load_balancing_type"]
    coeffs = m["moe_aux_loss_coeff"]
    if isinstance(types, str):
        types, coeffs = [types], [coeffs]
    for kind, coeff in zip(types, coeffs):
        if kind == "aux_loss" and coeff > 0:
            losses["load_balancing_loss"] = switch(range(len(toks))) * coeff
        elif kind == "seq_aux_loss" and coeff > 0:
            per_seq = [switch([i * b + j for i in range(s_len)]) for j in range(b)]
            losses["seq_load_balancing_loss"] = sum(per_seq) / b * coeff
    if m["moe_z_loss_coeff"] is not None:
        lse = [max(r) + math.log(sum(math.exp(v - max(r)) for v in r)) for r in rows]
        losses["z_loss"] = sum(v * v for v in lse) / len(lse) * m["moe_z_loss_coeff"]
    return out, rmap, routed, losses, gap


# The MoE variants of the loop comparison: (label, fixture kind, overrides).
MOE_LOOP_CASES = [
    ("moe_a kind: softmax top-2, aux + z losses", "moe_a", {}),
    ("moe_b kind: sigmoid + bias, groups 4/2, scaling 2, seq aux, capacity 1.0 probs, shared", "moe_b", {}),
    ("sigmoid + bias, groups 4/1 (the limit matters), capacity 0.5 position + padding", "moe_b",
     {"moe_router_group_topk": 1, "moe_expert_capacity_factor": 0.5, "moe_token_drop_policy": "position",
      "moe_pad_expert_input_to_capacity": True}),
    ("softmax pre-softmax top-1, capacity 0.5 probs + padding, both losses, erf GELU experts", "moe_a",
     {"moe_router_topk": 1, "moe_router_pre_softmax": True, "moe_expert_capacity_factor": 0.5,
      "moe_pad_expert_input_to_capacity": True, "swiglu": False,
      "moe_router_load_balancing_type": ["aux_loss", "seq_aux_loss"], "moe_aux_loss_coeff": [0.01, 0.02]}),
    ("softmax top-3 of 4, capacity 1.5 probs, shared expert", "moe_a",
     {"moe_router_topk": 3, "moe_expert_capacity_factor": 1.5, "moe_shared_expert_intermediate_size": 10}),
]


def _moe_draw(cfg, gen, layer):
    """Random float64 params, input [s, b, h] and (with the expert bias) a random float32 bias."""
    p = random_params(cfg, gen)
    x = 2 * torch.randn(cfg["seq_length"], 3, cfg["hidden_size"], generator=gen, dtype=torch.float64)
    bias = None
    if model.moe_options(cfg)["moe_router_enable_expert_bias"]:
        bias = (0.3 * torch.randn(model.moe_options(cfg)["num_experts"], generator=gen)).float()
    return p, x, bias


def check_moe_layer(r, gen):
    """model.moe_layer against the per-token loop, and structural identities."""
    for label, kind, extra in MOE_LOOP_CASES:
        cfg = tiny_moe(kind, **extra)
        layer = model.moe_options(cfg)["moe_layers"][0]
        prefix = f"decoder.layers.{layer}.mlp."
        worst_out, worst_loss, bad, draws, near = 0.0, 0.0, 0, 0, 0
        for _ in range(4):
            p, x, bias = _moe_draw(cfg, gen, layer)
            want, fmap, routed, losses, gap = ref_moe_layer(x, p, prefix, cfg, bias)
            if gap < 1e-6:
                near += 1
                continue
            st = model.MoEState(cfg)
            if bias is not None:
                st.expert_bias[layer] = bias.clone()
            got = model.moe_layer(x, p, prefix, cfg, layer, st)
            rec = st.records[0]
            draws += 1
            worst_out = max(worst_out, (got - want).abs().max().item())
            bad += rec["routing_map"].tolist() != fmap or rec["routed_map"].tolist() != routed
            bad += set(losses) != {n for n in ("load_balancing_loss", "seq_load_balancing_loss", "z_loss") if n in rec}
            for n, v in losses.items():
                worst_loss = max(worst_loss, abs(rec[n].item() - v) / abs(v))
            if bias is not None:
                bad += st.tokens_per_expert[layer].tolist() != [float(sum(c)) for c in zip(*fmap)]
        r.true(draws >= 2 and bad == 0, f"MoE layer ({label}): routing and dropping maps = Python loops, "
               f"{draws} draws ({near} near ties skipped)")
        r.close(torch.tensor(worst_out), torch.tensor(0.0), 1e-12, "...layer output vs the per-token expert loop")
        r.close(torch.tensor(worst_loss), torch.tensor(0.0), 1e-12, "...aux and z losses vs E*sum f_e*P_e*coeff and mean lse^2*coeff (relative)")

    # identical experts and softmax routing without dropping: the probabilities sum to 1,
    # so the layer is the dense MLP of those weights
    cfg = tiny_moe("moe_a")
    p, x, _ = _moe_draw(cfg, gen, 0)
    pre = "decoder.layers.0.mlp."
    for e in range(1, 4):
        for w in ("linear_fc1.weight", "linear_fc2.weight"):
            p[f"{pre}experts.local_experts.{e}.{w}"] = p[f"{pre}experts.local_experts.0.{w}"]
    dense = {pre + "linear_fc1.weight": p[pre + "experts.local_experts.0.linear_fc1.weight"],
             pre + "linear_fc2.weight": p[pre + "experts.local_experts.0.linear_fc2.weight"]}
    r.close(model.moe_layer(x, p, pre, cfg, 0), ref_mlp(x, dense, pre, cfg), 1e-12,
            "MoE layer with identical experts (softmax, no capacity) = the dense MLP")

    # the probability after the activation (Megatron) = after linear_fc2, in float64;
    # in float32 the two differ by rounding only
    cfg = tiny_moe("moe_b")
    p, x, bias = _moe_draw(cfg, gen, 0)
    st = model.MoEState(cfg)
    st.expert_bias[0] = bias
    got = model.moe_layer(x.float(), {n: t.float() for n, t in p.items()}, pre, cfg, 0, st)
    want = ref_moe_layer(x, p, pre, cfg, bias)[0]
    r.close(got.double(), want, 1e-5, "float32 MoE layer (moe_b kind) vs the float64 loop")

    # bookkeeping: no losses or counts under no_grad; an evaluation forward (training False)
    # with grad enabled computes no losses but counts, as Megatron's router does
    st = model.MoEState(cfg)
    with torch.no_grad():
        model.moe_layer(x, p, pre, cfg, 0, st)
    r.true(st.tokens_per_expert[0].sum().item() == 0 and "seq_load_balancing_loss" not in st.records[0]
           and st.take_aux_objective() is None, "MoE under no_grad: no auxiliary loss, no token count")
    st = model.MoEState(cfg, training=False)
    model.moe_layer(x, p, pre, cfg, 0, st)
    r.true(st.take_aux_objective() is None and st.tokens_per_expert[0].sum().item() > 0,
           "MoE evaluation forward with grad enabled: no auxiliary loss, tokens counted (router's _apply_expert_bias)")
    st = model.MoEState(cfg)
    model.moe_layer(x, p, pre, cfg, 0, st)
    model.moe_layer(x, p, pre, cfg, 0, st)
    counts = st.records[0]["routing_map"].sum(0).float() + st.records[1]["routing_map"].sum(0).float()
    before = st.expert_bias[0].clone()
    used = st.update_expert_bias()
    rate = cfg["moe_router_bias_update_rate"]
    r.true(torch.equal(used[0], counts) and st.tokens_per_expert[0].sum().item() == 0
           and torch.equal(st.expert_bias[0], before + torch.sign(counts.mean() - counts) * rate),
           "expert bias update: the two forwards' final-map counts, bias + sign(mean - tokens)*rate, counts reset")


def check_moe_gpt(r, gen):
    """The tiny MoE GPTs: names, init, gradcheck, the auxiliary-loss autoscaler."""
    from gpt_ref import CONFIGS, accumulate_grads

    for name in ("moe_a", "moe_b"):
        cfg = CONFIGS[name]
        names = [n for n, _ in model.param_shapes(cfg)]
        m = model.moe_options(cfg)
        layer0 = [n[len("decoder.layers.0.mlp."):] for n in names if n.startswith("decoder.layers.0.mlp.")]
        want = ["router.weight"] + [f"experts.local_experts.{e}.linear_fc{i}.weight"
                                    for e in range(m["num_experts"]) for i in (1, 2)]
        if m["moe_shared_expert_intermediate_size"]:
            want += ["shared_experts.linear_fc1.weight", "shared_experts.linear_fc2.weight"]
        stds = {n: model.init_std(n, cfg) for n in names}
        r.true(layer0 == want and stds["decoder.layers.0.mlp.router.weight"] == 0.02
               and stds["decoder.layers.0.mlp.experts.local_experts.1.linear_fc2.weight"] == 0.02 / math.sqrt(4)
               and stds["decoder.layers.0.mlp.experts.local_experts.1.linear_fc1.weight"] == 0.02,
               f"{name}: MoE tensors in Megatron's order (router, experts, shared experts); router and fc1 "
               f"N(0, 0.02), fc2 N(0, 0.02/sqrt(2*layers))")
        dense = [i for i in range(cfg["num_layers"]) if i not in m["moe_layers"]]
        r.true(all(f"decoder.layers.{i}.mlp.linear_fc1.weight" in names for i in dense)
               and m["moe_layers"] == ([0, 1] if name == "moe_a" else [0]),
               f"{name}: MoE layers {m['moe_layers']} (moe_layer_freq {cfg['moe_layer_freq']}: i % freq == 0), "
               f"dense layers {dense}")

    for name in ("moe_a", "moe_b"):
        cfg = tiny_moe(name)
        m = model.moe_options(cfg)
        pnames = [n for n, _ in model.param_shapes(cfg)]
        p = random_params(cfg, gen)
        bias = {i: (0.3 * torch.randn(m["num_experts"], generator=gen)).float() for i in m["moe_layers"]}
        ids = torch.randint(0, cfg["vocab_size"], (2, cfg["seq_length"]), generator=gen)
        lab = torch.randint(0, cfg["vocab_size"], (2, cfg["seq_length"]), generator=gen)

        def state():
            st = model.MoEState(cfg)
            if m["moe_router_enable_expert_bias"]:
                st.expert_bias = {i: b.clone() for i, b in bias.items()}
            return st

        def f(*ts):
            st = state()
            loss = model.token_losses(dict(zip(pnames, ts)), cfg, ids, lab, moe=st).mean()
            return loss + st.take_aux_objective()

        inputs = tuple(p[n].clone().requires_grad_(True) for n in pnames)
        ok = torch.autograd.gradcheck(f, inputs, eps=1e-6, atol=1e-7, rtol=1e-5)
        r.true(ok, f"{name} (tiny): gradcheck (float64) of mean loss + auxiliary losses w.r.t. all {len(pnames)} parameters")

        # Megatron's attachment: MoEAuxLossAutoScaler with backward scale 1/num_microbatches
        mbs_cfg = dict(cfg, global_batch_size=4, micro_batch_size=2)
        grads = []
        for autoscale in (None, 0.5, 0.0):
            q = {n: t.clone().requires_grad_(True) for n, t in p.items()}
            st = state()
            st.autoscale = autoscale
            accumulate_grads(q, mbs_cfg, 3, st)
            grads.append({n: t.grad for n, t in q.items()})
        err = max((grads[0][n] - grads[1][n]).abs().max().item() for n in p)
        r.close(torch.tensor(err), torch.tensor(0.0), 1e-12,
                f"{name} (tiny): (mean + aux)/M objective = MoEAuxLossAutoScaler with scale 1/M (M = 2 microbatches)")
        aux_part = max((grads[0][n] - grads[2][n]).abs().max().item() for n in p)
        r.true(aux_part > 1e-6, f"...and the auxiliary losses' share of the gradient is not zero (up to {aux_part:.2g})")


def run():
    """Run every check; print one line each; return the number of failures."""
    import tempfile

    gen = torch.Generator().manual_seed(20240611)
    r = _Result()
    check_ops(r, gen)
    check_attention(r, gen)
    check_rope(r, gen)
    check_gqa(r, gen)
    check_mlp(r, gen)
    check_variants(r, gen)
    check_causal(r, gen)
    check_tied_grad(r, gen)
    check_accumulation(r, gen)
    check_optimizer(r, gen)
    with tempfile.TemporaryDirectory() as d:
        check_io_and_data(r, gen, d)
    for name in ("gpt2", "llama", "variant_a", "variant_b", "variant_c"):
        check_gradcheck(r, gen, name)
    check_moe_layer(r, gen)
    check_moe_gpt(r, gen)
    print(f"selftest: {r.failed} failure(s)")
    return r.failed
