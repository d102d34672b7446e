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

With mtp_num_layers (MTP_DEFAULTS) the model has Megatron-Core's
multi-token prediction (mtp_token_losses): D depths after the final norm,
depth k embedding the ids rolled left by k + 1, projecting
[enorm(embedding); hnorm(previous hidden)] from 2h to h (eh_proj), running
one transformer layer and its own final norm, and predicting the labels
rolled left by k + 1 through the shared output layer.

With num_experts (MOE_DEFAULTS) the MLP of the layers moe_layer_freq selects
is Megatron-Core's MoELayer on one rank (moe_layer): a router (moe_ref.py's
routing, token dropping and losses), num_experts expert MLPs and an optional
shared expert. MoEState carries the expert bias and collects the router's
auxiliary losses, which the training loop adds to the objective.

Every operation is written out by hand here; selftest.py compares each one
with PyTorch's own implementation and the whole model with gradcheck.
"""

import math

import torch

import moe_ref

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


# The MoE options, Megatron's argparse dest names, and their defaults (Megatron's
# TransformerConfig / argparse defaults): a config without num_experts (or with
# None) is dense and has no MoE layers.
MOE_DEFAULTS = {
    "num_experts": None,
    "moe_layer_freq": 1,
    "moe_ffn_hidden_size": None,
    "moe_router_topk": 2,
    "moe_router_score_function": "softmax",
    "moe_router_pre_softmax": False,
    "moe_router_num_groups": None,
    "moe_router_group_topk": None,
    "moe_router_topk_scaling_factor": None,
    "moe_router_load_balancing_type": "aux_loss",
    "moe_aux_loss_coeff": 0.0,
    "moe_z_loss_coeff": None,
    "moe_router_enable_expert_bias": False,
    "moe_router_bias_update_rate": 1e-3,
    "moe_expert_capacity_factor": None,
    "moe_token_drop_policy": "probs",
    "moe_pad_expert_input_to_capacity": False,
    "moe_shared_expert_intermediate_size": None,
    "moe_shared_expert_gate": False,
}

LOAD_BALANCING_TYPES = ("aux_loss", "seq_aux_loss", "none")


def moe_options(cfg):
    """Return cfg's MoE options with Megatron's defaults filled in, validated.

    Adds "moe_layers" (the 0-based indices of the MoE layers), "ffn" (each
    expert's width: moe_ffn_hidden_size, else ffn_hidden_size) and
    "aux_losses" ([(load balancing type, coefficient)] of the enabled
    load-balancing losses, coefficient > 0).
    """
    m = dict(MOE_DEFAULTS)
    m.update({k: cfg[k] for k in MOE_DEFAULTS if k in cfg})
    n_layers = cfg["num_layers"]
    e = m["num_experts"]
    if e is None:
        m.update(moe_layers=[], ffn=None, aux_losses=[])
        return m
    if e < 1:
        raise ValueError(f"num_experts {e}: want >= 1")
    freq = m["moe_layer_freq"]
    if isinstance(freq, int):
        if freq < 1:
            raise ValueError(f"moe_layer_freq {freq}: want >= 1")
        m["moe_layers"] = [i for i in range(n_layers) if i % freq == 0]
    else:
        if len(freq) != n_layers or any(v not in (0, 1) for v in freq):
            raise ValueError(f"moe_layer_freq {freq}: want {n_layers} values 0 or 1")
        m["moe_layers"] = [i for i, v in enumerate(freq) if v]
    m["ffn"] = m["moe_ffn_hidden_size"] or cfg["ffn_hidden_size"]
    k, fn = m["moe_router_topk"], m["moe_router_score_function"]
    if not 1 <= k <= e:
        raise ValueError(f"moe_router_topk {k} of {e} experts")
    if fn not in ("softmax", "sigmoid"):
        raise ValueError(f"moe_router_score_function {fn!r}: want softmax or sigmoid")
    if fn == "softmax" and k == 1 and not m["moe_router_pre_softmax"]:
        raise ValueError("softmax with moe_router_topk 1 needs moe_router_pre_softmax (Megatron)")
    if m["moe_router_enable_expert_bias"] and fn != "sigmoid":
        raise ValueError("moe_router_enable_expert_bias needs the sigmoid score function")
    if m["moe_router_group_topk"]:
        g, gk = m["moe_router_num_groups"], m["moe_router_group_topk"]
        if not g or e % g or gk > g or k % gk or gk * (e // g) < k:
            raise ValueError(f"group-limited routing: {e} experts, {g} groups, {gk} kept, top-{k}")
    types = m["moe_router_load_balancing_type"]
    coeffs = m["moe_aux_loss_coeff"]
    if isinstance(types, str):
        types, coeffs = [types], [coeffs]
    if len(types) != len(coeffs) or any(t not in LOAD_BALANCING_TYPES for t in types):
        raise ValueError(f"moe_router_load_balancing_type {types} with moe_aux_loss_coeff {coeffs}")
    m["aux_losses"] = [(t, c) for t, c in zip(types, coeffs) if t != "none" and c > 0]
    if m["moe_token_drop_policy"] not in ("probs", "position"):
        raise ValueError(f"moe_token_drop_policy {m['moe_token_drop_policy']!r}")
    if m["moe_pad_expert_input_to_capacity"] and m["moe_expert_capacity_factor"] is None:
        raise ValueError("moe_pad_expert_input_to_capacity needs moe_expert_capacity_factor")
    if m["moe_shared_expert_gate"]:
        raise ValueError("moe_shared_expert_gate is not part of the reference")
    return m


# The multi-token-prediction options and their defaults (Megatron's): a config
# without mtp_num_layers (or with None) has no MTP depths.
MTP_DEFAULTS = {
    "mtp_num_layers": None,
    "mtp_loss_scaling_factor": 0.1,
}


def mtp_options(cfg):
    """Return cfg's MTP options with the defaults filled in, validated;
    mtp_num_layers None becomes 0."""
    t = dict(MTP_DEFAULTS)
    t.update({k: cfg[k] for k in MTP_DEFAULTS if k in cfg})
    t["mtp_num_layers"] = t["mtp_num_layers"] or 0
    if t["mtp_num_layers"] < 0 or t["mtp_loss_scaling_factor"] < 0:
        raise ValueError(f"mtp_num_layers {t['mtp_num_layers']}, mtp_loss_scaling_factor {t['mtp_loss_scaling_factor']}")
    if t["mtp_num_layers"] and options(cfg)["position_embedding_type"] == "learned_absolute":
        raise ValueError("Megatron refuses MTP with learned_absolute position embeddings")
    return t


def mtp_is_moe(cfg):
    """Whether the MTP depths' layers are MoE layers: when the decoder's last is
    (Megatron builds the depth's layer from the last layer's spec)."""
    return cfg["num_layers"] - 1 in moe_options(cfg)["moe_layers"]


def is_moe_layer(cfg, i):
    """Whether decoder layer i (0-based) is a MoE layer."""
    return i in moe_options(cfg)["moe_layers"]


def _norm_shapes(name, size, o):
    out = [(name + ".weight", [size])]
    if o["normalization"] == "LayerNorm":
        out.append((name + ".bias", [size]))
    return out


def _moe_shapes(p, h, o, m):
    """The MoE layer's tensors in Megatron's module order: router, experts
    (SequentialMLP, global expert index), shared experts; with add_bias_linear
    each weight followed by its bias (router.bias [E], an expert's
    linear_fc1.bias [f1] and linear_fc2.bias [h], the shared expert's)."""
    fm = m["ffn"]
    bias = o["add_bias_linear"]
    out = []

    def add(name, rows, cols):
        out.append((name + ".weight", [rows, cols]))
        if bias:
            out.append((name + ".bias", [rows]))

    add(p + "router", m["num_experts"], h)
    for e in range(m["num_experts"]):
        q = f"{p}experts.local_experts.{e}."
        add(q + "linear_fc1", 2 * fm if o["swiglu"] else fm, h)
        add(q + "linear_fc2", h, fm)
    fs = m["moe_shared_expert_intermediate_size"]
    if fs:
        add(p + "shared_experts.linear_fc1", 2 * fs if o["swiglu"] else fs, h)
        add(p + "shared_experts.linear_fc2", h, fs)
    return out


def param_shapes(cfg):
    """Return [(name, shape)] of every parameter, in model-definition order."""
    o = options(cfg)
    m = moe_options(cfg)
    h = cfg["hidden_size"]
    out = [("embedding.word_embeddings.weight", [cfg["vocab_size"], h])]
    if o["position_embedding_type"] == "learned_absolute":
        out.append(("embedding.position_embeddings.weight", [cfg["max_position_embeddings"], h]))
    for i in range(cfg["num_layers"]):
        out += _layer_shapes(f"decoder.layers.{i}.", cfg, i in m["moe_layers"])
    out += _norm_shapes("decoder.final_layernorm", h, o)
    for k in range(mtp_options(cfg)["mtp_num_layers"]):
        p = f"mtp.layers.{k}."
        out += _norm_shapes(p + "enorm", h, o)
        out += _norm_shapes(p + "hnorm", h, o)
        out.append((p + "eh_proj.weight", [h, 2 * h]))
        out += _layer_shapes(p + "mtp_model_layer.", cfg, mtp_is_moe(cfg))
        out += _norm_shapes(p + "final_layernorm", h, o)
    if o["untie_embeddings_and_output_weights"]:
        out.append(("output_layer.weight", [cfg["vocab_size"], h]))
    return out


def _layer_shapes(p, cfg, is_moe):
    """The tensors of the transformer layer with prefix p, in module order."""
    o = options(cfg)
    h = cfg["hidden_size"]
    n, g, d = o["heads"], o["groups"], o["head_dim"]
    out = _norm_shapes(p + "input_layernorm", h, o)
    if mla_options(cfg)["multi_latent_attention"]:
        out += _mla_shapes(p + "self_attention.", cfg)
    else:
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
    if is_moe:
        return out + _moe_shapes(p + "mlp.", h, o, moe_options(cfg))
    f = cfg["ffn_hidden_size"]
    f1 = 2 * f if o["swiglu"] else f
    out.append((p + "mlp.linear_fc1.weight", [f1, h]))
    if o["add_bias_linear"]:
        out.append((p + "mlp.linear_fc1.bias", [f1]))
    out.append((p + "mlp.linear_fc2.weight", [h, f]))
    if o["add_bias_linear"]:
        out.append((p + "mlp.linear_fc2.bias", [h]))
    return out


def _mla_shapes(p, cfg):
    """MLASelfAttention's tensors in Megatron's module order: linear_proj
    (built by MultiLatentAttention), then linear_q_proj or linear_q_down_proj
    and linear_q_up_proj, linear_kv_down_proj, linear_kv_up_proj, and under
    qk_layernorm q_layernorm [q_lora_rank] (with q_lora_rank) and kv_layernorm
    [kv_lora_rank]. No biases but linear_proj's."""
    o, a = options(cfg), mla_options(cfg)
    h, n = cfg["hidden_size"], o["heads"]
    qk, r, vd, kvr, qr = a["qk_head_dim"], a["qk_pos_emb_head_dim"], a["v_head_dim"], a["kv_lora_rank"], a["q_lora_rank"]
    out = [(p + "linear_proj.weight", [h, n * vd])]
    if o["add_bias_linear"]:
        out.append((p + "linear_proj.bias", [h]))
    if qr:
        out += [(p + "linear_q_down_proj.weight", [qr, h]), (p + "linear_q_up_proj.weight", [n * (qk + r), qr])]
    else:
        out.append((p + "linear_q_proj.weight", [n * (qk + r), h]))
    out += [(p + "linear_kv_down_proj.weight", [kvr + r, h]), (p + "linear_kv_up_proj.weight", [n * (qk + vd), kvr])]
    if o["qk_layernorm"]:
        if qr:
            out += _norm_shapes(p + "q_layernorm", qr, o)
        out += _norm_shapes(p + "kv_layernorm", kvr, o)
    return out


def init_std(name, cfg, std=INIT_METHOD_STD):
    """Return the N(0, std) of a weight, 0.0 for a bias, None for a norm weight or bias.

    The MoE tensors follow the same rules: router.weight N(0, std), every
    expert's and the shared expert's linear_fc2.weight the scaled init; but
    router.bias is N(0, std), as Megatron's TopKRouter draws it with the init
    method (megatron/core/transformer/moe/router.py, reset_parameters). The
    MTP tensors too: enorm, hnorm and final_layernorm are norms, eh_proj.weight
    N(0, std), the depth's layer's as a decoder layer's.
    """
    if "layernorm" in name or name.split(".")[-2] in ("enorm", "hnorm"):
        return None
    if name.endswith("router.bias"):
        return std
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


def core_attention(q, k, v, scale=None):
    """Causal softmax(q k^T · scale) v, scale 1/sqrt(head_dim) by default.

    q, k [b, heads, s, head_dim], v [b, heads, s, v_dim] -> context
    [s, b, heads*v_dim], flattened head-major. Softmax in the input dtype
    (fp32 for the model).
    """
    b, n, s, hd = q.shape
    if scale is None:
        scale = 1.0 / math.sqrt(hd)
    scores = torch.matmul(q, k.transpose(-1, -2)) * scale
    future = torch.triu(torch.ones(s, s, dtype=torch.bool), diagonal=1)
    scores = scores.masked_fill(future, float("-inf"))
    probs = torch.softmax(scores, dim=-1)
    ctx = torch.matmul(probs, v)  # [b, n, s, v_dim]
    return ctx.permute(2, 0, 1, 3).reshape(s, b, n * v.shape[-1])


# The multi-latent-attention options (Megatron's MLATransformerConfig and its
# argparse defaults): a config without multi_latent_attention (or false) has
# none. rope_type is MLA's ("yarn" by default, which with
# rotary_scaling_factor 1 is plain RoPE).
MLA_DEFAULTS = {
    "multi_latent_attention": False,
    "q_lora_rank": None,
    "kv_lora_rank": 32,
    "qk_head_dim": 128,
    "qk_pos_emb_head_dim": 64,
    "v_head_dim": 128,
    "rope_type": "yarn",
    "rotary_scaling_factor": 1.0,
    "original_max_position_embeddings": 4096,
    "beta_fast": 32.0,
    "beta_slow": 1.0,
    "mscale": 1.0,
    "mscale_all_dim": 0.0,
}


def mla_options(cfg):
    """Return cfg's MLA options with the defaults filled in, validated."""
    a = dict(MLA_DEFAULTS)
    a.update({k: cfg[k] for k in MLA_DEFAULTS if k in cfg})
    if a["multi_latent_attention"]:
        if a["rope_type"] not in ("rope", "yarn"):
            raise ValueError(f"rope_type {a['rope_type']!r}: want rope or yarn")
        if a["qk_pos_emb_head_dim"] % 2:
            raise ValueError("qk_pos_emb_head_dim must be even")
        if options(cfg)["group_query_attention"]:
            raise ValueError("Megatron refuses grouped-query attention with MLA")
    return a


def yarn_get_mscale(scale, mscale):
    """_yarn_get_mscale: 1 for scale <= 1, else 0.1·mscale·ln(scale) + 1."""
    if scale <= 1:
        return 1.0
    return 0.1 * mscale * math.log(scale) + 1.0


def mla_rope_tables(s, a, dtype=torch.float32):
    """cos, sin [s, r] of MLA's rotary embedding (r = qk_pos_emb_head_dim) and
    the factor they are multiplied by: RoPE (rotary_base, positions 0..s-1),
    or YaRN (megatron/core/models/common/embeddings/yarn_rotary_pos_embedding.py:
    the inverse frequencies blended between base^(-2i/r) and that over
    rotary_scaling_factor by a linear ramp over the correction range, and the
    concentration factor mscale(factor, mscale)/mscale(factor, mscale_all_dim))."""
    r = a["qk_pos_emb_head_dim"]
    if a["rope_type"] == "rope":
        # RotaryEmbedding(qk_pos_emb_head_dim, rotary_percent): the first
        # int(r·percent) channels (YaRN keeps its whole width)
        r = int(r * a.get("rotary_percent", 1.0))
    base = 10000.0 if "rotary_base" not in a else a["rotary_base"]
    extra = 1.0 / (base ** (torch.arange(0, r, 2, dtype=torch.float32) / r))
    factor = 1.0
    if a["rope_type"] == "yarn":
        f = a["rotary_scaling_factor"]
        inter = 1.0 / (f * base ** (torch.arange(0, r, 2, dtype=torch.float32) / r))

        def corr(rot):
            return (r * math.log(a["original_max_position_embeddings"] / (rot * 2 * math.pi))) / (2 * math.log(base))

        low, high = max(math.floor(corr(a["beta_fast"])), 0), min(math.ceil(corr(a["beta_slow"])), r - 1)
        if low == high:
            high += 0.001
        ramp = torch.clamp((torch.arange(r // 2, dtype=torch.float32) - low) / (high - low), 0, 1)
        mask = 1.0 - ramp
        extra = inter * (1 - mask) + extra * mask
        factor = yarn_get_mscale(f, a["mscale"]) / yarn_get_mscale(f, a["mscale_all_dim"])
    freqs = torch.outer(torch.arange(s, dtype=torch.float32), extra)
    freqs = torch.cat((freqs, freqs), dim=-1)
    return (torch.cos(freqs) * factor).to(dtype), (torch.sin(freqs) * factor).to(dtype)


def mla_rope(t, cos, sin):
    """Megatron's apply_rotary_pos_emb with multi_latent_attention: the first
    cos.shape[-1] channels de-interleaved ([0, 2, 4, ...; 1, 3, 5, ...]), then
    rotated by halves, the rest passed through. t [s, b, heads, r], cos and
    sin [s, rot]."""
    rot_dim = cos.shape[-1]
    t, t_pass = t[..., :rot_dim], t[..., rot_dim:]
    t = torch.cat((t[..., 0::2], t[..., 1::2]), dim=-1)
    half = t.shape[-1] // 2
    rot = torch.cat((-t[..., half:], t[..., :half]), dim=-1)
    return torch.cat((t * cos[:, None, None, :] + rot * sin[:, None, None, :], t_pass), dim=-1)


def mla_attention(x, p, prefix, cfg):
    """Megatron-Core's MLASelfAttention (local spec, no dropout): x [s, b, h] -> [s, b, h].

        q = q_proj(x), or q_up(q_layernorm(q_down(x)))          [s, b, n, qk + r]
        kv_c, k_pe = split(kv_down(x), [kv_lora_rank, r])
        k_nope, v = split(kv_up(kv_layernorm(kv_c)), [qk, v_dim]) per head
        query = [q_nope; rope(q_pe)], key = [k_nope; rope(k_pe) for every head]
        out = linear_proj(softmax(query·keyᵀ · m²/sqrt(qk + r) + causal) · v)

    with q_layernorm and kv_layernorm only under qk_layernorm (the local
    spec's IdentityOp otherwise) and m = mscale(rotary_scaling_factor,
    mscale_all_dim) for YaRN (1 for RoPE)."""
    o, a = options(cfg), mla_options(cfg)
    s, b, _ = x.shape
    n = o["heads"]
    qk, r, vd, kvr = a["qk_head_dim"], a["qk_pos_emb_head_dim"], a["v_head_dim"], a["kv_lora_rank"]
    qln = o["qk_layernorm"]
    if a["q_lora_rank"]:
        qc = linear(x, p[prefix + "linear_q_down_proj.weight"])
        if qln:
            qc = norm(qc, p, prefix + "q_layernorm", o)
        q = linear(qc, p[prefix + "linear_q_up_proj.weight"])
    else:
        q = linear(x, p[prefix + "linear_q_proj.weight"])
    q = q.reshape(s, b, n, qk + r)
    kv_c, k_pe = torch.split(linear(x, p[prefix + "linear_kv_down_proj.weight"]), [kvr, r], dim=-1)
    if qln:
        kv_c = norm(kv_c, p, prefix + "kv_layernorm", o)
    kv = linear(kv_c, p[prefix + "linear_kv_up_proj.weight"]).reshape(s, b, n, qk + vd)
    q_nope, q_pe = torch.split(q, [qk, r], dim=-1)
    k_nope, v = torch.split(kv, [qk, vd], dim=-1)
    cos, sin = mla_rope_tables(s, dict(a, rotary_base=o["rotary_base"], rotary_percent=o["rotary_percent"]), x.dtype)
    query = torch.cat((q_nope, mla_rope(q_pe, cos, sin)), dim=-1)
    k_pe = mla_rope(k_pe.unsqueeze(2), cos, sin).expand(s, b, n, r)
    key = torch.cat((k_nope, k_pe), dim=-1)
    m = yarn_get_mscale(a["rotary_scaling_factor"], a["mscale_all_dim"])  # whatever rope_type, as the reference
    scale = m * m / math.sqrt(qk + r)
    ctx = core_attention(*(t.permute(1, 2, 0, 3) for t in (query, key, v)), scale=scale)
    return linear(ctx, p[prefix + "linear_proj.weight"], p.get(prefix + "linear_proj.bias"))


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


def activation(u, o):
    """The MLP's activation of linear_fc1's output u.

    SwiGLU (silu of the first half of u times the second half), squared ReLU,
    or GELU: the tanh form when Megatron fuses it with linear_fc1's bias
    (bias_gelu_fusion and add_bias_linear), else erf.
    """
    if o["swiglu"]:
        gate, up = torch.chunk(u, 2, dim=-1)
        return silu(gate) * up
    if o["squared_relu"]:
        return squared_relu(u)
    if o["bias_gelu_fusion"] and o["add_bias_linear"]:
        return gelu_tanh(u)
    return gelu_erf(u)


def mlp(x, p, prefix, cfg):
    """Megatron MLP: linear_fc2(act(linear_fc1(x))), [s, b, h] -> [s, b, h] (activation above)."""
    o = options(cfg)
    u = linear(x, p[prefix + "linear_fc1.weight"], p.get(prefix + "linear_fc1.bias"))
    y = activation(u, o)
    return linear(y, p[prefix + "linear_fc2.weight"], p.get(prefix + "linear_fc2.bias"))


class MoEState:
    """What Megatron keeps beside the parameters of the MoE layers, and what they record.

    expert_bias {layer: [E] float32}: the router's expert_bias buffer (with
    moe_router_enable_expert_bias; zeros at the start, kept in float32 as
    Megatron keeps it whatever the model's dtype). tokens_per_expert {layer:
    [E] float32}: the router's local_tokens_per_expert, the column sums of the
    final routing maps (after token dropping) of every forward run with grad
    enabled since the last update_expert_bias. training: the router's
    self.training; the z and load-balancing losses are computed only in
    training forwards with grad enabled.

    Every MoE layer forward appends {"layer", "logits" (detached), "expert_bias"
    (the bias it routed with, or None), "routing_map" (final), "routed_map"
    (before dropping), "capacity", and per enabled loss "load_balancing_loss",
    "seq_load_balancing_loss", "z_loss" (the coefficient-weighted loss, detached)}
    to records, and adds each coefficient-weighted loss (with its graph) to
    aux_objective, which take_aux_objective hands to the training loop.

    autoscale: None (the default) leaves the losses in aux_objective; a number
    instead attaches them the way Megatron does, with MoEAuxLossAutoScaler
    (the load-balancing losses to the routing probabilities, the z loss to the
    logits), whose backward feeds each loss the gradient `autoscale` (the self
    test compares the two).
    """

    def __init__(self, cfg, training=True, autoscale=None):
        m = moe_options(cfg)
        self.cfg = cfg
        self.training = training
        self.autoscale = autoscale
        e = m["num_experts"]
        bias = m["moe_router_enable_expert_bias"]
        self.expert_bias = {i: torch.zeros(e, dtype=torch.float32) for i in m["moe_layers"]} if bias else {}
        self.tokens_per_expert = {i: torch.zeros(e, dtype=torch.float32) for i in m["moe_layers"]} if bias else {}
        self.records = []
        self.aux_objective = None

    def add_aux(self, loss):
        self.aux_objective = loss if self.aux_objective is None else self.aux_objective + loss

    def take_aux_objective(self):
        """The sum of the coefficient-weighted auxiliary losses since the last call (or None)."""
        out, self.aux_objective = self.aux_objective, None
        return out

    def take_records(self):
        out, self.records = self.records, []
        return out

    def update_expert_bias(self):
        """finalize_model_grads' update: bias += sign(mean(tokens) - tokens) * rate; counts to 0.

        Returns the counts the update used {layer: [E]}.
        """
        rate = moe_options(self.cfg)["moe_router_bias_update_rate"]
        used = {}
        for i, tokens in self.tokens_per_expert.items():
            self.expert_bias[i] = moe_ref.updated_expert_bias([tokens], self.expert_bias[i], rate)
            used[i] = tokens.clone()
            tokens.zero_()
        return used


class MoEAuxLossAutoScaler(torch.autograd.Function):
    """Megatron's MoEAuxLossAutoScaler: identity on output; backward gives aux_loss the gradient scale."""

    @staticmethod
    def forward(ctx, output, aux_loss, scale):
        ctx.save_for_backward(aux_loss)
        ctx.scale = scale
        return output.view_as(output)

    @staticmethod
    def backward(ctx, grad_output):
        (aux_loss,) = ctx.saved_tensors
        return grad_output, torch.ones_like(aux_loss) * ctx.scale, None


def moe_layer(x, p, prefix, cfg, layer, moe=None):
    """Megatron-Core's MoELayer on one rank (all experts local): [s, b, h] -> [s, b, h].

    The T = s*b tokens in sequence-first order (token t = i*b + j) are routed
    by logits = x @ router.weight^T [T, E] (float32 in the model's dtype):
    moe_ref.routing (top-k, score function, expert bias, group limit, scaling)
    then moe_ref.token_dropping when moe_expert_capacity_factor is set. In a
    training forward (moe.training and grad enabled) the z loss of the logits
    and the load-balancing losses of moe_ref.aux_scores are computed and handed
    to moe (see MoEState). Expert e runs on the tokens of column e of the final
    routing map, in token order: u = x_e @ fc1_e^T, y = act(u) * probs[:, e]
    (Megatron multiplies by the probability after the activation, before
    linear_fc2), out_e = y @ fc2_e^T; the outputs are summed back per token in
    expert order (Megatron's unpermute: index_add of the expert-major rows), so
    out[t] = sum_e fc2_e(act(fc1_e x_t) * probs[t, e]); a token dropped by all
    its experts gets 0. Then the shared expert's MLP output is added (routed +
    shared).

    With add_bias_linear the router adds router.bias to the logits, an expert
    adds linear_fc1.bias before its activation and linear_fc2.bias scaled by
    the probability after linear_fc2 (Megatron's MLP.forward for an expert:
    output += output_bias * per_token_scale), and the shared expert is the
    biased dense MLP (Megatron refuses shared experts with biases; gotron has
    them, docs/DECISIONS.md).
    """
    o = options(cfg)
    m = moe_options(cfg)
    s, b, h = x.shape
    num_tokens, e_num, k = s * b, m["num_experts"], m["moe_router_topk"]
    fn = m["moe_router_score_function"]
    shared = None
    if m["moe_shared_expert_intermediate_size"]:
        shared = mlp(x, p, prefix + "shared_experts.", cfg)
    tokens = x.reshape(num_tokens, h)
    logits = linear(tokens, p[prefix + "router.weight"], p.get(prefix + "router.bias"))  # [T, E]
    training = moe is not None and moe.training and torch.is_grad_enabled()
    rec = {"layer": layer, "logits": logits.detach()}
    bias = None
    if m["moe_router_enable_expert_bias"]:
        bias = moe.expert_bias[layer] if moe is not None else torch.zeros(e_num, dtype=torch.float32)
    rec["expert_bias"] = None if bias is None else bias.clone()

    scale = None if moe is None else moe.autoscale
    aux = []  # (record name, coefficient-weighted loss)
    if training and m["moe_z_loss_coeff"] is not None:
        z = moe_ref.z_loss(logits, m["moe_z_loss_coeff"] / 1)  # Megatron divides by the tp*cp size
        aux.append(("z_loss", z))
        if scale is not None:
            logits = MoEAuxLossAutoScaler.apply(logits, z, scale)
    probs, rmap = moe_ref.routing(
        logits, k, fn, m["moe_router_pre_softmax"], m["moe_router_num_groups"],
        m["moe_router_group_topk"], m["moe_router_topk_scaling_factor"], bias,
    )
    rec["routed_map"] = rmap
    rec["capacity"] = None
    if m["moe_expert_capacity_factor"] is not None:
        probs, rmap, rec["capacity"] = moe_ref.token_dropping(
            probs, rmap, k, m["moe_expert_capacity_factor"], m["moe_token_drop_policy"],
            m["moe_pad_expert_input_to_capacity"],
        )
    rec["routing_map"] = rmap
    if training and m["aux_losses"]:
        scores, amap = moe_ref.aux_scores(logits, k, fn)
        for kind, coeff in m["aux_losses"]:
            if kind == "aux_loss":
                name, loss = "load_balancing_loss", moe_ref.load_balancing_loss(scores, amap, k, e_num, coeff)
            else:
                name, loss = "seq_load_balancing_loss", moe_ref.seq_load_balancing_loss(
                    scores, amap, s, b, k, e_num, coeff)
            aux.append((name, loss))
            if scale is not None:
                probs = MoEAuxLossAutoScaler.apply(probs, loss, scale)
    if moe is not None:
        for name, loss in aux:
            rec[name] = loss.detach()
            if scale is None:
                moe.add_aux(loss)
        if bias is not None and torch.is_grad_enabled():
            moe.tokens_per_expert[layer] += rmap.sum(dim=0)
        moe.records.append(rec)

    out = torch.zeros(num_tokens, h, dtype=x.dtype)
    for e in range(e_num):
        idx = torch.nonzero(rmap[:, e]).squeeze(1)
        if idx.numel() == 0:
            continue
        q = f"{prefix}experts.local_experts.{e}."
        u = linear(tokens.index_select(0, idx), p[q + "linear_fc1.weight"], p.get(q + "linear_fc1.bias"))
        pe = probs[idx, e].unsqueeze(-1)
        ye = linear(activation(u, o) * pe, p[q + "linear_fc2.weight"])
        if q + "linear_fc2.bias" in p:
            ye = ye + p[q + "linear_fc2.bias"] * pe
        out = out.index_add(0, idx, ye)
    out = out.reshape(s, b, h)
    return out if shared is None else out + shared


def hidden_states(p, cfg, ids, attention=self_attention, moe=None):
    """Embedding and decoder layers before the final norm: ids [b, s] -> [s, b, h].

    The MoE layers (moe_options) run moe_layer with the state moe (None: an
    expert bias of 0 and no auxiliary loss; an evaluation with a trained bias
    passes MoEState(cfg, training=False) holding it, under torch.no_grad()).
    """
    o = options(cfg)
    moe_layers = moe_options(cfg)["moe_layers"]
    s = ids.shape[1]
    h = p["embedding.word_embeddings.weight"][ids.t()]  # [s, b, h]
    if o["position_embedding_type"] == "learned_absolute":
        h = h + p["embedding.position_embeddings.weight"][:s].unsqueeze(1)
    for i in range(cfg["num_layers"]):
        h = transformer_layer(h, p, f"decoder.layers.{i}.", cfg, i if i in moe_layers else None, attention, moe)
    return h


def transformer_layer(h, p, pre, cfg, moe_layer_index=None, attention=self_attention, moe=None):
    """One transformer layer with prefix pre on h [s, b, h]; a MoE layer (index
    moe_layer_index of MoEState's records) unless moe_layer_index is None."""
    o = options(cfg)
    post_ln = o["apply_residual_connection_post_layernorm"]
    x = norm(h, p, pre + "input_layernorm", o)
    if mla_options(cfg)["multi_latent_attention"] and attention is self_attention:
        attention = mla_attention
    h = (x if post_ln else h) + attention(x, p, pre + "self_attention.", cfg)
    x = norm(h, p, pre + "pre_mlp_layernorm", o)
    if moe_layer_index is not None:
        return (x if post_ln else h) + moe_layer(x, p, pre + "mlp.", cfg, moe_layer_index, moe)
    return (x if post_ln else h) + mlp(x, p, pre + "mlp.", cfg)


def roll_left(x, k):
    """x [b, s] rolled left by k along s, the last k places 0 (Megatron's
    roll_tensor with shifts -1, applied k times)."""
    out = torch.zeros_like(x)
    if k < x.shape[1]:
        out[:, : x.shape[1] - k] = x[:, k:]
    return out


def mtp_token_losses(p, cfg, ids, labels):
    """The main per-token losses [b, s] and, per MTP depth k = 0..D-1, its
    per-token losses [b, s] and loss mask [b, s] (Megatron-Core's
    MultiTokenPredictionBlock and process_mtp_loss, dense layers):

        h_0 = final_layernorm(decoder(ids))          (the main logits' input)
        e_k = word_emb[roll(ids, k+1)]
        h_{k+1} = final_layernorm_k(layer_k(eh_proj_k([enorm_k(e_k); hnorm_k(h_k)])))
        loss_k  = CE(h_{k+1} @ W^T, roll(labels, k+1)),  mask_k = roll(ones, k+1)

    W is the output layer's weight (the word embedding when tied)."""
    o = options(cfg)
    t = mtp_options(cfg)
    if mtp_is_moe(cfg):
        raise ValueError("the reference's MTP depths here are dense")
    w = p["output_layer.weight"] if o["untie_embeddings_and_output_weights"] else p["embedding.word_embeddings.weight"]
    h = norm(hidden_states(p, cfg, ids), p, "decoder.final_layernorm", o)
    main = cross_entropy(linear(h, w), labels.t()).t()
    depths = []
    for k in range(t["mtp_num_layers"]):
        pre = f"mtp.layers.{k}."
        e = p["embedding.word_embeddings.weight"][roll_left(ids, k + 1).t()]  # [s, b, h]
        x = torch.cat((norm(e, p, pre + "enorm", o), norm(h, p, pre + "hnorm", o)), dim=-1)
        x = linear(x, p[pre + "eh_proj.weight"])
        h = norm(transformer_layer(x, p, pre + "mtp_model_layer.", cfg), p, pre + "final_layernorm", o)
        loss = cross_entropy(linear(h, w), roll_left(labels, k + 1).t()).t()
        depths.append((loss, roll_left(torch.ones_like(labels, dtype=torch.float32), k + 1)))
    return main, depths


def logits(p, cfg, ids, attention=self_attention, output_weight=None, moe=None):
    """ids [b, s] -> logits [s, b, vocab]; no output bias.

    The output layer is output_layer.weight when the config unties it, else
    the word embedding (tied). output_weight, when given, replaces that
    weight in the output layer only (used by the self test to separate the
    two gradient contributions of the tied weight).
    """
    o = options(cfg)
    h = hidden_states(p, cfg, ids, attention, moe)
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


def token_losses(p, cfg, ids, labels, attention=self_attention, output_weight=None, moe=None):
    """Per-token cross entropy [b, s] of the model on ids, labels [b, s] (moe: see hidden_states)."""
    lg = logits(p, cfg, ids, attention, output_weight, moe)  # [s, b, V]
    return cross_entropy(lg, labels.t()).t()
