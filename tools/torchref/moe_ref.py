#!/usr/bin/python3
"""Independent PyTorch reference for Megatron-Core's MoE routing functions.

    /usr/bin/python3 tools/torchref/moe_ref.py --out testdata/moe_ref     # write routing.json
    /usr/bin/python3 tools/torchref/moe_ref.py --check testdata/moe_ref   # recompute and compare
    /usr/bin/python3 tools/torchref/moe_ref.py --selftest                 # independent checks

The functions below follow the semantics of Megatron-Core's
transformer/moe/moe_utils.py and router.py (TopKRouter.routing), written afresh
in plain PyTorch, float32, CPU:

    routing                   top-k routing with a score function (softmax, with
                              or without pre-softmax, or sigmoid with an optional
                              expert bias), group-limited selection, scaling
    capacity, token_dropping  expert capacity and the "probs" / "position" drop
                              policies, with or without padding to capacity
    aux_scores                the scores and top-k map the load-balancing losses use
    load_balancing_loss       the switch-transformer auxiliary loss ("aux_loss")
    seq_load_balancing_loss   its per-sequence form ("seq_aux_loss")
    z_loss                    mean squared logsumexp of the router logits
    updated_expert_bias       the aux-loss-free expert-bias update

Selections are written as rank masks: an entry is kept when fewer than k entries
of its row beat it, an entry beating another when it is larger, or equal and
earlier (lower index). So ties go to the lower expert index in a top-k over
experts and to the earlier token in a top-c over tokens; Megatron's torch.topk
leaves tie order unspecified. The fixture has no near ties where it matters
(--check verifies the margins). See README.md next to this file.
"""

import argparse
import json
import math
import os
import sys
from fractions import Fraction

sys.dont_write_bytecode = True  # keep the source tree free of __pycache__

import torch  # noqa: E402

# The fixture's shapes: logits [s, b, E] flattened to [s*b, E] as Megatron's
# logits.view(-1, E) does, token t = i*b + j for sequence position i, sample j.
SEQ_LENGTH = 4
MICRO_BATCH_SIZE = 3
NUM_TOKENS = SEQ_LENGTH * MICRO_BATCH_SIZE
NUM_EXPERTS = 8
AUX_LOSS_COEFF = 0.01
Z_LOSS_COEFF = 0.001
BIAS_STD = 0.2  # the random expert bias: randn(E) * BIAS_STD, drawn after the logits
GRAD_WEIGHT_SEED = 4242  # w [T, E] of the gradient's sum(routing_probs * w) term
MIN_GAP = 1e-4  # smallest allowed score gap at any selection boundary of the fixture
FILE = "routing.json"
PRODUCER = "gotron tools/torchref/moe_ref.py"

# The routing cases: name, logits seed, logits scale, Megatron config fields.
# Seeds were picked so that every selection boundary has a gap >= MIN_GAP.
ROUTING_CASES = [
    # name, seed, scale, topk, score function, pre_softmax, num_groups, group_topk, scaling, bias
    ("softmax_top1", 1000, 1.0, 1, "softmax", False, None, None, None, False),
    ("softmax_top2", 1201, 1.0, 2, "softmax", False, None, None, None, False),
    ("softmax_top3", 1002, 1.0, 3, "softmax", False, None, None, None, False),
    ("softmax_pre_top1", 1003, 1.0, 1, "softmax", True, None, None, None, False),
    ("softmax_pre_top2", 1004, 1.0, 2, "softmax", True, None, None, None, False),
    ("softmax_top2_scaled", 1005, 1.0, 2, "softmax", False, None, None, 2.5, False),
    ("softmax_top2_x10", 1006, 10.0, 2, "softmax", False, None, None, None, False),
    ("sigmoid_top1", 1007, 1.0, 1, "sigmoid", False, None, None, None, False),
    ("sigmoid_top2", 1008, 1.0, 2, "sigmoid", False, None, None, None, False),
    ("sigmoid_top1_bias", 1009, 1.0, 1, "sigmoid", False, None, None, None, True),
    ("sigmoid_top2_bias", 1010, 1.0, 2, "sigmoid", False, None, None, None, True),
    ("softmax_group_top2", 1011, 1.0, 2, "softmax", False, 4, 2, None, False),
    ("softmax_group_top4", 1012, 1.0, 4, "softmax", False, 4, 2, None, False),
    ("softmax_pre_group_top2", 1013, 1.0, 2, "softmax", True, 4, 2, None, False),
    ("softmax_pre_group_top4", 1014, 1.0, 4, "softmax", True, 4, 2, None, False),
    ("sigmoid_bias_group_top2", 1015, 1.0, 2, "sigmoid", False, 4, 2, None, True),
    ("sigmoid_bias_group_top4", 1016, 1.0, 4, "sigmoid", False, 4, 2, None, True),
    ("sigmoid_bias_group_top4_scaled", 1017, 1.0, 4, "sigmoid", False, 4, 2, 2.5, True),
    # with topk 2 and group_topk 2 the group limit cannot change the selection
    # (the two best experts lie in the two best groups by maximum): these two
    # keep one group, which does
    ("softmax_pre_group1_top2", 1018, 1.0, 2, "softmax", True, 4, 1, None, False),
    ("sigmoid_bias_group1_top2", 1019, 1.0, 2, "sigmoid", False, 4, 1, None, True),
]
# Token dropping runs on the routing of this case (same logits).
DROP_BASE = "softmax_top2"
DROP_FACTORS = (0.5, 1.0, 1.5, 5.0)  # capacities 2, 3, 5 and 15 (> T: nothing dropped)
DROP_POLICIES = ("probs", "position")
# Cases whose fixture entry carries logits_grad.
GRAD_CASES = ("softmax_top2", "softmax_pre_top2", "sigmoid_top2")
# get_capacity test vectors: (num_tokens, num_experts, capacity_factor).
CAPACITY_VECTORS = [
    (24, 8, 0.5), (24, 8, 1.0), (24, 8, 1.5), (24, 8, 5.0), (12, 8, 1.0), (8, 8, 1.0),
    # float64 (num_tokens / num_experts) * factor lands just above an integer:
    # the capacity is one more than the exact rational ceiling
    (50, 11, 1.1), (100, 3, 0.9), (70, 13, 1.3),
    # ... and num_tokens * factor / num_experts would give another value
    (50, 5, 1.1), (90, 11, 1.1),
]
CONFIG_FIELDS = (
    "moe_router_topk",
    "moe_router_score_function",
    "moe_router_pre_softmax",
    "moe_router_num_groups",
    "moe_router_group_topk",
    "moe_router_topk_scaling_factor",
    "moe_router_enable_expert_bias",
    "moe_expert_capacity_factor",
    "moe_token_drop_policy",
    "moe_pad_expert_input_to_capacity",
)

