"""gotron's reproducible mock data (Megatron's --mock-data, fixed across languages).

For training step s (0-based) and global row g of a global batch of rows_total
rows (all arithmetic modulo 2**64, as uint64):

    row_id = (seed * 1000003 + s) * rows_total + g
    start  = splitmix64(2*row_id) % vocab
    stride = 1 + splitmix64(2*row_id + 1) % min(16, vocab - 1)
    tok[t] = (start + t*stride) % vocab,  t = 0..seq
    input_ids = tok[0:seq], labels = tok[1:seq+1]
"""

import torch

MASK64 = (1 << 64) - 1


def splitmix64(x):
    """One SplitMix64 output for state x (Steele, Lea, Flood 2014; Vigna's constants)."""
    z = (x + 0x9E3779B97F4A7C15) & MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return z ^ (z >> 31)


def row_tokens(seed, step, g, rows_total, seq, vocab):
    """Return the seq+1 tokens of global row g of step `step` as a list of ints."""
    row_id = ((seed * 1000003 + step) * rows_total + g) & MASK64
    start = splitmix64((2 * row_id) & MASK64) % vocab
    stride = 1 + splitmix64((2 * row_id + 1) & MASK64) % min(16, vocab - 1)
    return [(start + t * stride) % vocab for t in range(seq + 1)]


def global_batch(cfg, step):
    """Return the tokens of the step's global batch as an int64 tensor [rows, seq+1].

    Row g of the result is global row g; microbatch m of a single data-parallel
    rank holds rows m*micro_batch_size .. (m+1)*micro_batch_size-1.
    """
    rows = cfg["global_batch_size"]
    seq = cfg["seq_length"]
    vocab = cfg["vocab_size"]
    return torch.tensor(
        [row_tokens(cfg["seed"], step, g, rows, seq, vocab) for g in range(rows)],
        dtype=torch.int64,
    )
