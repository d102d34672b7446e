"""PyTorch's training throughput on gotron's benchmark models, for side-by-side runs.

Trains the small and medium GPTs of `gotron bench` (same shapes, mock-sized random
tokens, fp32, AdamW) with PyTorch's own fused modules (F.layer_norm, F.gelu,
F.cross_entropy, batched attention with a causal mask) on N threads, and prints
tokens/s and GFLOP/s with the same FLOP formula as gotron:
    6·T·(12·L·h² + V·h) + 12·L·h·s·T

    /usr/bin/python3 tools/torchref/bench.py [--threads 2] [--iters 5]
"""

import argparse
import math
import sys
import time

import torch
import torch.nn.functional as F

CONFIGS = {
    "small": dict(layers=4, hidden=256, heads=8, seq=256, vocab=1024, micro=8),
    "medium": dict(layers=6, hidden=512, heads=8, seq=512, vocab=8192, micro=4),
}


class Layer(torch.nn.Module):
    def __init__(self, h, heads):
        super().__init__()
        self.heads = heads
        self.ln1 = torch.nn.LayerNorm(h)
        self.qkv = torch.nn.Linear(h, 3 * h)
        self.proj = torch.nn.Linear(h, h)
        self.ln2 = torch.nn.LayerNorm(h)
        self.fc1 = torch.nn.Linear(h, 4 * h)
        self.fc2 = torch.nn.Linear(4 * h, h)

    def forward(self, x, mask):
        s, b, h = x.shape
        n, d = self.heads, h // self.heads
        qkv = self.qkv(self.ln1(x)).view(s, b, n, 3, d)
        q, k, v = (qkv[:, :, :, i].permute(1, 2, 0, 3).reshape(b * n, s, d) for i in range(3))
        scores = torch.baddbmm(mask, q, k.transpose(1, 2), beta=1.0, alpha=1.0 / math.sqrt(d))
        ctx = torch.bmm(torch.softmax(scores, dim=-1), v)
        ctx = ctx.view(b, n, s, d).permute(2, 0, 1, 3).reshape(s, b, h)
        x = x + self.proj(ctx)
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x)), approximate="tanh"))


class GPT(torch.nn.Module):
    def __init__(self, c):
        super().__init__()
        h = c["hidden"]
        self.word = torch.nn.Embedding(c["vocab"], h)
        self.pos = torch.nn.Embedding(c["seq"], h)
        self.layers = torch.nn.ModuleList(Layer(h, c["heads"]) for _ in range(c["layers"]))
        self.ln = torch.nn.LayerNorm(h)

    def forward(self, ids, labels, mask):
        s = ids.shape[0]
        x = self.word(ids) + self.pos.weight[:s, None, :]
        for layer in self.layers:
            x = layer(x, mask)
        logits = self.ln(x) @ self.word.weight.t()
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), labels.reshape(-1))


def flops(c, tokens):
    L, h, s, V = c["layers"], c["hidden"], c["seq"], c["vocab"]
    return 6 * tokens * (12 * L * h * h + V * h) + 12 * L * h * s * tokens


def run(name, c, iters):
    torch.manual_seed(0)
    model = GPT(c)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.1)
    s, b = c["seq"], c["micro"]
    mask = torch.full((s, s), float("-inf")).triu(1)
    times = []
    for it in range(iters + 1):
        ids = torch.randint(0, c["vocab"], (s, b))
        labels = torch.randint(0, c["vocab"], (s, b))
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = model(ids, labels, mask)
        loss.backward()
        opt.step()
        if it > 0:
            times.append(time.perf_counter() - t0)
    step = sum(times) / len(times)
    tokens = s * b
    print(f"{name:<8} {c['layers']:>7} {c['hidden']:>7} {c['heads']:>6} {s:>5} {c['vocab']:>6} {b:>5} "
          f"{tokens / step:>12.0f} {flops(c, tokens) / step / 1e9:>10.1f} {step * 1000:>10.1f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--configs", default="small,medium")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    print(f"pytorch {torch.__version__}: {args.threads} thread(s), fp32")
    print(f"{'config':<8} {'layers':>7} {'hidden':>7} {'heads':>6} {'seq':>5} {'vocab':>6} {'micro':>5} {'tokens/s':>12} {'GFLOP/s':>10} {'step ms':>10}")
    for name in args.configs.split(","):
        run(name, CONFIGS[name], args.iters)


if __name__ == "__main__":
    sys.exit(main())
