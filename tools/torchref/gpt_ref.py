#!/usr/bin/python3
"""Independent PyTorch reference for gotron's GPT; writes and checks the fixtures.

    /usr/bin/python3 tools/torchref/gpt_ref.py --out testdata/gpt_ref     # write
    /usr/bin/python3 tools/torchref/gpt_ref.py --check testdata/gpt_ref   # re-verify
    /usr/bin/python3 tools/torchref/gpt_ref.py --selftest                 # model checks
    /usr/bin/python3 tools/torchref/gpt_ref.py --config llama --out testdata/gpt_ref_llama

--config NAME (default gpt2) picks one of CONFIGS for --out and --check:
gpt2 -> testdata/gpt_ref, llama -> testdata/gpt_ref_llama, variant_a/b/c ->
testdata/gpt_ref_variant_a/b/c, moe_a/moe_b -> testdata/gpt_ref_moe_a/b (the
llama model with mixture-of-experts layers; these also write moe.json).

The model, data and optimizer follow docs/SEMANTICS.md § GPT model
conventions, and the other configs' model options Megatron-Core's
TransformerConfig (model.py); see README.md next to this file for the
conventions and the fixture files.
"""

import argparse
import json
import math
import os
import sys

sys.dont_write_bytecode = True  # keep the source tree free of __pycache__
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

import mock_data  # noqa: E402
import model  # noqa: E402
import moe_ref  # noqa: E402
import st_io  # noqa: E402

# FIXTURE is the configuration of testdata/gpt_ref, with Megatron's flag names.
FIXTURE = {
    "num_layers": 2,
    "hidden_size": 64,
    "num_attention_heads": 4,
    "ffn_hidden_size": 256,
    "seq_length": 32,
    "max_position_embeddings": 32,
    "vocab_size": 128,
    "micro_batch_size": 2,
    "global_batch_size": 4,
    "seed": 1234,
    "lr": 1e-3,
    "adam_beta1": 0.9,
    "adam_beta2": 0.999,
    "adam_eps": 1e-8,
    "weight_decay": 0.1,
    "train_iters": 10,
    "clip_grad": 1.0,
    "init_method_std": model.INIT_METHOD_STD,
    "layernorm_epsilon": model.LAYERNORM_EPS,
    "init_seed": 1234,
}

# The model options of the other fixtures, Megatron's argparse dest names, in
# the order config.json lists them after FIXTURE's keys. FIXTURE itself has
# none of them: model.OPTION_DEFAULTS gives its (GPT-2) values.
OPTION_KEYS = (
    "normalization",
    "apply_layernorm_1p",
    "qk_layernorm",
    "swiglu",
    "squared_relu",
    "bias_gelu_fusion",
    "position_embedding_type",
    "rotary_base",
    "rotary_percent",
    "rotary_interleaved",
    "group_query_attention",
    "num_query_groups",
    "kv_channels",
    "untie_embeddings_and_output_weights",
    "add_bias_linear",
    "add_qkv_bias",
    "apply_residual_connection_post_layernorm",
)


def variant(ffn_hidden_size, **opts):
    """FIXTURE with another ffn_hidden_size and every one of OPTION_KEYS given."""
    if set(opts) != set(OPTION_KEYS):
        raise ValueError(f"variant options: missing {set(OPTION_KEYS) - set(opts)}, unknown {set(opts) - set(OPTION_KEYS)}")
    cfg = dict(FIXTURE, ffn_hidden_size=ffn_hidden_size)
    cfg.update((k, opts[k]) for k in OPTION_KEYS)
    model.options(cfg)  # validate
    return cfg


# The MoE options of the MoE fixtures, Megatron's argparse dest names, in the
# order config.json lists them after OPTION_KEYS. The other fixtures have none
# of them: model.MOE_DEFAULTS (num_experts None) makes them dense.
MOE_KEYS = (
    "num_experts",
    "moe_layer_freq",
    "moe_ffn_hidden_size",
    "moe_router_topk",
    "moe_router_score_function",
    "moe_router_pre_softmax",
    "moe_router_num_groups",
    "moe_router_group_topk",
    "moe_router_topk_scaling_factor",
    "moe_router_load_balancing_type",
    "moe_aux_loss_coeff",
    "moe_z_loss_coeff",
    "moe_router_enable_expert_bias",
    "moe_router_bias_update_rate",
    "moe_expert_capacity_factor",
    "moe_token_drop_policy",
    "moe_pad_expert_input_to_capacity",
    "moe_shared_expert_intermediate_size",
    "moe_shared_expert_gate",
)


def keyed_variant(base, what, keys, validate, opts):
    """base followed by every one of keys, given in opts; validate checks it."""
    if set(opts) != set(keys):
        raise ValueError(f"{what} options: missing {set(keys) - set(opts)}, unknown {set(opts) - set(keys)}")
    cfg = dict(base)
    cfg.update((k, opts[k]) for k in keys)
    validate(cfg)
    return cfg


def moe_variant(base, **opts):
    """base (a config with OPTION_KEYS) followed by every one of MOE_KEYS."""
    return keyed_variant(base, "MoE", MOE_KEYS, model.moe_options, opts)


# The MTP options of the MTP fixtures, in the order config.json lists them
# last. The other fixtures have none: model.MTP_DEFAULTS (mtp_num_layers None).
MTP_KEYS = ("mtp_num_layers", "mtp_loss_scaling_factor")


def mtp_variant(base, **opts):
    """base followed by every one of MTP_KEYS."""
    return keyed_variant(base, "MTP", MTP_KEYS, model.mtp_options, opts)


# The MLA options of the MLA fixtures, in the order config.json lists them
# last. The other fixtures have none: model.MLA_DEFAULTS.
MLA_KEYS = ("multi_latent_attention", "q_lora_rank", "kv_lora_rank", "qk_head_dim", "qk_pos_emb_head_dim",
            "v_head_dim", "rope_type", "rotary_scaling_factor", "original_max_position_embeddings",
            "beta_fast", "beta_slow", "mscale", "mscale_all_dim")


