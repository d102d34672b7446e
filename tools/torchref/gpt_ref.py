#!/usr/bin/python3
"""Independent PyTorch reference for gotron's GPT; writes and checks the fixtures.

    /usr/bin/python3 tools/torchref/gpt_ref.py --out testdata/gpt_ref     # write
    /usr/bin/python3 tools/torchref/gpt_ref.py --check testdata/gpt_ref   # re-verify
    /usr/bin/python3 tools/torchref/gpt_ref.py --selftest                 # model checks
    /usr/bin/python3 tools/torchref/gpt_ref.py --config llama --out testdata/gpt_ref_llama

--config NAME (default gpt2) picks one of CONFIGS for --out and --check:
gpt2 -> testdata/gpt_ref, llama -> testdata/gpt_ref_llama, variant_a/b/c ->
testdata/gpt_ref_variant_a/b/c.

The model, data and optimizer follow shared/spec/gpt-reference.md, and the
other configs' model options Megatron-Core's TransformerConfig (model.py); see
README.md next to this file for the conventions and the fixture files.
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

METADATA = {"format": "pt", "producer": "gotron tools/torchref/gpt_ref.py"}


def setup_torch():
    """Deterministic single-threaded float32 CPU."""
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    torch.set_default_dtype(torch.float32)


def accumulate_grads(params, cfg, step):
    """Forward and backward of every microbatch of the step's global batch.

    Gradients accumulate (fp32) in p.grad. Microbatch m's loss is Megatron's
    (sum of token losses / tokens in the microbatch) / num_microbatches, so the
    accumulated gradient is that of the mean over all tokens of the global
    batch. Returns the step's loss: the mean over microbatches of the
    per-microbatch mean token loss (computed as Python floats).
    """
    mbs, gbs, seq = cfg["micro_batch_size"], cfg["global_batch_size"], cfg["seq_length"]
    if gbs % mbs:
        raise ValueError(f"global_batch_size {gbs} is not a multiple of micro_batch_size {mbs}")
    num_micro = gbs // mbs
    tokens = mock_data.global_batch(cfg, step)
    loss = 0.0
    for m in range(num_micro):
        rows = tokens[m * mbs : (m + 1) * mbs]
        ids, labels = rows[:, :seq], rows[:, 1 : seq + 1]
        per_token = model.token_losses(params, cfg, ids, labels)
        mean = per_token.sum() / per_token.numel()
        (mean / num_micro).backward()
        loss += mean.item()
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


def train(cfg, init):
    """Run train_iters steps from init.

    Returns (losses, grad_norms, first_grads, final_params): each loss is
    computed before its step's update; each norm is the global L2 norm of the
    step's gradient before clipping; first_grads are step 0's unclipped
    gradients.
    """
    params = {n: t.clone().requires_grad_(True) for n, t in init.items()}
    plist = [params[n] for n, _ in model.param_shapes(cfg)]
    opt = make_optimizer([(n, params[n]) for n, _ in model.param_shapes(cfg)], cfg)
    losses, norms, first = [], [], None
    for step in range(cfg["train_iters"]):
        opt.zero_grad(set_to_none=True)
        losses.append(accumulate_grads(params, cfg, step))
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


def write_json(path, obj):
    """Write obj as indented JSON, with every list of numbers on one line."""

    def fmt(x, ind):
        pad = " " * ind
        if isinstance(x, dict):
            items = [f'{pad} {json.dumps(k)}: {fmt(v, ind + 1)}' for k, v in x.items()]
            return "{\n" + ",\n".join(items) + "\n" + pad + "}"
        if isinstance(x, list) and x and isinstance(x[0], list):
            items = [pad + " " + fmt(v, ind + 1) for v in x]
            return "[\n" + ",\n".join(items) + "\n" + pad + "]"
        return json.dumps(x)

    with open(path, "w") as f:
        f.write(fmt(obj, 0) + "\n")


def write_fixture(out, name="gpt2"):
    """Write CONFIGS[name]'s config.json, init/grads.safetensors, losses.json, mock_data.json into out."""
    setup_torch()
    cfg = dict(CONFIGS[name])
    os.makedirs(out, exist_ok=True)
    init = model.init_params(cfg, cfg["init_seed"])
    losses, norms, first, _ = train(cfg, init)
    write_json(os.path.join(out, "config.json"), cfg)
    st_io.save(os.path.join(out, "init.safetensors"), init, METADATA)
    st_io.save(os.path.join(out, "grads.safetensors"), first, METADATA)
    write_json(os.path.join(out, "losses.json"), {"losses": losses, "grad_norms": norms})
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


def sensitivity(c, cfg, init, losses):
    """Report how far each optimizer setting moves the losses, against the fp32 noise floor.

    The noise floor is the gap between this float32 run and the same run in
    float64; a Go comparison tolerance must sit between the two.
    """
    l64, _, _, _ = train(cfg, {n: t.double() for n, t in init.items()})
    floor = max(abs(a - b) for a, b in zip(losses, l64))
    print(f"info  float32 vs float64 losses differ by at most {floor:.3g}")
    for label, change in (("lr=0", {"lr": 0.0}), ("weight_decay=0", {"weight_decay": 0.0}), ("clip_grad=0", {"clip_grad": 0.0})):
        other, _, _, _ = train(dict(cfg, **change), init)
        effect = max(abs(a - b) for a, b in zip(losses, other))
        c.check(effect > 10 * floor, f"{label} moves the losses by up to {effect:.3g} (> 10x the fp32 floor)")


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
        if s:
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

    losses, norms, first, _ = train(cfg, init)
    c.check(losses == rec["losses"], "a fresh 10-step run reproduces losses.json bit for bit")
    c.check(norms == rec["grad_norms"], "a fresh 10-step run reproduces grad_norms bit for bit")
    sensitivity(c, cfg, init, losses)

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