NEG_INF = float("-inf")


def setup_torch():
    """Deterministic single-threaded float32 CPU."""
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    torch.set_default_dtype(torch.float32)


# ---------------------------------------------------------------------------
# The reference functions


def topk_mask(scores, k):
    """Bool mask of the k best entries of each row of scores [..., n].

    Entry a beats entry b of the same row when a > b, or a == b and a comes
    first. An entry is kept when fewer than k entries beat it.
    """
    n = scores.shape[-1]
    mine = scores.unsqueeze(-1)  # [..., n, 1]: the entry being ranked
    other = scores.unsqueeze(-2)  # [..., 1, n]: every entry of its row
    pos = torch.arange(n)
    earlier = pos.unsqueeze(0) < pos.unsqueeze(1)  # [me, other]: other comes first
    beaten_by = (other > mine) | ((other == mine) & earlier)
    return beaten_by.sum(-1) < k


def group_limited_mask(scores, topk, num_groups, group_topk):
    """Top-k restricted to the best group_topk of num_groups consecutive expert groups.

    A group's score is the sum of its topk // group_topk largest scores (added
    largest first). Experts outside the kept groups score -inf.
    """
    tokens, experts = scores.shape
    if experts % num_groups or group_topk > num_groups:
        raise ValueError(f"{experts} experts in {num_groups} groups, {group_topk} kept")
    size = experts // num_groups
    if group_topk * size < topk:
        raise ValueError(f"top-{topk} among {group_topk} groups of {size} experts")
    per_group = topk // group_topk
    best = scores.reshape(tokens, num_groups, size).sort(dim=-1, descending=True).values
    group_scores = best[..., :per_group].sum(-1)
    kept_groups = topk_mask(group_scores, group_topk)
    kept = kept_groups.repeat_interleave(size, dim=1)
    return topk_mask(scores.masked_fill(~kept, NEG_INF), topk)


def routing(logits, topk, score_function="softmax", pre_softmax=False, num_groups=None,
            group_topk=None, scaling_factor=None, expert_bias=None):
    """(routing_probs [T, E], routing_map [T, E] bool) of Megatron's top-k routing.

    softmax: top-k of the logits, softmax over the k chosen; with pre_softmax,
    softmax over all E then top-k of the probabilities (not renormalised).
    sigmoid: sigmoid of the logits, top-k chosen on sigmoid + expert_bias, the
    probabilities sigmoid at the chosen experts, divided by their sum + 1e-20
    when topk > 1. Group-limited selection runs on the same selection scores.
    Finally times scaling_factor when it is given (and non-zero).
    """

    def select(s):
        s = s.detach()
        if group_topk:
            return group_limited_mask(s, topk, num_groups, group_topk)
        return topk_mask(s, topk)

    zero = torch.zeros_like(logits)
    if score_function == "softmax":
        if expert_bias is not None:
            raise ValueError("the expert bias applies to the sigmoid score function only")
        if pre_softmax:
            scores = torch.softmax(logits, dim=-1)
            chosen = select(scores)
            probs = torch.where(chosen, scores, zero)
        else:
            chosen = select(logits)
            # softmax over the chosen logits: the others are -inf and get 0
            probs = torch.softmax(logits.masked_fill(~chosen, NEG_INF), dim=-1)
    elif score_function == "sigmoid":
        scores = torch.sigmoid(logits)
        chosen = select(scores if expert_bias is None else scores + expert_bias)
        probs = torch.where(chosen, scores, zero)
        if topk > 1:
            probs = probs / (probs.sum(dim=-1, keepdim=True) + 1e-20)
    else:
        raise ValueError(f"score function {score_function!r}")
    if scaling_factor:
        probs = probs * scaling_factor
    return probs, chosen


def capacity(num_tokens, num_experts, capacity_factor):
    """ceil((num_tokens / num_experts) * capacity_factor) in float64, in that order."""
    return math.ceil((num_tokens / num_experts) * capacity_factor)


def token_dropping(probs, routing_map, topk, capacity_factor, drop_policy="probs",
                   pad_to_capacity=False):
    """(probs, map, expert capacity) after Megatron's capacity limit.

    c = capacity(T * topk, E, factor). When c > T nothing is dropped (the
    capacity mask is all ones). Otherwise the capacity mask keeps c tokens per
    expert: "probs" the c largest routing probabilities (ties: earlier token),
    "position" the routed tokens whose running count down the token axis is at
    most c, then (padding only) the earliest unrouted tokens up to c in all.
    With padding the map is the capacity mask itself, else map AND mask; the
    probabilities are multiplied by the final map.
    """
    tokens, experts = probs.shape
    c = capacity(tokens * topk, experts, capacity_factor)
    if c > tokens:
        cap = torch.ones_like(routing_map)
    elif drop_policy == "probs":
        cap = topk_mask(probs.detach().t(), c).t()
    elif drop_policy == "position":
        routed = routing_map.long()
        cap = routing_map & (torch.cumsum(routed, dim=0) <= c)
        if pad_to_capacity:
            room = (c - routed.sum(dim=0)).clamp(min=0)
            unrouted = ~routing_map
            cap = cap | (unrouted & (torch.cumsum(unrouted.long(), dim=0) <= room))
    else:
        raise ValueError(f"drop policy {drop_policy!r}")
    final_map = cap if pad_to_capacity else routing_map & cap
    return probs * final_map, final_map, c