def mla_variant(base, **opts):
    """base followed by every one of MLA_KEYS."""
    return keyed_variant(base, "MLA", MLA_KEYS, model.mla_options, opts)


# CONFIGS are the fixtures' settings by --config name.
CONFIGS = {
    "gpt2": FIXTURE,
    # Llama: RMSNorm, SwiGLU, RoPE, GQA (4 heads in 2 groups), no biases, untied.
    "llama": variant(
        128,
        normalization="RMSNorm",
        apply_layernorm_1p=False,
        qk_layernorm=False,
        swiglu=True,
        squared_relu=False,
        bias_gelu_fusion=False,  # Megatron turns it off without biases
        position_embedding_type="rope",
        rotary_base=10000,
        rotary_percent=1.0,
        rotary_interleaved=False,
        group_query_attention=True,
        num_query_groups=2,
        kv_channels=16,
        untie_embeddings_and_output_weights=True,
        add_bias_linear=False,
        add_qkv_bias=False,
        apply_residual_connection_post_layernorm=False,
    ),
    # Zero-centred LayerNorm, q/k LayerNorm, interleaved RoPE on half of each
    # head, multi-query attention with kv_channels 24 (n*d = 96 != h), a bias
    # on linear_qkv only, exact (erf) GELU, tied.
    "variant_a": variant(
        256,
        normalization="LayerNorm",
        apply_layernorm_1p=True,
        qk_layernorm=True,
        swiglu=False,
        squared_relu=False,
        bias_gelu_fusion=False,  # Megatron turns it off without add_bias_linear
        position_embedding_type="rope",
        rotary_base=500,
        rotary_percent=0.5,
        rotary_interleaved=True,
        group_query_attention=True,
        num_query_groups=1,
        kv_channels=24,
        untie_embeddings_and_output_weights=False,
        add_bias_linear=False,
        add_qkv_bias=True,
        apply_residual_connection_post_layernorm=False,
    ),
    # Zero-centred RMSNorm with q/k RMSNorm, no position embedding, squared
    # ReLU, post-LayerNorm residuals, all biases, GQA with 2 groups, tied.
    "variant_b": variant(
        256,
        normalization="RMSNorm",
        apply_layernorm_1p=True,
        qk_layernorm=True,
        swiglu=False,
        squared_relu=True,
        bias_gelu_fusion=True,  # irrelevant with squared_relu
        position_embedding_type="none",
        rotary_base=10000,
        rotary_percent=1.0,
        rotary_interleaved=False,
        group_query_attention=True,
        num_query_groups=2,
        kv_channels=16,
        untie_embeddings_and_output_weights=False,
        add_bias_linear=True,
        add_qkv_bias=True,  # Megatron sets it with add_bias_linear
        apply_residual_connection_post_layernorm=True,
    ),
    # GPT-2 but exact (erf) GELU with biases (bias_gelu_fusion off) and an
    # untied output layer.
    "variant_c": variant(
        256,
        normalization="LayerNorm",
        apply_layernorm_1p=False,
        qk_layernorm=False,
        swiglu=False,
        squared_relu=False,
        bias_gelu_fusion=False,
        position_embedding_type="learned_absolute",
        rotary_base=10000,
        rotary_percent=1.0,
        rotary_interleaved=False,
        group_query_attention=False,
        num_query_groups=4,
        kv_channels=16,
        untie_embeddings_and_output_weights=True,
        add_bias_linear=True,
        add_qkv_bias=True,  # Megatron sets it with add_bias_linear
        apply_residual_connection_post_layernorm=False,
    ),
}

# The MoE fixtures: the llama model (RMSNorm, SwiGLU, RoPE, GQA, no biases,
# untied) with Megatron-Core MoE layers.
# moe_a: every layer MoE, 4 experts of width 48, top-2 softmax, the
# load-balancing loss (coefficient 0.01) and the z loss (0.001), no capacity.
CONFIGS["moe_a"] = moe_variant(
    CONFIGS["llama"],
    num_experts=4,
    moe_layer_freq=1,
    moe_ffn_hidden_size=48,
    moe_router_topk=2,
    moe_router_score_function="softmax",
    moe_router_pre_softmax=False,
    moe_router_num_groups=None,
    moe_router_group_topk=None,
    moe_router_topk_scaling_factor=None,
    moe_router_load_balancing_type="aux_loss",
    moe_aux_loss_coeff=0.01,
    moe_z_loss_coeff=0.001,
    moe_router_enable_expert_bias=False,
    moe_router_bias_update_rate=1e-3,  # Megatron's default, unused
    moe_expert_capacity_factor=None,
    moe_token_drop_policy="probs",
    moe_pad_expert_input_to_capacity=False,
    moe_shared_expert_intermediate_size=None,
    moe_shared_expert_gate=False,
)
# moe_b: layer 0 MoE, layer 1 dense (ffn_hidden_size 128); 8 experts of width
# 32, top-2 sigmoid with the expert bias (rate 0.01), group-limited routing (4
# groups, 2 kept), scaling 2.0, the sequence load-balancing loss (0.01), no z
# loss, capacity factor 1.0 dropping by probability, a shared expert of 64.
# init_seed 1247: with 1234 one capacity selection along the run is decided by
# a probability gap only ~3x the float32 noise; with 1247 every selection
# boundary of the run has a gap of at least MIN_NOISE_RATIO times it (--check).
CONFIGS["moe_b"] = moe_variant(
    dict(CONFIGS["llama"], init_seed=1247),
    num_experts=8,
    moe_layer_freq=2,
    moe_ffn_hidden_size=32,
    moe_router_topk=2,
    moe_router_score_function="sigmoid",
    moe_router_pre_softmax=False,
    moe_router_num_groups=4,
    moe_router_group_topk=2,
    moe_router_topk_scaling_factor=2.0,
    moe_router_load_balancing_type="seq_aux_loss",
    moe_aux_loss_coeff=0.01,
    moe_z_loss_coeff=None,
    moe_router_enable_expert_bias=True,
    moe_router_bias_update_rate=0.01,
    moe_expert_capacity_factor=1.0,
    moe_token_drop_policy="probs",
    moe_pad_expert_input_to_capacity=False,
    moe_shared_expert_intermediate_size=64,
    moe_shared_expert_gate=False,
)

