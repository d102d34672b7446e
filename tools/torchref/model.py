"""The reference GPT as plain functions over a {Megatron name: tensor} dict.

Activations are sequence-first, [s, b, h], as in Megatron-Core. Weights are
[out_features, in_features]; linear(x, W, c) = x @ W^T + c.

    h      = word_emb[ids] (+ pos_emb[0:s] for learned_absolute positions)
    layer: l = input_layernorm(h);  h = (l if post-LN residual else h) + linear_proj(attention(l))
           l = pre_mlp_layernorm(h); h = (l if post-LN residual else h) + linear_fc2(act(linear_fc1(l)))
    logits = final_layernorm(h) @ W^T  (W = output_layer.weight if untied, else word_emb; no bias)
    loss_t = logsumexp(logits_t) - logits_t[label_t]  (per token)

The model options are Megatron's TransformerConfig / argparse names (see
OPTION_DEFAULTS): LayerNorm or RMSNorm (optionally zero-centred, "1p"),
query/key normalisation, grouped-query attention with kv_channels, rotary
position embeddings (either rotate style, partial), SwiGLU, squared ReLU,
GELU in its erf or tanh form, optional biases, untied output layer and the
post-LayerNorm residual. A config without these keys is the GPT-2 shape,
computed with exactly the operations this file has always used for it.

Every operation is written out by hand here; selftest.py compares each one
with PyTorch's own implementation and the whole model with gradcheck.
"""

import math

import torch

LAYERNORM_EPS = 1e-5
INIT_METHOD_STD = 0.02

# The model options and their GPT-2 values: a config that lacks a key has
# that value. num_query_groups and kv_channels default to the number of heads
# and hidden_size / heads.
OPTION_DEFAULTS = {
    "normalization": "LayerNorm",
    "apply_layernorm_1p": False,
    "qk_layernorm": False,
    "swiglu": False,
    "squared_relu": False,
    "bias_gelu_fusion": True,
    "position_embedding_type": "learned_absolute",
    "rotary_base": 10000,
    "rotary_percent": 1.0,
    "rotary_interleaved": False,
    "group_query_attention": False,
    "num_query_groups": None,
    "kv_channels": None,
    "untie_embeddings_and_output_weights": False,
    "add_bias_linear": True,
    "add_qkv_bias": True,
    "apply_residual_connection_post_layernorm": False,
}


def options(cfg):
    """Return cfg's model options with the GPT-2 defaults filled in, validated.

    Adds "heads" (n), "groups" (g: num_query_groups with group_query_attention,
    else n), "head_dim" (d = kv_channels), "rot" (rotary channels per head)
    and "eps" (layernorm_epsilon).
    """
    o = dict(OPTION_DEFAULTS)
    o.update({k: cfg[k] for k in OPTION_DEFAULTS if k in cfg})
    n, h = cfg["num_attention_heads"], cfg["hidden_size"]
    o["heads"] = n
    o["groups"] = o["num_query_groups"] if o["group_query_attention"] else n
    if o["num_query_groups"] is not None and not o["group_query_attention"] and o["num_query_groups"] != n:
        raise ValueError(f"num_query_groups {o['num_query_groups']} without group_query_attention: want {n}")
    if o["groups"] is None or o["groups"] < 1 or n % o["groups"]:
        raise ValueError(f"num_query_groups {o['groups']} does not divide num_attention_heads {n}")
    if o["kv_channels"] is None:
        if h % n:
            raise ValueError(f"hidden_size {h} is not a multiple of num_attention_heads {n}; give kv_channels")
        o["kv_channels"] = h // n
    o["head_dim"] = o["kv_channels"]
    o["eps"] = cfg.get("layernorm_epsilon", LAYERNORM_EPS)
    if o["normalization"] not in ("LayerNorm", "RMSNorm"):
        raise ValueError(f"normalization {o['normalization']!r}: want LayerNorm or RMSNorm")
    if o["position_embedding_type"] not in ("learned_absolute", "rope", "none"):
        raise ValueError(f"position_embedding_type {o['position_embedding_type']!r}: want learned_absolute, rope or none")
    if o["swiglu"] and o["squared_relu"]:
        raise ValueError("swiglu and squared_relu are exclusive")
    o["rot"] = int(o["head_dim"] * o["rotary_percent"])
    if o["position_embedding_type"] == "rope" and (o["rot"] % 2 or not 0 < o["rot"] <= o["head_dim"]):
        raise ValueError(f"rotary channels int({o['head_dim']}*{o['rotary_percent']}) = {o['rot']}: want even, 0 < rot <= kv_channels")
    return o


