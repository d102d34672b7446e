"""Writes torch_reference.json: inputs and torch's outputs for gotron's kernel tests.

Run with the system Python that has Debian's python3-torch:

    /usr/bin/python3 torch_reference.py

Every float32 is stored as its IEEE bit pattern (an unsigned integer), so the test reads
exactly the values torch computed. The inputs come from a fixed torch.Generator seed.
"""
import json
import struct

import torch
import torch.nn.functional as F

torch.set_num_threads(1)
gen = torch.Generator().manual_seed(20240607)


def bits(t):
    t = t.detach().to(torch.float32).contiguous().view(-1)
    return [struct.unpack('<I', struct.pack('<f', v))[0] for v in t.tolist()]


def u16(t):
    return [int(v) & 0xFFFF for v in t.contiguous().view(torch.int16).view(-1).tolist()]


def randn(*shape, std=1.0, mean=0.0):
    return torch.randn(*shape, generator=gen) * std + mean


out = {'torch_version': torch.__version__}

# Adam and AdamW, several steps on one flat tensor (a length that is no multiple of 16).
adam = []
for name, cls, hyper in [
    ('adam', torch.optim.Adam, dict(lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0)),
    ('adam_l2', torch.optim.Adam, dict(lr=3e-4, betas=(0.8, 0.95), eps=1e-6, weight_decay=0.01)),
    ('adamw', torch.optim.AdamW, dict(lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.1)),
]:
    n, steps = 67, 5
    p0 = randn(n, std=0.5)
    grads = [randn(n) * torch.exp(randn(n, std=2.0)) for _ in range(steps)]
    p = torch.nn.Parameter(p0.clone())
    opt = cls([p], **hyper)
    for g in grads:
        p.grad = g.clone()
        opt.step()
    st = opt.state[p]
    adam.append(dict(name=name, lr=hyper['lr'], beta1=hyper['betas'][0], beta2=hyper['betas'][1],
                     eps=hyper['eps'], weight_decay=hyper['weight_decay'],
                     decoupled=cls is torch.optim.AdamW, steps=steps,
                     p0=bits(p0), grads=[bits(g) for g in grads],
                     p=bits(p), m=bits(st['exp_avg']), v=bits(st['exp_avg_sq'])))
out['adam'] = adam

# GELU, tanh approximation.
x = torch.cat([randn(400, std=3.0), torch.linspace(-12, 12, 113)]).requires_grad_()
dy = randn(x.numel())
y = F.gelu(x, approximate='tanh')
y.backward(dy)
out['gelu'] = dict(x=bits(x), y=bits(y), dy=bits(dy), dx=bits(x.grad))

# LayerNorm over the last dimension.
rows, cols = 5, 67
x = randn(rows, cols, std=2.0, mean=0.5).requires_grad_()
w = randn(cols, std=0.5, mean=1.0).requires_grad_()
b = randn(cols, std=0.5).requires_grad_()
dy = randn(rows, cols)
y = F.layer_norm(x, (cols,), w, b, 1e-5)
y.backward(dy)
out['layernorm'] = dict(rows=rows, cols=cols, eps=1e-5, x=bits(x), w=bits(w), b=bits(b), y=bits(y),
                        dy=bits(dy), dx=bits(x.grad), dw=bits(w.grad), db=bits(b.grad))

# Cross entropy per row.
rows, vocab = 4, 37
logits = randn(rows, vocab, std=3.0).requires_grad_()
labels = torch.randint(0, vocab, (rows,), generator=gen)
dloss = randn(rows)
loss = F.cross_entropy(logits, labels, reduction='none')
loss.backward(dloss)
out['cross_entropy'] = dict(rows=rows, vocab=vocab, logits=bits(logits), labels=labels.tolist(),
                            loss=bits(loss), dloss=bits(dloss), dlogits=bits(logits.grad))

# Causal softmax of scaled scores, as attention computes it.
s, scale = 9, 0.35
scores = randn(s, s, std=4.0).requires_grad_()
mask = torch.triu(torch.ones(s, s, dtype=torch.bool), diagonal=1)
p = torch.softmax((scores * scale).masked_fill(mask, float('-inf')), dim=-1)
dp = randn(s, s)
p.backward(dp)
out['causal_softmax'] = dict(s=s, scale=scale, scores=bits(scores), p=bits(p), dp=bits(dp),
                             ds=bits(scores.grad))

# Dropout's scale: the value a kept 1.0 becomes, for p = 0.01 .. 0.99.
scales = []
for i in range(1, 100):
    y = F.dropout(torch.ones(256), p=i / 100, training=True)
    scales.append([i / 100, bits(y[y != 0][:1])[0]])
out['dropout_scale'] = scales

# Half conversions: random magnitudes, ties, subnormals, overflow, specials.
vals = torch.cat([randn(300) * torch.exp(randn(300, std=8.0)),
                  torch.tensor([0.0, -0.0, 1.0, 65504.0, 65519.0, 65520.0, 1e6, -1e6, 6.0e-8, 3.0e-8,
                                2.9802322e-08, 5.9604645e-08, 1e-45, float('inf'), float('-inf')]),
                  # float32 values exactly halfway between two bf16 values (ties to even)
                  torch.tensor([1.0 + 2.0 ** -8, 1.0 + 3 * 2.0 ** -8, -(1.0 + 2.0 ** -8)]),
                  # exactly halfway between two fp16 values
                  torch.tensor([1.0 + 2.0 ** -11, 1.0 + 3 * 2.0 ** -11, 2.0 ** -24 * 1.5])])
out['half'] = dict(x=bits(vals), bf16=u16(vals.to(torch.bfloat16)), f16=u16(vals.to(torch.float16)))

# SGD (torch.optim.SGD, dampening 0, not Nesterov): without momentum, with
# momentum, with momentum and (coupled) weight decay. Drawn last, so the
# cases above keep their inputs.
sgd = []
for name, hyper in [
    ('sgd', dict(lr=1e-2, momentum=0.0, weight_decay=0.0)),
    ('sgd_momentum', dict(lr=3e-2, momentum=0.9, weight_decay=0.0)),
    ('sgd_momentum_wd', dict(lr=1e-2, momentum=0.8, weight_decay=0.05)),
]:
    n, steps = 67, 5
    p0 = randn(n, std=0.5)
    grads = [randn(n) * torch.exp(randn(n, std=2.0)) for _ in range(steps)]
    p = torch.nn.Parameter(p0.clone())
    opt = torch.optim.SGD([p], **hyper)
    for g in grads:
        p.grad = g.clone()
        opt.step()
    buf = opt.state[p].get('momentum_buffer')
    sgd.append(dict(name=name, lr=hyper['lr'], momentum=hyper['momentum'], weight_decay=hyper['weight_decay'],
                    steps=steps, p0=bits(p0), grads=[bits(g) for g in grads], p=bits(p),
                    buf=bits(buf) if buf is not None else []))
out['sgd'] = sgd

with open('torch_reference.json', 'w') as f:
    json.dump(out, f, separators=(',', ':'))
    f.write('\n')