# moe_c: biased experts on the GPT-2 options (variant_c with the tanh GELU
# fused with linear_fc1's bias and tied embeddings): moe_a's MoE settings (every
# layer MoE, 4 experts of width 48, top-2 softmax, the load-balancing loss
# 0.01 and the z loss 0.001) with a shared expert of 32; add_bias_linear gives the router a bias
# (drawn N(0, 0.02)), every expert and the shared expert biases (zero).
CONFIGS["moe_c"] = moe_variant(
    dict(CONFIGS["variant_c"], bias_gelu_fusion=True, untie_embeddings_and_output_weights=False),
    **dict({k: CONFIGS["moe_a"][k] for k in MOE_KEYS}, moe_shared_expert_intermediate_size=32),
)

# mtp_a: the llama model (RoPE, RMSNorm, SwiGLU, GQA, untied) with one MTP
# depth weighted 0.1 (Megatron's default factor).
CONFIGS["mtp_a"] = mtp_variant(CONFIGS["llama"], mtp_num_layers=1, mtp_loss_scaling_factor=0.1)
# mtp_b: variant_b (zero-centred RMSNorm with q/k norms, no position
# embedding, squared ReLU, post-LayerNorm residuals, all biases, tied) with
# two MTP depths weighted 0.3 in all (0.15 each).
CONFIGS["mtp_b"] = mtp_variant(CONFIGS["variant_b"], mtp_num_layers=2, mtp_loss_scaling_factor=0.3)

# mla_a: the llama model without grouped queries (MLA refuses them), with
# qk_layernorm (MLA's kv_layernorm) and multi-latent attention without a
# query low-rank projection: kv_lora_rank 24, heads of 16 + 8 rotary channels
# for queries and keys, values of 12, plain RoPE.
CONFIGS["mla_a"] = mla_variant(
    dict(CONFIGS["llama"], group_query_attention=False, num_query_groups=4, qk_layernorm=True),
    multi_latent_attention=True, q_lora_rank=None, kv_lora_rank=24, qk_head_dim=16, qk_pos_emb_head_dim=8,
    v_head_dim=12, rope_type="rope", rotary_scaling_factor=1.0, original_max_position_embeddings=4096,
    beta_fast=32.0, beta_slow=1.0, mscale=1.0, mscale_all_dim=0.0)
# mla_b: as mla_a with a query low-rank projection (q_lora_rank 20, with
# q_layernorm), kv_lora_rank 16, heads of 12 + 8, values of 16, and
# DeepSeek-V3's YaRN (scaling factor 40, mscale 1, mscale_all_dim 1) over an
# original context of 16 positions, so that the 32-token sequences reach
# the frequencies YaRN blends and the softmax takes its m² scale.
CONFIGS["mla_b"] = mla_variant(
    dict(CONFIGS["llama"], group_query_attention=False, num_query_groups=4, qk_layernorm=True),
    multi_latent_attention=True, q_lora_rank=20, kv_lora_rank=16, qk_head_dim=12, qk_pos_emb_head_dim=8,
    v_head_dim=16, rope_type="yarn", rotary_scaling_factor=40.0, original_max_position_embeddings=16,
    beta_fast=32.0, beta_slow=1.0, mscale=1.0, mscale_all_dim=1.0)

METADATA = {"format": "pt", "producer": "gotron tools/torchref/gpt_ref.py"}


def setup_torch():
    """Deterministic single-threaded float32 CPU."""
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    torch.set_default_dtype(torch.float32)


def accumulate_grads(params, cfg, step, moe=None, mtp_log=None):
    """Forward and backward of every microbatch of the step's global batch.

    Gradients accumulate (fp32) in p.grad. Microbatch m's loss is Megatron's
    (sum of token losses / tokens in the microbatch) / num_microbatches, so the
    accumulated gradient is that of the mean over all tokens of the global
    batch. Returns the step's loss: the mean over microbatches of the
    per-microbatch mean token loss (computed as Python floats).

    With MoE layers, moe is the model.MoEState (a fresh one when None) and
    microbatch m's objective is (mean token loss + the coefficient-weighted
    load-balancing and z losses of its MoE layers) / num_microbatches: Megatron
    feeds each auxiliary loss the backward scale loss_scale / num_microbatches
    (MoEAuxLossAutoScaler, loss_scale 1 in float32). The returned loss is the
    language-model loss only (Megatron's "lm loss").

    With MTP depths (model.mtp_token_losses) microbatch m's objective is
    (mean token loss + (f/D)·Σ_k mean_k) / num_microbatches, mean_k being depth
    k's mean loss over its unmasked tokens (its labels rolled k + 1 places, the
    last k + 1 of each row masked): Megatron's process_mtp_loss with
    MTPLossAutoScaler's scale 1 / num_microbatches. mtp_log, a list, receives
    the step's [Σ_m mean_k / num_microbatches for each k] (Megatron's logged
    "mtp_k loss"). A parameter that received
    no gradient (an expert no token was routed to) gets a zero gradient, as in
    Megatron's gradient buffers, so that weight decay and Adam still update it.
    """
    mbs, gbs, seq = cfg["micro_batch_size"], cfg["global_batch_size"], cfg["seq_length"]
    if gbs % mbs:
        raise ValueError(f"global_batch_size {gbs} is not a multiple of micro_batch_size {mbs}")
    num_micro = gbs // mbs
    if moe is None and model.moe_options(cfg)["moe_layers"]:
        moe = model.MoEState(cfg)
    tokens = mock_data.global_batch(cfg, step)
    t = model.mtp_options(cfg)
    loss = 0.0
    mtp = [0.0] * t["mtp_num_layers"]
    for m in range(num_micro):
        rows = tokens[m * mbs : (m + 1) * mbs]
        ids, labels = rows[:, :seq], rows[:, 1 : seq + 1]
        if t["mtp_num_layers"]:
            per_token, depths = model.mtp_token_losses(params, cfg, ids, labels)
        else:
            per_token, depths = model.token_losses(params, cfg, ids, labels, moe=moe), []
        mean = per_token.sum() / per_token.numel()
        objective = mean
        if depths:
            means = [(dl * mask).sum() / mask.sum() for dl, mask in depths]
            objective = mean + t["mtp_loss_scaling_factor"] / t["mtp_num_layers"] * sum(means)
            mtp = [x + y.item() / num_micro for x, y in zip(mtp, means)]
        aux = None if moe is None else moe.take_aux_objective()
        if aux is None:
            (objective / num_micro).backward()
        else:
            ((objective + aux) / num_micro).backward()
        loss += mean.item()
    if mtp_log is not None and mtp:
        mtp_log.append(mtp)
    for p in params.values():
        if p.grad is None:  # an expert no token reached: Megatron's gradient buffer holds zeros
            p.grad = torch.zeros_like(p)
    return loss / num_micro