def _norm_shapes(name, size, o):
    out = [(name + ".weight", [size])]
    if o["normalization"] == "LayerNorm":
        out.append((name + ".bias", [size]))
    return out


def param_shapes(cfg):
    """Return [(name, shape)] of every parameter, in model-definition order."""
    o = options(cfg)
    h = cfg["hidden_size"]
    f = cfg["ffn_hidden_size"]
    n, g, d = o["heads"], o["groups"], o["head_dim"]
    out = [("embedding.word_embeddings.weight", [cfg["vocab_size"], h])]
    if o["position_embedding_type"] == "learned_absolute":
        out.append(("embedding.position_embeddings.weight", [cfg["max_position_embeddings"], h]))
    for i in range(cfg["num_layers"]):
        p = f"decoder.layers.{i}."
        out += _norm_shapes(p + "input_layernorm", h, o)
        out.append((p + "self_attention.linear_qkv.weight", [(n + 2 * g) * d, h]))
        if o["add_bias_linear"] or o["add_qkv_bias"]:
            out.append((p + "self_attention.linear_qkv.bias", [(n + 2 * g) * d]))
        if o["qk_layernorm"]:
            out += _norm_shapes(p + "self_attention.q_layernorm", d, o)
            out += _norm_shapes(p + "self_attention.k_layernorm", d, o)
        out.append((p + "self_attention.linear_proj.weight", [h, n * d]))
        if o["add_bias_linear"]:
            out.append((p + "self_attention.linear_proj.bias", [h]))
        out += _norm_shapes(p + "pre_mlp_layernorm", h, o)
        f1 = 2 * f if o["swiglu"] else f
        out.append((p + "mlp.linear_fc1.weight", [f1, h]))
        if o["add_bias_linear"]:
            out.append((p + "mlp.linear_fc1.bias", [f1]))
        out.append((p + "mlp.linear_fc2.weight", [h, f]))
        if o["add_bias_linear"]:
            out.append((p + "mlp.linear_fc2.bias", [h]))
    out += _norm_shapes("decoder.final_layernorm", h, o)
    if o["untie_embeddings_and_output_weights"]:
        out.append(("output_layer.weight", [cfg["vocab_size"], h]))
    return out


def init_std(name, cfg, std=INIT_METHOD_STD):
    """Return the N(0, std) of a weight, 0.0 for a bias, None for a norm weight or bias."""
    if "layernorm" in name:
        return None
    if name.endswith(".bias"):
        return 0.0
    if name.endswith("linear_proj.weight") or name.endswith("linear_fc2.weight"):
        return std / math.sqrt(2.0 * cfg["num_layers"])  # Megatron's scaled init
    return std


def init_params(cfg, torch_seed, std=INIT_METHOD_STD, dtype=torch.float32):
    """Draw the initial weights with torch.manual_seed(torch_seed).

    Tensors are drawn whole, in param_shapes order, with Tensor.normal_ on the
    default CPU generator in float32; biases are 0; norm weights 1 (0 with
    apply_layernorm_1p, whose scale is weight + 1), norm biases 0.
    """
    one_p = options(cfg)["apply_layernorm_1p"]
    torch.manual_seed(torch_seed)
    params = {}
    for name, shape in param_shapes(cfg):
        s = init_std(name, cfg, std)
        if s is None:
            t = torch.ones(shape) if name.endswith(".weight") and not one_p else torch.zeros(shape)
        elif s == 0.0:
            t = torch.zeros(shape)
        else:
            t = torch.empty(shape, dtype=torch.float32).normal_(mean=0.0, std=s)
        params[name] = t.to(dtype)
    return params


def linear(x, w, b=None):
    """x [..., in] @ w[out, in]^T + b[out] -> [..., out]."""
    y = torch.matmul(x, w.t())
    return y if b is None else y + b


def layer_norm(x, w, b, eps=LAYERNORM_EPS):
    """(x - mean) / sqrt(biased var + eps) * w + b over the last dim."""
    mu = x.mean(dim=-1, keepdim=True)
    xc = x - mu
    var = (xc * xc).mean(dim=-1, keepdim=True)
    return xc / torch.sqrt(var + eps) * w + b


def rms_norm(x, w, eps=LAYERNORM_EPS):
    """x / sqrt(mean(x^2) + eps) * w over the last dim (no bias)."""
    ms = (x * x).mean(dim=-1, keepdim=True)
    return x / torch.sqrt(ms + eps) * w


def norm(x, p, name, o):
    """The configured norm of x over its last dim with parameters name.weight (and name.bias)."""
    w = p[name + ".weight"]
    if o["apply_layernorm_1p"]:
        w = w + 1.0  # zero-centred gamma: the stored weight is gamma - 1
    if o["normalization"] == "RMSNorm":
        return rms_norm(x, w, o["eps"])
    return layer_norm(x, w, p[name + ".bias"], o["eps"])