def aux_scores(logits, topk, score_function):
    """(scores [T, E], aux routing map [T, E]) of compute_routing_scores_for_aux_loss.

    softmax of the logits, or the sigmoid divided by its row sum + 1e-20; the
    map is the top-k of these scores. No expert bias, group limit, pre-softmax
    or dropping enters.
    """
    if score_function == "softmax":
        scores = torch.softmax(logits, dim=-1)
    elif score_function == "sigmoid":
        s = torch.sigmoid(logits)
        scores = s / (s.sum(dim=-1, keepdim=True) + 1e-20)
    else:
        raise ValueError(f"score function {score_function!r}")
    return scores, topk_mask(scores.detach(), topk)


def load_balancing_loss(scores, aux_map, topk, num_experts, coeff):
    """sum_e (sum_t scores[t, e]) * tokens[e] * E * coeff / (topk * T^2).

    tokens[e] is the column sum of aux_map, T its number of rows.
    """
    rows = scores.shape[0]
    tokens = aux_map.sum(dim=0).to(scores.dtype)
    return (scores.sum(dim=0) * tokens).sum() * (num_experts * coeff / (topk * rows * rows))


def seq_load_balancing_loss(scores, aux_map, seq_length, micro_batch_size, topk, num_experts, coeff):
    """The loss above on scores and map viewed as [s, b*E], divided by b.

    Each column is one (sample, expert) pair, so this is the mean over the b
    sequences of each sequence's own load-balancing loss (T = s).
    """
    cols = scores.shape[0] * scores.shape[1] // seq_length
    loss = load_balancing_loss(
        scores.reshape(seq_length, cols), aux_map.reshape(seq_length, cols), topk, num_experts, coeff
    )
    return loss / micro_batch_size


def z_loss(logits, coeff):
    """mean over tokens of logsumexp(logits)^2, times coeff."""
    return torch.square(torch.logsumexp(logits, dim=-1)).mean() * coeff


def updated_expert_bias(tokens_per_expert_per_rank, expert_bias, rate):
    """expert_bias + sign(mean(tokens) - tokens) * rate, tokens summed over ranks."""
    tokens = torch.stack([torch.as_tensor(t, dtype=torch.float32) for t in tokens_per_expert_per_rank]).sum(0)
    mean = tokens.sum(dim=-1, keepdim=True) / tokens.shape[-1]
    return expert_bias + torch.sign(mean - tokens) * rate


# ---------------------------------------------------------------------------
# The fixture


def case_params(spec):
    """The Megatron config fields of a ROUTING_CASES entry."""
    _, _, _, topk, fn, pre, groups, gtopk, scaling, bias = spec
    return {
        "moe_router_topk": topk,
        "moe_router_score_function": fn,
        "moe_router_pre_softmax": pre,
        "moe_router_num_groups": groups,
        "moe_router_group_topk": gtopk,
        "moe_router_topk_scaling_factor": scaling,
        "moe_router_enable_expert_bias": bias,
        "moe_expert_capacity_factor": None,
        "moe_token_drop_policy": "probs",
        "moe_pad_expert_input_to_capacity": False,
    }


def case_inputs(seed, scale, with_bias, dtype=torch.float32):
    """The case's logits [T, E] (and expert bias [E] or None), drawn in float32."""
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(NUM_TOKENS, NUM_EXPERTS, generator=g, dtype=torch.float32) * scale
    bias = torch.randn(NUM_EXPERTS, generator=g, dtype=torch.float32) * BIAS_STD if with_bias else None
    return logits.to(dtype), None if bias is None else bias.to(dtype)


def grad_weight(dtype=torch.float32):
    g = torch.Generator().manual_seed(GRAD_WEIGHT_SEED)
    return torch.randn(NUM_TOKENS, NUM_EXPERTS, generator=g, dtype=torch.float32).to(dtype)


def evaluate(params, logits, bias, w=None, want_grad=False):
    """Every output of one case, as tensors (see README.md for the definitions)."""
    p = params
    x = logits.detach().clone().requires_grad_(True) if want_grad else logits
    probs, rmap = routing(
        x, p["moe_router_topk"], p["moe_router_score_function"], p["moe_router_pre_softmax"],
        p["moe_router_num_groups"], p["moe_router_group_topk"], p["moe_router_topk_scaling_factor"],
        bias,
    )
    cap = None
    if p["moe_expert_capacity_factor"] is not None:
        probs, rmap, cap = token_dropping(
            probs, rmap, p["moe_router_topk"], p["moe_expert_capacity_factor"],
            p["moe_token_drop_policy"], p["moe_pad_expert_input_to_capacity"],
        )
    scores, amap = aux_scores(x, p["moe_router_topk"], p["moe_router_score_function"])
    lb = load_balancing_loss(scores, amap, p["moe_router_topk"], NUM_EXPERTS, AUX_LOSS_COEFF)
    seq = seq_load_balancing_loss(scores, amap, SEQ_LENGTH, MICRO_BATCH_SIZE, p["moe_router_topk"],
                                  NUM_EXPERTS, AUX_LOSS_COEFF)
    z = z_loss(x, Z_LOSS_COEFF)
    out = {
        "expert_capacity": cap,
        "routing_probs": probs,
        "routing_map": rmap,
        "aux_scores": scores,
        "aux_routing_map": amap,
        "load_balancing_loss": lb,
        "seq_load_balancing_loss": seq,
        "z_loss": z,
        "logits_grad": None,
    }
    if want_grad:
        total = lb + z + (probs * w).sum()
        (grad,) = torch.autograd.grad(total, x)
        out["logits_grad"] = grad
    return out


def _plain(v):
    """Tensors to (nested) Python floats / bools; a 0-d tensor to a float."""
    if isinstance(v, torch.Tensor):
        v = v.detach()
        if v.dtype == torch.bool:
            return v.tolist()
        return v.to(torch.float64).tolist() if v.dim() else float(v.to(torch.float64))
    return v


def all_cases():
    """[(name, seed, scale, params, logits, bias, drop base name or None)] in fixture order:
    the routing cases, then the token-dropping cases on DROP_BASE's logits."""
    out = []
    for spec in ROUTING_CASES:
        name, seed, scale = spec[:3]
        logits, bias = case_inputs(seed, scale, spec[9])
        out.append((name, seed, scale, case_params(spec), logits, bias, None))
    base = next(s for s in ROUTING_CASES if s[0] == DROP_BASE)
    logits, bias = case_inputs(base[1], base[2], base[9])
    for factor in DROP_FACTORS:
        for policy in DROP_POLICIES:
            for pad in (False, True):
                params = dict(case_params(base), moe_expert_capacity_factor=factor,
                              moe_token_drop_policy=policy, moe_pad_expert_input_to_capacity=pad)
                name = f"{DROP_BASE}_drop_{policy}_f{factor}" + ("_pad" if pad else "")
                out.append((name, base[1], base[2], params, logits, bias, DROP_BASE))
    return out