def grad_norm(params):
    """Global L2 norm of all gradients, as torch.nn.utils.clip_grad_norm_ computes it."""
    norms = [torch.norm(p.grad.detach(), 2.0) for p in params]
    return torch.norm(torch.stack(norms), 2.0)


def make_optimizer(named, cfg):
    """torch.optim.AdamW if weight_decay > 0, else Adam.

    As Megatron does, weight decay applies only to parameters with two or more
    dimensions: biases and LayerNorm parameters form a group with no decay.
    """
    decay = [p for n, p in named if p.dim() > 1 and not n.endswith(".bias")]
    no_decay = [p for n, p in named if not (p.dim() > 1 and not n.endswith(".bias"))]
    params = [{"params": decay}, {"params": no_decay, "weight_decay": 0.0}]
    kw = dict(
        lr=cfg["lr"],
        betas=(cfg["adam_beta1"], cfg["adam_beta2"]),
        eps=cfg["adam_eps"],
        foreach=False,
    )
    if cfg["weight_decay"] > 0:
        return torch.optim.AdamW(params, weight_decay=cfg["weight_decay"], **kw)
    return torch.optim.Adam(params, weight_decay=0.0, **kw)


def train(cfg, init, moe_log=None, mtp_log=None):
    """Run train_iters steps from init.

    Returns (losses, grad_norms, first_grads, final_params): each loss is
    computed before its step's update; each norm is the global L2 norm of the
    step's gradient before clipping; first_grads are step 0's unclipped
    gradients.

    With MoE layers, one model.MoEState lives through the run: after the
    backward of all of a step's microbatches and before clipping and the
    optimizer step, the expert bias is updated from the step's token counts
    (Megatron's finalize_model_grads). moe_log, a list, receives per step
    {"microbatches": [the MoE layer records of each microbatch], "expert_bias":
    {layer: the bias after the step's update}}. mtp_log, a list, receives each
    step's MTP depth losses (accumulate_grads).
    """
    params = {n: t.clone().requires_grad_(True) for n, t in init.items()}
    plist = [params[n] for n, _ in model.param_shapes(cfg)]
    opt = make_optimizer([(n, params[n]) for n, _ in model.param_shapes(cfg)], cfg)
    moe = model.MoEState(cfg) if model.moe_options(cfg)["moe_layers"] else None
    losses, norms, first = [], [], None
    for step in range(cfg["train_iters"]):
        opt.zero_grad(set_to_none=True)
        losses.append(accumulate_grads(params, cfg, step, moe, mtp_log))
        if moe is not None:
            records = moe.take_records()
            moe.update_expert_bias()
            if moe_log is not None:
                num_micro = cfg["global_batch_size"] // cfg["micro_batch_size"]
                per = len(records) // num_micro
                moe_log.append({
                    "microbatches": [records[i * per : (i + 1) * per] for i in range(num_micro)],
                    "expert_bias": {i: b.clone() for i, b in moe.expert_bias.items()},
                })
        if step == 0:
            first = {n: p.grad.detach().clone() for n, p in params.items()}
        if cfg["clip_grad"] > 0:
            norm = torch.nn.utils.clip_grad_norm_(plist, cfg["clip_grad"], norm_type=2.0)
        else:
            norm = grad_norm(plist)
        norms.append(norm.item())
        opt.step()
    final = {n: p.detach().clone() for n, p in params.items()}
    return losses, norms, first, final


LOSS_NAMES = ("load_balancing_loss", "seq_load_balancing_loss", "z_loss")


def tracked_losses(cfg):
    """[(record name, coefficient)] of the losses Megatron's MoE tracker records for cfg."""
    m = model.moe_options(cfg)
    out = [("load_balancing_loss" if t == "aux_loss" else "seq_load_balancing_loss", c) for t, c in m["aux_losses"]]
    if m["moe_z_loss_coeff"] is not None:
        out.append(("z_loss", m["moe_z_loss_coeff"]))
    return out


def _f32(t):
    """A float32 tensor as (nested) Python floats."""
    return t.detach().to(torch.float32).to(torch.float64).tolist()