def gelu_tanh(x):
    """0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) (Hendrycks & Gimpel 2016)."""
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x * x * x)))


def gelu_erf(x):
    """x Phi(x) = 0.5 x (1 + erf(x / sqrt(2))), the exact GELU (F.gelu's default)."""
    return 0.5 * x * (1.0 + torch.erf(x * (1.0 / math.sqrt(2.0))))


def silu(x):
    """x sigmoid(x) = x / (1 + exp(-x))."""
    return x / (1.0 + torch.exp(-x))


def squared_relu(x):
    """max(x, 0)^2."""
    r = torch.clamp(x, min=0.0)
    return r * r


def rope_tables(s, o, dtype, table_dtype=torch.float32):
    """cos and sin of the rotary angles, [s, 1, 1, rot], as Megatron's RotaryEmbedding.

    inv_freq = 1 / base^(arange(0, rot, 2) / rot) and the angles
    outer(arange(s), inv_freq) are float32, as are their cos and sin (the
    self test passes table_dtype float64 to take cos and sin of the same
    float32 angles in float64); the tables are then cast to the activations'
    dtype. Not interleaved, channel j and j + rot/2 share frequency j
    (emb = cat(freqs, freqs)); interleaved, channels 2j and 2j+1 do
    (emb = [f0, f0, f1, f1, ...]).
    """
    rot = o["rot"]
    inv_freq = 1.0 / (o["rotary_base"] ** (torch.arange(0, rot, 2, dtype=torch.float32) / rot))
    freqs = torch.outer(torch.arange(s, dtype=torch.float32), inv_freq)  # [s, rot/2]
    if o["rotary_interleaved"]:
        emb = torch.stack((freqs, freqs), dim=-1).reshape(s, rot)
    else:
        emb = torch.cat((freqs, freqs), dim=-1)
    emb = emb[:, None, None, :].to(table_dtype)
    return torch.cos(emb).to(dtype), torch.sin(emb).to(dtype)