ROUTING_OUTPUTS = ("routing_probs", "routing_map", "aux_scores", "aux_routing_map",
                   "load_balancing_loss", "seq_load_balancing_loss", "z_loss", "logits_grad")
DROPPING_OUTPUTS = ("expert_capacity", "routing_probs", "routing_map")


def build_fixture():
    """The fixture as a JSON-ready dict."""
    w = grad_weight()
    cases, dropping = [], []
    for name, seed, scale, params, logits, bias, base in all_cases():
        res = evaluate(params, logits, bias, w, name in GRAD_CASES)
        if base is None:
            case = {"name": name, "seed": seed, "logits_scale": scale}
            case.update(params)
            case["logits"] = _plain(logits)
            case["expert_bias"] = _plain(bias)
            case.update((k, _plain(res[k])) for k in ROUTING_OUTPUTS)
            cases.append(case)
        else:
            case = {"name": name, "drop_base": base}
            case.update(params)
            case.update((k, _plain(res[k])) for k in DROPPING_OUTPUTS)
            dropping.append(case)
    caps = [
        {"num_tokens": n, "num_experts": e, "moe_expert_capacity_factor": f, "capacity": capacity(n, e, f)}
        for n, e, f in CAPACITY_VECTORS
    ]
    return {
        "comment": (
            "Megatron-Core MoE routing reference (tools/torchref/moe_ref.py; README.md there). "
            "logits [num_tokens, num_moe_experts] are [seq_length, micro_batch_size, E] flattened, "
            "token t = i*micro_batch_size + j. Maps are bools. logits_grad = d(load_balancing_loss "
            "+ z_loss + sum(routing_probs * grad_weight))/d(logits). token_dropping entries apply "
            "the capacity limit to the routing of the case named by drop_base."
        ),
        "producer": PRODUCER,
        "seq_length": SEQ_LENGTH,
        "micro_batch_size": MICRO_BATCH_SIZE,
        "num_tokens": NUM_TOKENS,
        "num_moe_experts": NUM_EXPERTS,
        "moe_aux_loss_coeff": AUX_LOSS_COEFF,
        "moe_z_loss_coeff": Z_LOSS_COEFF,
        "grad_weight": _plain(w),
        "cases": cases,
        "token_dropping": dropping,
        "capacity": caps,
        "expert_bias_update": bias_update_vectors(),
    }


def bias_update_vectors():
    """get_updated_expert_bias test vectors."""
    vecs = []

    def add(name, per_rank, bias, rate):
        b = torch.tensor(bias, dtype=torch.float32)
        new = updated_expert_bias(per_rank, b, rate)
        vecs.append({
            "name": name,
            "tokens_per_expert_per_rank": per_rank,
            "expert_bias": _plain(b),
            "moe_router_bias_update_rate": rate,
            "updated_expert_bias": _plain(new),
        })

    add("spec", [[0, 2], [0, 0]], [0.0, 0.0], 0.25)
    # an expert exactly at the mean moves by sign(0) = 0
    add("at_mean", [[3, 1, 2, 2], [1, 1, 2, 4]], [0.5, -0.5, 0.25, 0.0], 0.125)
    # the routing maps of two fixture cases as two ranks' counts, with a case's bias
    spec_b = next(s for s in ROUTING_CASES if s[0] == "sigmoid_top2_bias")
    spec_n = next(s for s in ROUTING_CASES if s[0] == "sigmoid_top2")
    per_rank = []
    for spec in (spec_b, spec_n):
        logits, bias = case_inputs(spec[1], spec[2], spec[9])
        _, rmap = routing(logits, spec[3], spec[4], spec[5], spec[6], spec[7], spec[8], bias)
        per_rank.append(rmap.sum(0).tolist())
    _, bias = case_inputs(spec_b[1], spec_b[2], True)
    add("fixture_maps", per_rank, bias.tolist(), 1e-3)
    return vecs


def write_json(path, obj):
    """Indented JSON with every list of numbers or bools on one line; floats by repr."""

    def fmt(x, ind):
        pad = " " * ind
        if isinstance(x, dict):
            items = [f"{pad} {json.dumps(k)}: {fmt(v, ind + 1)}" for k, v in x.items()]
            return "{\n" + ",\n".join(items) + "\n" + pad + "}"
        if isinstance(x, list) and x and isinstance(x[0], (list, dict)):
            items = [pad + " " + fmt(v, ind + 1) for v in x]
            return "[\n" + ",\n".join(items) + "\n" + pad + "]"
        return json.dumps(x, allow_nan=False)

    text = fmt(obj, 0) + "\n"
    if path is not None:
        with open(path, "w") as f:
            f.write(text)
    return text


# ---------------------------------------------------------------------------
# Margins: no selection in the fixture may hinge on a near tie


def _row_gap(scores, k, relative=False):
    """Smallest gap between the k-th and (k+1)-th largest finite entries of the rows.

    relative: the gap divided by the k-th value (for probabilities, whose
    rounding error scales with their size; a x10 softmax spans many decades).
    """
    if k >= scores.shape[-1]:
        return math.inf
    s = scores.sort(dim=-1, descending=True).values
    a, b = s[..., k - 1], s[..., k]
    gap = (a - b) / a if relative else a - b
    gap = torch.where(torch.isinf(b), torch.full_like(a, math.inf), gap)
    return gap.min().item()