def moe_record(cfg, moe_log):
    """moe.json: what Megatron logs and keeps of the MoE layers at each step (README.md)."""
    m = model.moe_options(cfg)
    layers = m["moe_layers"]
    num_micro = cfg["global_batch_size"] // cfg["micro_batch_size"]
    out = {
        "comment": (
            "Megatron-Core MoE reference (tools/torchref/gpt_ref.py, README.md there). Per step s "
            "(before its optimizer update) and MoE layer l (index into moe_layers): NAME[s][l] = Megatron's "
            "tracker value for decoder layer moe_layers[l] = float32((sum over microbatches of loss_mb / coeff) "
            "* (1 / num_microbatches)), the uncoefficiented loss averaged over the step's microbatches; "
            "NAME_mean[s] = Megatron's logged scalar (sum over layers / number of MoE layers); "
            "NAME_per_microbatch[s][mb][l] = loss_mb / coeff. tokens_per_expert[s][mb][l][e] = tokens "
            "expert e processes (column sums of the routing map after token dropping), "
            "tokens_per_expert_before_dropping the same before the capacity limit. expert_bias[s][l] = the "
            "router's expert bias after step s's update (step s routes with expert_bias[s-1], zeros for s = 0)."
        ),
        "producer": METADATA["producer"],
        "moe_layers": layers,
        "num_microbatches": num_micro,
        "tokens_per_microbatch": cfg["seq_length"] * cfg["micro_batch_size"],
        "expert_capacity": moe_log[0]["microbatches"][0][0]["capacity"],
    }
    for name, coeff in tracked_losses(cfg):
        per_layer, mean, per_mb = [], [], []
        for step in moe_log:
            # MoEMetricsTracker: values [num_layers] float32, += loss / coeff per forward,
            # then * (1 / num_microbatches) and sum / num_moe_layers at report time
            values = torch.zeros(cfg["num_layers"], dtype=torch.float32)
            rows = []
            for recs in step["microbatches"]:
                row = []
                for r in recs:
                    v = r[name] / coeff
                    values[r["layer"]] += v.to(torch.float32)
                    row.append(v.to(torch.float32).item())
                rows.append(row)
            values = values.float() * (1 / num_micro)
            per_layer.append([values[i].item() for i in layers])
            mean.append((values.sum() / len(layers)).item())
            per_mb.append(rows)
        out[name] = per_layer
        out[name + "_mean"] = mean
        out[name + "_per_microbatch"] = per_mb
    out["tokens_per_expert"] = [
        [[[int(v) for v in r["routing_map"].sum(0).tolist()] for r in recs] for recs in step["microbatches"]]
        for step in moe_log
    ]
    out["tokens_per_expert_before_dropping"] = [
        [[[int(v) for v in r["routed_map"].sum(0).tolist()] for r in recs] for recs in step["microbatches"]]
        for step in moe_log
    ]
    if m["moe_router_enable_expert_bias"]:
        out["expert_bias"] = [[_f32(step["expert_bias"][i]) for i in layers] for step in moe_log]
    return out


def mock_data_record(cfg, steps):
    """The first steps' global batches, for the data loader's tests."""
    return {
        "comment": "tokens[step][g] = tok[0..seq] of global row g; input_ids = tok[:seq], labels = tok[1:]",
        "seed": cfg["seed"],
        "rows_total": cfg["global_batch_size"],
        "seq_length": cfg["seq_length"],
        "vocab_size": cfg["vocab_size"],
        "splitmix64": {f"0x{x:X}": f"0x{mock_data.splitmix64(x):X}" for x in (0, 1, 2468, 2**64 - 1)},
        "tokens": [mock_data.global_batch(cfg, s).tolist() for s in range(steps)],
    }


def json_text(obj):
    """obj as indented JSON, with every list of numbers on one line."""

    def fmt(x, ind):
        pad = " " * ind
        if isinstance(x, dict):
            items = [f'{pad} {json.dumps(k)}: {fmt(v, ind + 1)}' for k, v in x.items()]
            return "{\n" + ",\n".join(items) + "\n" + pad + "}"
        if isinstance(x, list) and x and isinstance(x[0], list):
            items = [pad + " " + fmt(v, ind + 1) for v in x]
            return "[\n" + ",\n".join(items) + "\n" + pad + "]"
        return json.dumps(x)

    return fmt(obj, 0) + "\n"


def write_json(path, obj):
    """Write obj as json_text."""
    with open(path, "w") as f:
        f.write(json_text(obj))


def write_fixture(out, name="gpt2"):
    """Write CONFIGS[name]'s config.json, init/grads.safetensors, losses.json, mock_data.json into out."""
    setup_torch()
    cfg = dict(CONFIGS[name])
    os.makedirs(out, exist_ok=True)
    init = model.init_params(cfg, cfg["init_seed"])
    moe_log, mtp_log = [], []
    losses, norms, first, _ = train(cfg, init, moe_log, mtp_log)
    write_json(os.path.join(out, "config.json"), cfg)
    if moe_log:
        write_json(os.path.join(out, "moe.json"), moe_record(cfg, moe_log))
    st_io.save(os.path.join(out, "init.safetensors"), init, METADATA)
    st_io.save(os.path.join(out, "grads.safetensors"), first, METADATA)
    rec = {"losses": losses, "grad_norms": norms}
    if mtp_log:
        rec["mtp_losses"] = mtp_log
    write_json(os.path.join(out, "losses.json"), rec)
    write_json(os.path.join(out, "mock_data.json"), mock_data_record(cfg, 2))
    for name in sorted(os.listdir(out)):
        print(f"{os.path.getsize(os.path.join(out, name)):8d}  {os.path.join(out, name)}")
    print("losses:", losses)
    print("grad_norms:", norms)


class Checker:
    """Collects named pass/fail results."""

    def __init__(self):
        self.failed = 0

    def check(self, ok, what):
        print(("ok    " if ok else "FAIL  ") + what)
        if not ok:
            self.failed += 1


def max_abs_diff(a, b):
    return max((a[n] - b[n]).abs().max().item() for n in a)


