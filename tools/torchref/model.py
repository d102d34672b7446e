"""The reference GPT as plain functions over a {Megatron name: tensor} dict.

Activations are sequence-first, [s, b, h], as in Megatron-Core. Weights are
[out_features, in_features]; linear(x, W, c) = x @ W^T + c.

    h      = word_emb[ids] + pos_emb[0:s]
    layer: h = h + linear_proj(attention(input_layernorm(h)))
           h = h + linear_fc2(gelu_tanh(linear_fc1(pre_mlp_layernorm(h))))
    logits = final_layernorm(h) @ word_emb^T          (tied, no output bias)
    loss_t = logsumexp(logits_t) - logits_t[label_t]  (per token)

Every operation is written out by hand here; selftest.py compares each one
with PyTorch's own implementation and the whole model with gradcheck.
"""

import math

import torch

LAYERNORM_EPS = 1e-5
INIT_METHOD_STD = 0.02


def param_shapes(cfg):
    """Return [(name, shape)] of every parameter, in model-definition order."""
    h = cfg["hidden_size"]
    f = cfg["ffn_hidden_size"]
    out = [
        ("embedding.word_embeddings.weight", [cfg["vocab_size"], h]),
        ("embedding.position_embeddings.weight", [cfg["max_position_embeddings"], h]),
    ]
    for i in range(cfg["num_layers"]):
        p = f"decoder.layers.{i}."
        out += [
            (p + "input_layernorm.weight", [h]),
            (p + "input_layernorm.bias", [h]),
            (p + "self_attention.linear_qkv.weight", [3 * h, h]),
            (p + "self_attention.linear_qkv.bias", [3 * h]),
            (p + "self_attention.linear_proj.weight", [h, h]),
            (p + "self_attention.linear_proj.bias", [h]),
            (p + "pre_mlp_layernorm.weight", [h]),
            (p + "pre_mlp_layernorm.bias", [h]),
            (p + "mlp.linear_fc1.weight", [f, h]),
            (p + "mlp.linear_fc1.bias", [f]),
            (p + "mlp.linear_fc2.weight", [h, f]),
            (p + "mlp.linear_fc2.bias", [h]),
        ]
    out += [
        ("decoder.final_layernorm.weight", [h]),
        ("decoder.final_layernorm.bias", [h]),
    ]
    return out


def init_std(name, cfg, std=INIT_METHOD_STD):
    """Return the N(0, std) of a weight, 0.0 for a bias, None for a LayerNorm weight."""
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
    default CPU generator in float32; biases are 0, LayerNorm weight 1, bias 0.
    """
    torch.manual_seed(torch_seed)
    params = {}
    for name, shape in param_shapes(cfg):
        s = init_std(name, cfg, std)
        if s is None:
            t = torch.ones(shape) if name.endswith(".weight") else torch.zeros(shape)
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


def gelu_tanh(x):
    """0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) (Hendrycks & Gimpel 2016)."""
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x * x * x)))


def split_qkv(qkv, heads):
    """[s, b, 3h] viewed as [s, b, heads, 3, head_dim] -> q, k, v each [b, heads, s, head_dim].

    This is Megatron's interleaved layout: the rows of linear_qkv.weight are
    head0.q, head0.k, head0.v, head1.q, ... each head_dim rows.
    """
    s, b, three_h = qkv.shape
    hd = three_h // (3 * heads)
    x = qkv.reshape(s, b, heads, 3, hd)
    q, k, v = x[:, :, :, 0, :], x[:, :, :, 1, :], x[:, :, :, 2, :]
    return tuple(t.permute(1, 2, 0, 3) for t in (q, k, v))


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


def self_attention(x, p, prefix, heads):
    """Megatron SelfAttention (no dropout): x [s, b, h] -> [s, b, h]."""
    qkv = linear(x, p[prefix + "linear_qkv.weight"], p[prefix + "linear_qkv.bias"])
    ctx = core_attention(*split_qkv(qkv, heads))
    return linear(ctx, p[prefix + "linear_proj.weight"], p[prefix + "linear_proj.bias"])


def mlp(x, p, prefix):
    """Megatron MLP: linear_fc2(gelu_tanh(linear_fc1(x))), [s, b, h] -> [s, b, h]."""
    y = gelu_tanh(linear(x, p[prefix + "linear_fc1.weight"], p[prefix + "linear_fc1.bias"]))
    return linear(y, p[prefix + "linear_fc2.weight"], p[prefix + "linear_fc2.bias"])


def hidden_states(p, cfg, ids, attention=self_attention):
    """Embedding and decoder layers before the final LayerNorm: ids [b, s] -> [s, b, h]."""
    s = ids.shape[1]
    h = p["embedding.word_embeddings.weight"][ids.t()]  # [s, b, h]
    h = h + p["embedding.position_embeddings.weight"][:s].unsqueeze(1)
    for i in range(cfg["num_layers"]):
        pre = f"decoder.layers.{i}."
        x = layer_norm(h, p[pre + "input_layernorm.weight"], p[pre + "input_layernorm.bias"])
        h = h + attention(x, p, pre + "self_attention.", cfg["num_attention_heads"])
        x = layer_norm(h, p[pre + "pre_mlp_layernorm.weight"], p[pre + "pre_mlp_layernorm.bias"])
        h = h + mlp(x, p, pre + "mlp.")
    return h


def logits(p, cfg, ids, attention=self_attention, output_weight=None):
    """ids [b, s] -> logits [s, b, vocab]; the output layer is the word embedding (tied).

    output_weight, when given, replaces the tied weight in the output layer only
    (used by the self test to separate the two gradient contributions).
    """
    h = hidden_states(p, cfg, ids, attention)
    h = layer_norm(h, p["decoder.final_layernorm.weight"], p["decoder.final_layernorm.bias"])
    w = p["embedding.word_embeddings.weight"] if output_weight is None else output_weight
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