def rotate_half(x, interleaved):
    """Not interleaved: cat(-x2, x1) of the halves x1, x2; interleaved: [-x1, x0, -x3, x2, ...]."""
    if interleaved:
        x1, x2 = x[..., 0::2], x[..., 1::2]
        return torch.stack((-x2, x1), dim=-1).reshape(x.shape)
    x1, x2 = torch.chunk(x, 2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def apply_rope(x, cos, sin, interleaved):
    """Rotate the first rot channels of x [s, b, heads, d] by the tables [s, 1, 1, rot]."""
    rot = cos.shape[-1]
    xr = x[..., :rot]
    out = xr * cos + rotate_half(xr, interleaved) * sin
    if rot == x.shape[-1]:
        return out
    return torch.cat((out, x[..., rot:]), dim=-1)


def split_qkv(qkv, heads, groups):
    """[s, b, (heads + 2 groups) d] -> q [s, b, heads, d], k, v [s, b, groups, d].

    Megatron's layout: the rows of linear_qkv.weight are g groups, each
    heads/groups query heads, then the group's key head, then its value head,
    d rows each. With groups = heads this is head0.q, head0.k, head0.v,
    head1.q, ...
    """
    s, b, width = qkv.shape
    per = heads // groups
    d = width // (heads + 2 * groups)
    x = qkv.reshape(s, b, groups, per + 2, d)
    if per == 1:
        q = x[:, :, :, 0, :]
    else:
        q = x[:, :, :, :per, :].reshape(s, b, heads, d)
    return q, x[:, :, :, per, :], x[:, :, :, per + 1, :]


def core_attention(q, k, v):
    """Causal softmax(q k^T / sqrt(head_dim)) v.

    q, k, v [b, heads, s, head_dim] -> context [s, b, heads*head_dim],
    flattened head-major. Softmax in the input dtype (fp32 for the model).
    """
    b, n, s, hd = q.shape
    scores = torch.matmul(q, k.transpose(-1, -2)) * (1.0 / math.sqrt(hd))
    future = torch.triu(torch.ones(s, s, dtype=torch.bool), diagonal=1)
    scores = scores.masked_fill(future, float("-inf"))
    probs = torch.softmax(scores, dim=-1)
    ctx = torch.matmul(probs, v)  # [b, n, s, hd]
    return ctx.permute(2, 0, 1, 3).reshape(s, b, n * hd)


def self_attention(x, p, prefix, cfg):
    """Megatron SelfAttention (no dropout): x [s, b, h] -> [s, b, h].

    linear_qkv, split into query heads and key/value groups, q/k norm, RoPE on
    queries and keys, each query head attends with its group's key and value
    (query head i uses group i // (heads/groups)), linear_proj.
    """
    o = options(cfg)
    n, g = o["heads"], o["groups"]
    qkv = linear(x, p[prefix + "linear_qkv.weight"], p.get(prefix + "linear_qkv.bias"))
    q, k, v = split_qkv(qkv, n, g)
    if o["qk_layernorm"]:
        q = norm(q, p, prefix + "q_layernorm", o)
        k = norm(k, p, prefix + "k_layernorm", o)
    if o["position_embedding_type"] == "rope":
        cos, sin = rope_tables(x.shape[0], o, x.dtype)
        q = apply_rope(q, cos, sin, o["rotary_interleaved"])
        k = apply_rope(k, cos, sin, o["rotary_interleaved"])
    q, k, v = (t.permute(1, 2, 0, 3) for t in (q, k, v))  # [b, heads|groups, s, d]
    if g < n:
        k = k.repeat_interleave(n // g, dim=1)
        v = v.repeat_interleave(n // g, dim=1)
    ctx = core_attention(q, k, v)
    return linear(ctx, p[prefix + "linear_proj.weight"], p.get(prefix + "linear_proj.bias"))


def mlp(x, p, prefix, cfg):
    """Megatron MLP: linear_fc2(act(linear_fc1(x))), [s, b, h] -> [s, b, h].

    act is SwiGLU (silu of the first half of linear_fc1's output times the
    second half), squared ReLU, or GELU: the tanh form when Megatron fuses it
    with linear_fc1's bias (bias_gelu_fusion and add_bias_linear), else erf.
    """
    o = options(cfg)
    u = linear(x, p[prefix + "linear_fc1.weight"], p.get(prefix + "linear_fc1.bias"))
    if o["swiglu"]:
        gate, up = torch.chunk(u, 2, dim=-1)
        y = silu(gate) * up
    elif o["squared_relu"]:
        y = squared_relu(u)
    elif o["bias_gelu_fusion"] and o["add_bias_linear"]:
        y = gelu_tanh(u)
    else:
        y = gelu_erf(u)
    return linear(y, p[prefix + "linear_fc2.weight"], p.get(prefix + "linear_fc2.bias"))


def hidden_states(p, cfg, ids, attention=self_attention):
    """Embedding and decoder layers before the final norm: ids [b, s] -> [s, b, h]."""
    o = options(cfg)
    post_ln = o["apply_residual_connection_post_layernorm"]
    s = ids.shape[1]
    h = p["embedding.word_embeddings.weight"][ids.t()]  # [s, b, h]
    if o["position_embedding_type"] == "learned_absolute":
        h = h + p["embedding.position_embeddings.weight"][:s].unsqueeze(1)
    for i in range(cfg["num_layers"]):
        pre = f"decoder.layers.{i}."
        x = norm(h, p, pre + "input_layernorm", o)
        h = (x if post_ln else h) + attention(x, p, pre + "self_attention.", cfg)
        x = norm(h, p, pre + "pre_mlp_layernorm", o)
        h = (x if post_ln else h) + mlp(x, p, pre + "mlp.", cfg)
    return h


def logits(p, cfg, ids, attention=self_attention, output_weight=None):
    """ids [b, s] -> logits [s, b, vocab]; no output bias.

    The output layer is output_layer.weight when the config unties it, else
    the word embedding (tied). output_weight, when given, replaces that
    weight in the output layer only (used by the self test to separate the
    two gradient contributions of the tied weight).
    """
    o = options(cfg)
    h = hidden_states(p, cfg, ids, attention)
    h = norm(h, p, "decoder.final_layernorm", o)
    if output_weight is not None:
        w = output_weight
    elif o["untie_embeddings_and_output_weights"]:
        w = p["output_layer.weight"]
    else:
        w = p["embedding.word_embeddings.weight"]
    return linear(h, w)


def cross_entropy(lg, labels):
    """Per-token logsumexp(lg) - lg[label]: lg [..., V], labels [...] -> [...]."""
    m = lg.max(dim=-1, keepdim=True).values.detach()
    lse = torch.log(torch.exp(lg - m).sum(dim=-1)) + m.squeeze(-1)
    picked = torch.gather(lg, -1, labels.unsqueeze(-1)).squeeze(-1)
    return lse - picked


def token_losses(p, cfg, ids, labels, attention=self_attention, output_weight=None):
    """Per-token cross entropy [b, s] of the model on ids, labels [b, s]."""
    lg = logits(p, cfg, ids, attention, output_weight)  # [s, b, V]
    return cross_entropy(lg, labels.t()).t()