def sensitivity(c, cfg, init, losses, moe_log=None):
    """Report how far each optimizer (and MoE) setting moves the losses, against the fp32 noise floor.

    The noise floor is the gap between this float32 run and the same run in
    float64; a Go comparison tolerance must sit between the two. Returns the
    float64 run's moe_log (None without MoE layers).
    """
    log64 = [] if moe_log is not None else None
    l64, _, _, _ = train(cfg, {n: t.double() for n, t in init.items()}, log64)
    floor = max(abs(a - b) for a, b in zip(losses, l64))
    print(f"info  float32 vs float64 losses differ by at most {floor:.3g}")
    changes = [("lr=0", {"lr": 0.0}), ("weight_decay=0", {"weight_decay": 0.0}), ("clip_grad=0", {"clip_grad": 0.0})]
    m = model.moe_options(cfg)
    if m["aux_losses"]:
        changes.append(("moe_aux_loss_coeff=0", {"moe_aux_loss_coeff": 0.0}))
    if m["moe_z_loss_coeff"] is not None:
        changes.append(("moe_z_loss_coeff=None", {"moe_z_loss_coeff": None}))
    if m["moe_router_enable_expert_bias"]:
        changes.append(("moe_router_bias_update_rate=0", {"moe_router_bias_update_rate": 0.0}))
    for label, change in changes:
        other, _, _, _ = train(dict(cfg, **change), init)
        effect = max(abs(a - b) for a, b in zip(losses, other))
        c.check(effect > 10 * floor, f"{label} moves the losses by up to {effect:.3g} (> 10x the fp32 floor)")
    return log64


# The smallest allowed ratio of a selection boundary's score gap to the
# float32-vs-float64 difference of those scores in the same forward (MoE).
MIN_NOISE_RATIO = 20.0


def _boundary_gaps(scores, k, relative=False):
    """Per row, the gap between the k-th and (k+1)-th largest finite entries (inf if none)."""
    if k >= scores.shape[-1]:
        return torch.full(scores.shape[:-1], math.inf, dtype=torch.float64)
    srt = scores.double().sort(dim=-1, descending=True).values
    a, b = srt[..., k - 1], srt[..., k]
    gap = (a - b) / a if relative else a - b
    return torch.where(torch.isinf(b), torch.full_like(a, math.inf), gap)


