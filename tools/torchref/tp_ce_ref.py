#!/usr/bin/python3
"""Independent PyTorch reference for gotron's vocab-parallel cross entropy.

    /usr/bin/python3 tools/torchref/tp_ce_ref.py --out testdata/tp_ce     # write
    /usr/bin/python3 tools/torchref/tp_ce_ref.py --check testdata/tp_ce   # re-verify

Writes testdata/tp_ce/ce.safetensors (float32, see st_io.py), read by
tp/cross_entropy_test.go (TestVocabParallelCrossEntropyMatchesTorch):

    logits       [N, V]  the logits (V = 50 real columns, no padding)
    targets      [N]     the target ids as float32 (exact small integers);
                         rows 3, 7 and 11 hold -1, V and 63: out of range,
                         masked (63 is a padding id once gotron pads V to 64)
    dloss        [N]     the upstream gradient of the per-token loss (row 5: 0)
    loss_a0      [N]     per-token loss, no label smoothing
    dlogits_a0   [N, V]  d(sum(loss_a0 * dloss))/d(logits)
    loss_a01     [N]     per-token loss, label smoothing alpha = 0.1
    dlogits_a01  [N, V]  its gradient, as above

Everything is computed in float64 from the float32 logits and rounded to
float32 once. The formulas (gotron's: docs/SEMANTICS.md § Vocab-parallel
cross entropy, with the global vocabulary):

    CE    = logsumexp(x) - x[t]               F.cross_entropy, reduction='none'
    CE    = logsumexp(x) - max(x)             masked target (t < 0 or t >= V);
                                              max(x) is a constant for autograd
    s     = alpha * V / (V - 1)
    loss  = (1 - s) * CE - s * mean_j log_softmax(x)_j

The smoothed formula is written with plain torch ops and checked against
F.cross_entropy(label_smoothing=s) on the unmasked rows (the two smoothing
conventions differ only in how alpha is scaled); the gradients come from
torch.autograd and are checked against the closed form
softmax*dy - (1-s)*onehot*dy - (s/V)*dy.
"""

import argparse
import os
import sys

sys.dont_write_bytecode = True  # keep the source tree free of __pycache__
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import st_io  # noqa: E402

ROWS, VOCAB, ALPHA, SEED = 16, 50, 0.1, 4321
MASKED = {3: -1, 7: VOCAB, 11: 63}
METADATA = {
    "format": "pt",
    "producer": "gotron tools/torchref/tp_ce_ref.py",
    "vocab_size": str(VOCAB),
    "label_smoothing": str(ALPHA),
}
FILE = "ce.safetensors"


def inputs():
    """The float32 logits, integer targets and float32 upstream gradient."""
    g = torch.Generator().manual_seed(SEED)
    logits = torch.randn(ROWS, VOCAB, generator=g, dtype=torch.float32) * 2.5
    logits[9] += 40.0  # a large offset: the maximum must be taken out
    targets = torch.randint(0, VOCAB, (ROWS,), generator=g, dtype=torch.int64)
    for r, t in MASKED.items():
        targets[r] = t
    dloss = torch.rand(ROWS, generator=g, dtype=torch.float32) + 0.5
    dloss[5] = 0.0
    return logits, targets, dloss


def per_token_loss(x, targets, alpha):
    """Per-token loss of float64 logits x (see the module docstring)."""
    valid = (targets >= 0) & (targets < VOCAB)
    lse = torch.logsumexp(x, dim=-1)
    # The reference subtracts the maximum as a constant (no gradient flows
    # through it), so a masked row's gradient is the plain softmax.
    masked_ce = lse - x.max(dim=-1).values.detach()
    ce = masked_ce.clone()
    ce[valid] = F.cross_entropy(x[valid], targets[valid], reduction="none")
    if alpha == 0:
        return ce
    s = alpha * VOCAB / (VOCAB - 1)
    logp = torch.log_softmax(x, dim=-1)
    loss = (1 - s) * ce - s * logp.mean(dim=-1)
    torch_smoothed = F.cross_entropy(x[valid], targets[valid], reduction="none", label_smoothing=s)
    err = (loss[valid] - torch_smoothed).abs().max().item()
    if err > 1e-12:
        raise AssertionError(f"explicit smoothing formula differs from F.cross_entropy by {err}")
    return loss


def closed_form_grad(x, targets, dloss, alpha):
    """softmax*dy - (1-s)*onehot*dy - (s/V)*dy, masked rows without onehot."""
    s = alpha * VOCAB / (VOCAB - 1)
    g = torch.softmax(x, dim=-1)
    valid = (targets >= 0) & (targets < VOCAB)
    rows = torch.arange(ROWS)[valid]
    g[rows, targets[valid]] -= 1 - s
    g -= s / VOCAB
    return g * dloss[:, None]


def compute():
    """All fixture tensors as float32."""
    logits, targets, dloss = inputs()
    out = {"logits": logits, "targets": targets.to(torch.float32), "dloss": dloss}
    d = dloss.double()
    for alpha, tag in ((0.0, "a0"), (ALPHA, "a01")):
        x = logits.double().requires_grad_(True)
        loss = per_token_loss(x, targets, alpha)
        (loss * d).sum().backward()
        err = (x.grad - closed_form_grad(x.detach(), targets, d, alpha)).abs().max().item()
        if err > 1e-12:
            raise AssertionError(f"alpha={alpha}: autograd and closed-form gradients differ by {err}")
        out["loss_" + tag] = loss.detach().to(torch.float32)
        out["dlogits_" + tag] = x.grad.to(torch.float32)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--out", help="write the fixture into this directory")
    mode.add_argument("--check", help="recompute and compare with the fixture in this directory")
    args = ap.parse_args()
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    tensors = compute()
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        st_io.save(os.path.join(args.out, FILE), tensors, METADATA)
        return 0
    got, meta = st_io.load(os.path.join(args.check, FILE))
    bad = []
    if meta != METADATA:
        bad.append(f"metadata {meta} != {METADATA}")
    if sorted(got) != sorted(tensors):
        bad.append(f"tensors {sorted(got)} != {sorted(tensors)}")
    for name, want in tensors.items():
        if name in got and not torch.equal(got[name], want):
            bad.append(f"{name} differs (max {(got[name] - want).abs().max().item():.3g})")
    for b in bad:
        print("tp_ce_ref: " + b, file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