def selection_margins(params, logits, bias):
    """{what: smallest gap} at every selection boundary of the case."""
    p = params
    k, fn = p["moe_router_topk"], p["moe_router_score_function"]
    relative = fn == "softmax" and p["moe_router_pre_softmax"]
    if fn == "softmax":
        sel = torch.softmax(logits, -1) if relative else logits
    else:
        sel = torch.sigmoid(logits)
        if bias is not None:
            sel = sel + bias
    out = {}
    if p["moe_router_group_topk"]:
        ng, gk = p["moe_router_num_groups"], p["moe_router_group_topk"]
        size = NUM_EXPERTS // ng
        gs = sel.reshape(-1, ng, size).sort(-1, descending=True).values[..., : k // gk].sum(-1)
        out["group selection"] = _row_gap(gs, gk, relative)
        kept = topk_mask(gs, gk).repeat_interleave(size, dim=1)
        sel = sel.masked_fill(~kept, NEG_INF)
    out["expert selection"] = _row_gap(sel, k, relative)
    scores, _ = aux_scores(logits, k, fn)
    out["aux selection"] = _row_gap(scores, k, True)
    if p["moe_expert_capacity_factor"] is not None and p["moe_token_drop_policy"] == "probs":
        probs, _ = routing(logits, k, fn, p["moe_router_pre_softmax"], p["moe_router_num_groups"],
                              p["moe_router_group_topk"], p["moe_router_topk_scaling_factor"], bias)
        c = capacity(NUM_TOKENS * k, NUM_EXPERTS, p["moe_expert_capacity_factor"])
        if c < NUM_TOKENS:
            s = probs.t().sort(-1, descending=True).values
            a, b = s[:, c - 1], s[:, c]
            gap = torch.where(b > 0, (a - b) / a, torch.full_like(a, math.inf))  # zeros: token order
            out["capacity selection"] = gap.min().item()
    return out


# ---------------------------------------------------------------------------
# --check


def diff_fields(want, got, where=""):
    """Paths at which two JSON values differ."""
    if isinstance(want, dict) and isinstance(got, dict):
        out = []
        if list(want) != list(got):
            out.append(f"{where}: keys {list(got)} != {list(want)}")
        for k in want:
            if k in got:
                out += diff_fields(want[k], got[k], f"{where}.{k}")
        return out
    if isinstance(want, list) and isinstance(got, list) and len(want) == len(got):
        out = []
        for i, (a, b) in enumerate(zip(want, got)):
            out += diff_fields(a, b, f"{where}[{i}]")
        return out[:5]
    if type(want) is not type(got) or want != got:
        return [f"{where}: {got!r} != {want!r}"]
    return []


def check_fixture(d):
    """Recompute the fixture and compare it with d/routing.json; returns the failure count."""
    failed = 0

    def check(ok, what):
        nonlocal failed
        print(("ok    " if ok else "FAIL  ") + what)
        failed += 0 if ok else 1

    path = os.path.join(d, FILE)
    with open(path) as f:
        text = f.read()
    got = json.loads(text)
    want = build_fixture()
    diffs = diff_fields(want, got, "routing.json")
    for line in diffs[:20]:
        print("      " + line)
    check(not diffs, f"{path}: every value equals a fresh computation")
    check(text == write_json(None, want), f"{path}: byte-identical to a fresh write")
    size = len(text.encode())
    check(size < 200_000, f"{path}: {size} bytes (< 200 KB)")

    # no selection hinges on a near tie; the options the cases exercise do change something
    worst = math.inf
    w = grad_weight()
    fp64_gap = {"routing_probs": 0.0, "losses": 0.0, "logits_grad": 0.0}
    for name, _, _, params, logits, bias, _ in all_cases():
        m = selection_margins(params, logits, bias)
        low = min(m.values())
        worst = min(worst, low)
        if low < MIN_GAP:
            check(False, f"{name}: selection margin {m}")
        r32 = evaluate(params, logits, bias, w, name in GRAD_CASES)
        r64 = evaluate(params, logits.double(), None if bias is None else bias.double(), w.double(),
                       name in GRAD_CASES)
        if not torch.equal(r32["routing_map"], r64["routing_map"]) or not torch.equal(
                r32["aux_routing_map"], r64["aux_routing_map"]):
            check(False, f"{name}: float64 selects other experts")
        fp64_gap["routing_probs"] = max(fp64_gap["routing_probs"], (r32["routing_probs"].double() - r64["routing_probs"]).abs().max().item())
        for k in ("load_balancing_loss", "seq_load_balancing_loss", "z_loss"):
            rel = abs(r32[k].item() - r64[k].item()) / abs(r64[k].item())
            fp64_gap["losses"] = max(fp64_gap["losses"], rel)
        if r32["logits_grad"] is not None:
            fp64_gap["logits_grad"] = max(fp64_gap["logits_grad"], (r32["logits_grad"].double() - r64["logits_grad"]).abs().max().item())
    check(worst >= MIN_GAP, f"every selection boundary has a score gap >= {MIN_GAP} (smallest {worst:.3g}); float64 selects the same experts")
    print(f"info  float32 vs float64: routing_probs {fp64_gap['routing_probs']:.3g} (abs), "
          f"losses {fp64_gap['losses']:.3g} (relative), logits_grad {fp64_gap['logits_grad']:.3g} (abs)")

    byname = {c["name"]: c for c in want["cases"]}

    def tokens_changed(c, bias, num_groups, group_topk):
        """Tokens whose experts differ from the case's routing with these options."""
        logits = torch.tensor(c["logits"])
        _, m0 = routing(logits, c["moe_router_topk"], c["moe_router_score_function"],
                        c["moe_router_pre_softmax"], num_groups, group_topk, None, bias)
        return int((m0 != torch.tensor(c["routing_map"])).any(-1).sum())

    for c in want["cases"]:
        bias = None if c["expert_bias"] is None else torch.tensor(c["expert_bias"])
        if bias is not None:
            n = tokens_changed(c, None, c["moe_router_num_groups"], c["moe_router_group_topk"])
            check(n > 0, f"{c['name']}: the expert bias changes the experts of {n} of {NUM_TOKENS} tokens")
        if c["moe_router_group_topk"]:
            n = tokens_changed(c, bias, None, None)
            if c["moe_router_topk"] == c["moe_router_group_topk"] == 2:
                check(n == 0, f"{c['name']}: the group limit leaves every token's experts unchanged (topk = group_topk = 2)")
            else:
                check(n > 0, f"{c['name']}: the group limit changes the experts of {n} of {NUM_TOKENS} tokens")
    base = byname[DROP_BASE]
    routed = sum(map(sum, base["routing_map"]))
    for c in want["token_dropping"]:
        dropped = sum(a and not b for ra, rb in zip(base["routing_map"], c["routing_map"]) for a, b in zip(ra, rb))
        cols = [sum(r[e] for r in c["routing_map"]) for e in range(NUM_EXPERTS)]
        print(f"info  {c['name']}: capacity {c['expert_capacity']}, {dropped} of {routed} routings dropped, "
              f"tokens per expert {cols}")
        cap = min(c["expert_capacity"], NUM_TOKENS)
        if c["moe_pad_expert_input_to_capacity"]:
            check(cols == [cap] * NUM_EXPERTS, f"{c['name']}: every expert holds {cap} tokens")
        elif c["expert_capacity"] < max(sum(r[e] for r in base["routing_map"]) for e in range(NUM_EXPERTS)):
            check(dropped > 0 and max(cols) <= cap, f"{c['name']}: drops {dropped}, no expert above capacity {cap}")
    spec = next(v for v in want["expert_bias_update"] if v["name"] == "spec")
    check(spec["updated_expert_bias"] == [0.25, -0.25], f"expert bias test vector (docs/SEMANTICS.md, Mixture of experts): {spec['updated_expert_bias']}")
    print(f"{failed} failure(s)")
    return failed


# ---------------------------------------------------------------------------
# --selftest: the functions against independent formulations


def _softmax_list(xs):
    m = max(xs)
    e = [math.exp(x - m) for x in xs]
    s = sum(e)
    return [v / s for v in e]


def _sigmoid(x):
    return 1.0 / (1.0 + math.exp(-x)) if x >= 0 else math.exp(x) / (1.0 + math.exp(x))


def _best(values, idxs, k):
    """The k indices of idxs with the largest values, ties to the lower index (Python sort)."""
    return sorted(idxs, key=lambda i: (-values[i], i))[:k]


def brute_routing(logits, topk, fn, pre, groups, gtopk, scaling, bias):
    """Routing by per-token Python loops in float64: (probs, map, smallest selection gap)."""
    probs, rmap, gap = [], [], math.inf
    for row in logits:
        n = len(row)
        if fn == "softmax":
            scores = _softmax_list(row) if pre else list(row)
            sel = scores
        else:
            scores = [_sigmoid(x) for x in row]
            sel = [s + (bias[e] if bias is not None else 0.0) for e, s in enumerate(scores)]
        cand = list(range(n))
        if gtopk:
            size = n // groups
            gscore = [sum(sorted(sel[g * size:(g + 1) * size], reverse=True)[: topk // gtopk]) for g in range(groups)]
            order = sorted(range(groups), key=lambda g: (-gscore[g], g))
            if gtopk < groups:
                gap = min(gap, gscore[order[gtopk - 1]] - gscore[order[gtopk]])
            kept = order[:gtopk]
            cand = [e for e in range(n) if e // size in kept]
        order = sorted(cand, key=lambda e: (-sel[e], e))
        if topk < len(order):
            gap = min(gap, sel[order[topk - 1]] - sel[order[topk]])
        chosen = order[:topk]
        p = [0.0] * n
        if fn == "softmax" and not pre:
            vals = _softmax_list([row[e] for e in chosen])
            for e, v in zip(chosen, vals):
                p[e] = v
        elif fn == "softmax":
            for e in chosen:
                p[e] = scores[e]
        else:
            total = sum(scores[e] for e in chosen)
            for e in chosen:
                p[e] = scores[e] / (total + 1e-20) if topk > 1 else scores[e]
        if scaling:
            p = [v * scaling for v in p]
        probs.append(p)
        rmap.append([e in chosen for e in range(n)])
    return probs, rmap, gap


def index_form_routing(logits, topk, fn, pre, groups, gtopk, scaling, bias):
    """Routing the way moe_utils.py structures it: torch.topk indices, gather, scatter.

    Valid only without ties (torch.topk's tie order is unspecified).
    """
    t, n = logits.shape

    def top(scores):
        if not gtopk:
            return torch.topk(scores, topk, dim=1)
        gs = scores.view(t, groups, -1).topk(topk // gtopk, dim=-1).values.sum(-1)
        gidx = torch.topk(gs, gtopk, dim=-1, sorted=False).indices
        gmask = torch.zeros_like(gs).scatter(1, gidx, 1.0)
        emask = gmask.unsqueeze(-1).expand(t, groups, n // groups).reshape(t, n)
        return torch.topk(scores.masked_fill(emask == 0, NEG_INF), topk, dim=-1)

    if fn == "softmax":
        if pre:
            vals, idx = top(torch.softmax(logits, -1))
        else:
            v, idx = top(logits)
            vals = torch.softmax(v, -1)
    else:
        s = torch.sigmoid(logits)
        if bias is not None:
            idx = top(s + bias).indices
            v = torch.gather(s, 1, idx)
        else:
            v, idx = top(s)
        vals = v / (v.sum(-1, keepdim=True) + 1e-20) if topk > 1 else v
    if scaling:
        vals = vals * scaling
    probs = torch.zeros_like(logits).scatter(1, idx, vals)
    rmap = torch.zeros(t, n, dtype=torch.bool).scatter(1, idx, True)
    return probs, rmap


def brute_dropping(probs, rmap, topk, factor, policy, pad):
    """Token dropping by per-expert Python loops: (probs, map)."""
    t, n = len(probs), len(probs[0])
    c = math.ceil((t * topk / n) * factor)
    keep = [[False] * n for _ in range(t)]
    for e in range(n):
        if c > t:
            chosen = range(t)
        elif policy == "probs":
            chosen = sorted(range(t), key=lambda i: (-probs[i][e], i))[:c]
        else:
            routed = [i for i in range(t) if rmap[i][e]]
            chosen = routed[:c]
            if pad:
                chosen += [i for i in range(t) if not rmap[i][e]][: c - len(chosen)]
        for i in chosen:
            keep[i][e] = True
    fmap = [[keep[i][e] if pad else (keep[i][e] and rmap[i][e]) for e in range(n)] for i in range(t)]
    fprobs = [[probs[i][e] if fmap[i][e] else 0.0 for e in range(n)] for i in range(t)]
    return fprobs, fmap


def selftest():
    """Run every check; returns the failure count."""
    failed = 0

    def check(ok, what):
        nonlocal failed
        print(("ok    " if ok else "FAIL  ") + what)
        failed += 0 if ok else 1

    g = torch.Generator().manual_seed(7)

    # topk_mask against Python sorting, with many ties
    bad = 0
    for _ in range(200):
        x = torch.randint(-2, 3, (5, 9), generator=g).float()
        k = int(torch.randint(1, 9, (1,), generator=g))
        m = topk_mask(x, k).tolist()
        for r, row in enumerate(x.tolist()):
            chosen = _best(row, range(len(row)), k)
            bad += m[r] != [e in chosen for e in range(len(row))]
    check(bad == 0, "topk_mask = Python sort by (-value, index), 200 integer draws with ties")

    # routing against per-token loops (float64) and the index form (float32)
    configs = []
    for fn, pre, bias in (("softmax", False, False), ("softmax", True, False), ("sigmoid", False, False), ("sigmoid", False, True)):
        for k in (1, 2, 3, 4):
            for groups, gtopk in ((None, None), (4, 2), (4, 1), (2, 1), (4, 4)):
                if gtopk and k % gtopk:
                    continue
                if gtopk and gtopk * (NUM_EXPERTS // groups) < k:
                    continue
                for scaling in (None, 2.5):
                    configs.append((k, fn, pre, groups, gtopk, scaling, bias))
    worst_p, worst_i, near, bad_map, bad_idx = 0.0, 0.0, 0, 0, 0
    for k, fn, pre, groups, gtopk, scaling, with_bias in configs:
        for _ in range(6):
            x = torch.randn(NUM_TOKENS, NUM_EXPERTS, generator=g) * float(torch.rand(1, generator=g) * 4 + 0.5)
            b = torch.randn(NUM_EXPERTS, generator=g) * 0.3 if with_bias else None
            probs, rmap = routing(x, k, fn, pre, groups, gtopk, scaling, b)
            bp, bm, gap = brute_routing(x.double().tolist(), k, fn, pre, groups, gtopk, scaling,
                                        None if b is None else b.double().tolist())
            if gap < 1e-5:
                near += 1
                continue
            bad_map += rmap.tolist() != bm
            worst_p = max(worst_p, (probs.double() - torch.tensor(bp, dtype=torch.float64)).abs().max().item())
            ip, im = index_form_routing(x, k, fn, pre, groups, gtopk, scaling, b)
            bad_idx += not torch.equal(im, rmap)
            worst_i = max(worst_i, (ip - probs).abs().max().item())
    n = len(configs) * 6
    check(bad_map == 0 and worst_p < 2e-6,
          f"routing = per-token float64 loops: {n - near} draws over {len(configs)} configs, maps equal, "
          f"probs within {worst_p:.2g} ({near} near-tie draws skipped)")
    check(bad_idx == 0 and worst_i < 1e-6,
          f"routing = topk/gather/scatter index form (float32): maps equal, probs within {worst_i:.2g}")

    # ties: integer logits, lower expert / group index wins in both
    bad = 0
    for k, fn, pre, groups, gtopk, scaling, with_bias in configs:
        x = torch.randint(-1, 2, (NUM_TOKENS, NUM_EXPERTS), generator=g).float()
        b = torch.zeros(NUM_EXPERTS) if with_bias else None
        probs, rmap = routing(x, k, fn, pre, groups, gtopk, scaling, b)
        _, bm, _ = brute_routing(x.double().tolist(), k, fn, pre, groups, gtopk, scaling,
                                 None if b is None else [0.0] * NUM_EXPERTS)
        bad += rmap.tolist() != bm
    check(bad == 0, f"routing with tied scores (logits in {{-1, 0, 1}}): ties go to the lower expert and group index, {len(configs)} configs")

    # capacity against exact rationals
    bad = 0
    for n_tok in range(1, 65):
        for n_exp in (1, 2, 3, 4, 8, 16):
            for f10 in (5, 10, 15, 20, 25):
                exact = math.ceil(Fraction(n_tok, n_exp) * Fraction(f10, 10))
                bad += capacity(n_tok, n_exp, f10 / 10) != exact
    check(bad == 0, "capacity = exact ceil(num_tokens/num_experts*factor) for factors 0.5..2.5 (exact in float64)")
    check([capacity(*v) for v in CAPACITY_VECTORS[6:]] == [6, 31, 8, 11, 9]
          and [math.ceil(Fraction(n, e) * Fraction(str(f))) for n, e, f in CAPACITY_VECTORS[6:9]] == [5, 30, 7],
          "capacity's float64 borderline vectors: 6, 31, 8 (exact 5, 30, 7), 11, 9")

    # token dropping against per-expert loops
    bad, total = 0, 0
    for trial in range(60):
        k = 1 + trial % 3
        x = torch.randn(NUM_TOKENS, NUM_EXPERTS, generator=g)
        if trial % 4 == 3:
            x = torch.randint(-1, 2, (NUM_TOKENS, NUM_EXPERTS), generator=g).float()  # tied probs
        pre = trial % 2 == 0 or k == 1
        probs, rmap = routing(x, k, "softmax", pre)
        for factor in (0.25, 0.5, 1.0, 1.5, 2.0, 5.0):
            for policy in DROP_POLICIES:
                for pad in (False, True):
                    fp, fm, _ = token_dropping(probs, rmap, k, factor, policy, pad)
                    bp, bm = brute_dropping(probs.tolist(), rmap.tolist(), k, factor, policy, pad)
                    total += 1
                    bad += fm.tolist() != bm or fp.tolist() != bp
    check(bad == 0, f"token_dropping = per-expert loops (first c by (-prob, token) / first routed tokens, "
                    f"then earliest unrouted): {total} cases, a quarter with tied probabilities")

    # Megatron's form of the mask (topk over tokens + scatter) where ties cannot matter
    bad = 0
    for _ in range(30):
        x = torch.randn(NUM_TOKENS, NUM_EXPERTS, generator=g)
        probs, rmap = routing(x, 2, "softmax")
        for factor in (0.5, 1.0, 1.5):
            c = capacity(NUM_TOKENS * 2, NUM_EXPERTS, factor)
            idx = torch.topk(probs, c, dim=0, sorted=False).indices
            cap = torch.zeros_like(probs).scatter(0, idx, 1.0).bool()
            _, fm, _ = token_dropping(probs, rmap, 2, factor, "probs", False)
            bad += not torch.equal(fm, rmap & cap)
    check(bad == 0, "probs policy without padding = map AND scatter(topk(probs, c, dim=0))")

    # losses against f_i * P_i sums, per-sequence means and math.log loops (float64)
    worst = 0.0
    for _ in range(20):
        x = torch.randn(NUM_TOKENS, NUM_EXPERTS, generator=g, dtype=torch.float64) * 3
        for fn in ("softmax", "sigmoid"):
            for k in (1, 2, 3):
                scores, amap = aux_scores(x, k, fn)
                rows = x.tolist()
                if fn == "softmax":
                    ref_scores = [_softmax_list(r) for r in rows]
                else:
                    sg = [[_sigmoid(v) for v in r] for r in rows]
                    ref_scores = [[v / (sum(r) + 1e-20) for v in r] for r in sg]
                ref_map = [[e in _best(r, range(NUM_EXPERTS), k) for e in range(NUM_EXPERTS)] for r in ref_scores]
                if amap.tolist() != ref_map:
                    worst = math.inf

                def switch(sc, mp, T):
                    f = [sum(mp[t][e] for t in range(T)) / (T * k) for e in range(NUM_EXPERTS)]
                    P = [sum(sc[t][e] for t in range(T)) / T for e in range(NUM_EXPERTS)]
                    return NUM_EXPERTS * sum(fi * pi for fi, pi in zip(f, P)) * AUX_LOSS_COEFF

                lb = load_balancing_loss(scores, amap, k, NUM_EXPERTS, AUX_LOSS_COEFF).item()
                worst = max(worst, abs(lb - switch(ref_scores, ref_map, NUM_TOKENS)) / lb)
                seqs = []
                for j in range(MICRO_BATCH_SIZE):
                    tok = [i * MICRO_BATCH_SIZE + j for i in range(SEQ_LENGTH)]
                    seqs.append(switch([ref_scores[t] for t in tok], [ref_map[t] for t in tok], SEQ_LENGTH))
                sl = seq_load_balancing_loss(scores, amap, SEQ_LENGTH, MICRO_BATCH_SIZE, k, NUM_EXPERTS, AUX_LOSS_COEFF).item()
                worst = max(worst, abs(sl - sum(seqs) / len(seqs)) / sl)
        zl = z_loss(x, Z_LOSS_COEFF).item()
        ref = sum((max(r) + math.log(sum(math.exp(v - max(r)) for v in r))) ** 2 for r in x.tolist()) / NUM_TOKENS * Z_LOSS_COEFF
        worst = max(worst, abs(zl - ref) / ref)
    check(worst < 1e-12, f"aux scores/maps, load balancing loss = E*sum f_i*P_i*coeff, seq loss = mean of per-sequence losses, "
                         f"z loss = loop (relative {worst:.2g})")
    x = torch.randn(NUM_TOKENS, NUM_EXPERTS, generator=g, dtype=torch.float64)
    s, _ = aux_scores(x, 2, "sigmoid")
    check((s.sum(-1) - 1).abs().max().item() < 1e-15, "sigmoid aux scores sum to 1 per token")

    # z loss gradient: 2 * coeff * lse * softmax / T
    x = torch.randn(NUM_TOKENS, NUM_EXPERTS, generator=g, dtype=torch.float64, requires_grad=True)
    (gz,) = torch.autograd.grad(z_loss(x, Z_LOSS_COEFF), x)
    closed = 2 * Z_LOSS_COEFF * torch.logsumexp(x, -1, keepdim=True) * torch.softmax(x, -1) / NUM_TOKENS
    check((gz - closed).abs().max().item() < 1e-15, "z loss gradient = 2*coeff*logsumexp*softmax/T")

    # gradcheck (float64) of the fixture's gradient objective, with and without groups and dropping
    w = grad_weight(torch.float64)
    ok_all = True
    names = []
    for name, _, _, params, logits, bias, _ in all_cases():
        if name not in GRAD_CASES + ("sigmoid_bias_group_top4_scaled", "softmax_pre_group_top2",
                                     "softmax_top2_drop_probs_f1.0", "softmax_top2_drop_position_f0.5_pad"):
            continue
        b = None if bias is None else bias.double()

        def objective(x, params=params, b=b):
            r = evaluate(params, x, b)
            return (r["load_balancing_loss"] + r["seq_load_balancing_loss"] + r["z_loss"]
                    + (r["routing_probs"] * w).sum())

        x = logits.double().requires_grad_(True)
        ok = torch.autograd.gradcheck(objective, (x,), eps=1e-6, atol=1e-8, rtol=1e-6)
        ok_all &= ok
        names.append(name)
    check(ok_all, f"gradcheck (float64) of aux + seq aux + z + sum(probs*w): {', '.join(names)}")

    # expert bias update
    b = updated_expert_bias([[0, 2], [0, 0]], torch.zeros(2), 0.25)
    check(b.tolist() == [0.25, -0.25], f"expert bias spec vector: ranks [0, 2] and [0, 0], rate 0.25 -> {b.tolist()}")
    b = updated_expert_bias([[3, 1, 2, 2], [1, 1, 2, 4]], torch.zeros(4), 0.125)
    check(b.tolist() == [0.0, 0.125, 0.0, -0.125], f"expert bias at the mean moves by 0: {b.tolist()}")

    # JSON floats round-trip float32 exactly
    x = torch.randn(1000, generator=g)
    back = torch.tensor(json.loads(json.dumps(_plain(x))), dtype=torch.float32)
    check(torch.equal(back, x), "float32 -> repr -> float32 round trip")
    print(f"{failed} failure(s)")
    return failed


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", help=f"write {FILE} into this directory")
    ap.add_argument("--check", help=f"recompute and compare {FILE} in this directory")
    ap.add_argument("--selftest", action="store_true", help="check the functions against independent formulations")
    args = ap.parse_args(argv)
    if not (args.out or args.check or args.selftest):
        ap.error("give --out DIR, --check DIR or --selftest")
    setup_torch()
    failed = 0
    if args.selftest:
        failed += selftest()
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        path = os.path.join(args.out, FILE)
        write_json(path, build_fixture())
        print(f"{os.path.getsize(path):8d}  {path}")
    if args.check:
        failed += check_fixture(args.check)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