def selection_margins(r, r64, m):
    """{boundary: (smallest gap, smallest gap / fp32 noise)} of one MoE layer forward.

    r and r64 are the float32 and float64 runs' records of the same forward.
    The boundaries: the group choice (group-limited routing), the expert
    choice (on the selection scores: logits, pre-softmax probabilities, or
    sigmoid + expert bias), the aux loss's top-k (relative), the capacity
    choice of the probs drop policy (among the routed tokens of each expert).
    The noise is the largest |float32 - float64| of those scores in the forward.
    """
    k, fn, pre = m["moe_router_topk"], m["moe_router_score_function"], m["moe_router_pre_softmax"]

    def sel(rec):
        lg = rec["logits"]
        if fn == "softmax":
            return torch.softmax(lg, -1) if pre else lg
        return torch.sigmoid(lg) + (0.0 if rec["expert_bias"] is None else rec["expert_bias"].to(lg.dtype))

    out = {}

    def add(what, gaps, noise):
        g = gaps.min().item()
        out[what] = (g, g / noise if noise > 0 else math.inf)

    s32, s64 = sel(r), sel(r64)
    noise = (s32.double() - s64).abs().max().item()
    if m["moe_router_group_topk"]:
        ng, gk = m["moe_router_num_groups"], m["moe_router_group_topk"]
        size = m["num_experts"] // ng

        def group_scores(x):
            return x.reshape(-1, ng, size).sort(-1, descending=True).values[..., : k // gk].sum(-1)

        g32, g64 = group_scores(s32), group_scores(s64)
        add("group choice", _boundary_gaps(g32, gk), (g32.double() - g64).abs().max().item())
        kept = moe_ref.topk_mask(g32, gk).repeat_interleave(size, dim=1)
        s32 = s32.masked_fill(~kept, -math.inf)
    if pre:
        add("expert choice", _boundary_gaps(s32, k, True), noise / s32.abs().max().item())
    else:
        add("expert choice", _boundary_gaps(s32, k), noise)
    a32, _ = moe_ref.aux_scores(r["logits"], k, fn)
    a64, _ = moe_ref.aux_scores(r64["logits"], k, fn)
    add("aux top-k", _boundary_gaps(a32, k, True), (a32.double() - a64).abs().max().item() / a32.min().item())
    c = r["capacity"]
    if c is not None and m["moe_token_drop_policy"] == "probs" and c < r["logits"].shape[0]:
        args = (k, fn, pre, m["moe_router_num_groups"], m["moe_router_group_topk"], m["moe_router_topk_scaling_factor"])
        p32, _ = moe_ref.routing(r["logits"], *args, r["expert_bias"])
        p64, _ = moe_ref.routing(r64["logits"], *args, r64["expert_bias"])
        srt = p32.t().double().sort(-1, descending=True).values
        a, b = srt[:, c - 1], srt[:, c]
        gaps = torch.where(b > 0, a - b, torch.full_like(a, math.inf))
        add("capacity choice", gaps, (p32.double() - p64).abs().max().item())
    return out


def check_moe(c, cfg, d, moe_log, log64):
    """The MoE fixture's moe.json and the robustness of its routing."""
    m = model.moe_options(cfg)
    path = os.path.join(d, "moe.json")
    with open(path) as f:
        text = f.read()
    got = json.loads(text)
    want = moe_record(cfg, moe_log)
    c.check(got == json.loads(json.dumps(want)), "moe.json: every value equals a fresh 10-step run's")
    c.check(text == json_text(want), "moe.json: byte-identical to a fresh write")

    # routing robustness along the whole run: float64 routes every token alike and no
    # selection boundary is within MIN_NOISE_RATIO x the float32 noise
    worst, same = {}, True
    for st, st64 in zip(moe_log, log64):
        for recs, recs64 in zip(st["microbatches"], st64["microbatches"]):
            for r, r64 in zip(recs, recs64):
                same &= torch.equal(r["routing_map"], r64["routing_map"]) and torch.equal(r["routed_map"], r64["routed_map"])
                for what, (g, ratio) in selection_margins(r, r64, m).items():
                    w = worst.setdefault(what, [math.inf, math.inf])
                    w[0], w[1] = min(w[0], g), min(w[1], ratio)
    c.check(same, "the float64 run routes (and drops) every token of every step alike")
    low = min(w[1] for w in worst.values())
    c.check(low >= MIN_NOISE_RATIO, "every selection boundary of the run has a gap >= "
            f"{MIN_NOISE_RATIO:g}x the fp32 noise of its scores (smallest ratio {low:.3g})")
    for what, (g, ratio) in worst.items():
        print(f"info  {what}: smallest gap {g:.3g}, {ratio:.3g}x the float32-vs-float64 difference")

    # the recorded values against the float64 run
    rec64 = moe_record(cfg, log64)
    for name, _ in tracked_losses(cfg):
        rel = max(abs(a - b) / abs(b) for x, y in zip(want[name], rec64[name]) for a, b in zip(x, y))
        print(f"info  {name}: float32 vs float64 relative difference at most {rel:.3g}")
        avg = [[sum(mb[l] for mb in st) / len(st) for l in range(len(m["moe_layers"]))]
               for st in want[name + "_per_microbatch"]]
        dev = max(abs(a - b) for x, y in zip(avg, want[name]) for a, b in zip(x, y))
        c.check(dev < 1e-6, f"{name}: the tracker values are the microbatch means of loss/coeff (|diff| {dev:.2g})")
        means = [sum(x) / len(x) for x in want[name]]
        dev = max(abs(a - b) for a, b in zip(means, want[name + "_mean"]))
        c.check(dev < 1e-6, f"{name}_mean: the mean over the MoE layers (|diff| {dev:.2g})")
    if m["moe_router_enable_expert_bias"]:
        same_bias = want["expert_bias"] == rec64["expert_bias"]
        c.check(same_bias, "the float64 run's expert-bias trajectory is identical")

    # token counts and the expert bias from the counts alone
    t, k, e_num = want["tokens_per_microbatch"], m["moe_router_topk"], m["num_experts"]
    cap = want["expert_capacity"]
    before = want["tokens_per_expert_before_dropping"]
    after = want["tokens_per_expert"]
    c.check(all(sum(v) == t * k for st in before for mb in st for v in mb),
            f"before dropping every microbatch routes {t} tokens x top-{k} in every MoE layer")
    dropped = sum(b - a for sb, sa in zip(before, after) for mb, ma in zip(sb, sa)
                  for vb, va in zip(mb, ma) for b, a in zip(vb, va))
    if cap is None:
        c.check(after == before, "without capacity nothing is dropped")
    else:
        ok = all(a <= min(b, cap) for sb, sa in zip(before, after) for mb, ma in zip(sb, sa)
                 for vb, va in zip(mb, ma) for b, a in zip(vb, va))
        over = all((a == cap) == (b >= cap) for sb, sa in zip(before, after) for mb, ma in zip(sb, sa)
                   for vb, va in zip(mb, ma) for b, a in zip(vb, va))
        c.check(ok and over and dropped > 0, f"capacity {cap}: every expert keeps min(routed, {cap}) tokens; "
                f"{dropped} of {cfg['train_iters'] * want['num_microbatches'] * len(m['moe_layers']) * t * k} routings dropped")
    if m["moe_router_enable_expert_bias"]:
        rate = torch.tensor(m["moe_router_bias_update_rate"], dtype=torch.float32)
        bias = [torch.zeros(e_num, dtype=torch.float32) for _ in m["moe_layers"]]
        ok = True
        for step, st in enumerate(after):
            for l in range(len(bias)):
                tokens = torch.tensor([sum(mb[l][e] for mb in st) for e in range(e_num)], dtype=torch.float32)
                bias[l] = bias[l] + torch.sign(tokens.mean() - tokens) * rate
                ok &= _f32(bias[l]) == want["expert_bias"][step][l]
        c.check(ok, "expert_bias[s] = expert_bias[s-1] + sign(mean - tokens) * rate in float32, "
                "tokens = the step's tokens_per_expert summed over microbatches (after dropping)")
        # the bias matters: routing the recorded logits without it changes some tokens' experts
        changed = 0
        args = (k, m["moe_router_score_function"], m["moe_router_pre_softmax"], m["moe_router_num_groups"],
                m["moe_router_group_topk"], m["moe_router_topk_scaling_factor"])
        for st in moe_log:
            for recs in st["microbatches"]:
                for r in recs:
                    _, m0 = moe_ref.routing(r["logits"], *args, torch.zeros(e_num))
                    changed += int((m0 != r["routed_map"]).any(-1).sum())
        c.check(changed > 0, f"the expert bias changes the experts of {changed} token routings over the run")
    if m["moe_router_group_topk"]:
        changed = 0
        for st in moe_log:
            for recs in st["microbatches"]:
                for r in recs:
                    _, m0 = moe_ref.routing(r["logits"], k, m["moe_router_score_function"], m["moe_router_pre_softmax"],
                                            None, None, m["moe_router_topk_scaling_factor"], r["expert_bias"])
                    changed += int((m0 != r["routed_map"]).any(-1).sum())
        if m["moe_router_topk"] == m["moe_router_group_topk"]:
            c.check(changed == 0, "the group limit changes no token's experts (top-k = group top-k: the k best "
                    "experts always lie in the k best groups by maximum)")
        else:
            c.check(changed > 0, f"the group limit changes the experts of {changed} token routings over the run")


def check_fixture(d, name="gpt2"):
    """Reload the fixture in d, made with CONFIGS[name], and verify it against a recomputation.

    Returns the number of failures.
    """
    setup_torch()
    c = Checker()
    with open(os.path.join(d, "config.json")) as f:
        cfg = json.load(f)
    want = CONFIGS[name]
    c.check(cfg == want and list(cfg) == list(want), f"config.json equals the script's {name!r} settings (CONFIGS[{name!r}]), keys in order")
    init, meta = st_io.load(os.path.join(d, "init.safetensors"))
    grads, _ = st_io.load(os.path.join(d, "grads.safetensors"))
    shapes = {n: s for n, s in model.param_shapes(cfg)}
    for label, ts in (("init", init), ("grads", grads)):
        c.check(
            set(ts) == set(shapes) and all(list(ts[n].shape) == shapes[n] for n in ts),
            f"{label}.safetensors has exactly the Megatron names and shapes ({len(shapes)} tensors)",
        )
    c.check(meta.get("producer", "").endswith("gpt_ref.py"), "init.safetensors carries __metadata__")

    fresh = model.init_params(cfg, cfg["init_seed"])
    c.check(max_abs_diff(fresh, init) == 0.0, "init.safetensors equals a fresh draw with torch.manual_seed(init_seed)")
    for n, t in init.items():
        s = model.init_std(n, cfg, cfg["init_method_std"])
        if s and t.numel() < 100:
            # too few draws for a sample std (the router's bias [E]): each
            # must be a plausible N(0, s) draw
            got = t.abs().max().item()
            if not 0 < got < 5 * s:
                c.check(False, f"{n}: largest |value| {got:.5f}, want within 5x the std {s:.5f}")
        elif s:
            got = t.std().item()
            if abs(got - s) > 0.1 * s:
                c.check(False, f"{n}: std {got:.5f}, want about {s:.5f}")

    params = {n: t.clone().requires_grad_(True) for n, t in init.items()}
    loss0 = accumulate_grads(params, cfg, 0)
    regrads = {n: p.grad for n, p in params.items()}
    diff = max_abs_diff(regrads, grads)
    c.check(diff == 0.0, f"grads recomputed from init match grads.safetensors (max |diff| {diff:.3g})")
    p64 = {n: t.double().requires_grad_(True) for n, t in init.items()}
    accumulate_grads(p64, cfg, 0)
    floor = max((p64[n].grad - grads[n].double()).abs().max().item() for n in grads)
    scale = max(g.abs().max().item() for g in grads.values())
    print(f"info  float32 vs float64 step-0 grads differ by at most {floor:.3g} (largest |grad| {scale:.3g})")

    with open(os.path.join(d, "losses.json")) as f:
        rec = json.load(f)
    c.check(len(rec["losses"]) == cfg["train_iters"] == len(rec["grad_norms"]), "losses.json has train_iters entries")
    c.check(loss0 == rec["losses"][0], f"step-0 loss recomputed: {loss0!r}")
    n0 = grad_norm([params[n] for n, _ in model.param_shapes(cfg)]).item()
    stored_norm = math.sqrt(sum(float((g.double() ** 2).sum()) for g in grads.values()))
    c.check(abs(n0 - rec["grad_norms"][0]) <= 1e-6 * n0, f"step-0 grad norm {rec['grad_norms'][0]!r} recomputed")
    c.check(abs(stored_norm - rec["grad_norms"][0]) <= 1e-5 * stored_norm, f"fp64 norm of grads.safetensors {stored_norm:.7g} matches")
    v = cfg["vocab_size"]
    c.check(abs(loss0 - math.log(v)) < 0.1, f"step-0 loss {loss0:.5f} is near ln(vocab) = {math.log(v):.5f}")

    moe_log = [] if model.moe_options(cfg)["moe_layers"] else None
    mtp_log = []
    losses, norms, first, _ = train(cfg, init, moe_log, mtp_log)
    c.check(losses == rec["losses"], "a fresh 10-step run reproduces losses.json bit for bit")
    if model.mtp_options(cfg)["mtp_num_layers"]:
        c.check(mtp_log == rec.get("mtp_losses"), "a fresh 10-step run reproduces mtp_losses bit for bit")
        c.check(all(abs(x - math.log(v)) < 0.1 for x in rec["mtp_losses"][0]), "step-0 MTP losses are near ln(vocab)")
        t = model.mtp_options(cfg)
        l0, _, _, _ = train(dict(cfg, mtp_loss_scaling_factor=0.0, train_iters=3), init)
        c.check(l0 != losses[:3], f"the MTP objective moves the lm loss (factor {t['mtp_loss_scaling_factor']} vs 0: step-2 loss {losses[2]:.7f} vs {l0[2]:.7f})")
    else:
        c.check("mtp_losses" not in rec, "no mtp_losses without MTP")
    c.check(norms == rec["grad_norms"], "a fresh 10-step run reproduces grad_norms bit for bit")
    log64 = sensitivity(c, cfg, init, losses, moe_log)
    if moe_log is not None:
        check_moe(c, cfg, d, moe_log, log64)

    with open(os.path.join(d, "mock_data.json")) as f:
        md = json.load(f)
    c.check(md == json.loads(json.dumps(mock_data_record(cfg, len(md["tokens"])))), "mock_data.json recomputed")
    print(f"{c.failed} failure(s)")
    return c.failed


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", help="write the fixture files into this directory")
    ap.add_argument("--check", help="re-load the fixture in this directory and verify it")
    ap.add_argument("--selftest", action="store_true", help="verify the model (gradcheck, attention, ops)")
    ap.add_argument("--config", default="gpt2", choices=sorted(CONFIGS),
                    help="the fixture's settings for --out and --check (default gpt2, testdata/gpt_ref)")
    args = ap.parse_args(argv)
    if not (args.out or args.check or args.selftest):
        ap.error("give --out DIR, --check DIR or --selftest")
    failed = 0
    if args.selftest:
        import selftest

        setup_torch()
        failed += selftest.run()
    if args.out:
        write_fixture(args.out, args.config)
    if args.check:
        failed += check_fixture(args.check, args.config)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
