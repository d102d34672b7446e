"""PyTorch's training throughput on gotron's benchmark models, for side-by-side runs.

Trains the small and medium GPTs of `gotron bench` (same shapes, mock-sized random
tokens, fp32, AdamW) with PyTorch's own fused modules (F.layer_norm, F.gelu,
F.cross_entropy, batched attention with a causal mask) on N threads, and prints
tokens/s and GFLOP/s with the same FLOP formula as gotron:
    6·T·(12·L·h² + V·h) + 12·L·h·s·T

    /usr/bin/python3 tools/torchref/bench.py [--threads 2] [--iters 5] [--tuned]

The first line says how the process actually ran: the BLAS library mapped into it (read
from /proc/self/maps, with OpenBLAS's kernel and threading), the allocator, the thread
settings, ATen's vector ISA, OPENBLAS_CORETYPE and the torch version.
Peak MiB is the process's peak resident set so far (ru_maxrss): a later model's includes the
earlier's.

--tuned is PyTorch at its best on this CPU (scripts/bench-torch.sh runs it beside the
untuned default): the OpenMP build of OpenBLAS (Debian's libopenblas0-openmp) preloaded
and first on LD_LIBRARY_PATH, so that OpenBLAS and ATen share one OpenMP thread pool
instead of two pools spinning against each other on two cores; jemalloc (libjemalloc2)
with page decay off, so freed activations are reused instead of being returned to the
kernel and faulted in again every step; every thread count set to --threads before the
libraries start; OPENBLAS_CORETYPE unset so OpenBLAS picks its own kernel. The libraries
and the environment must be in place before the interpreter starts, so when they are not,
--tuned re-executes itself with them (scripts/deps.sh torchbench installs them).

Tried on this machine and left out, as they did not measurably help: ATen's AVX-512
kernels (ATEN_CPU_CAPABILITY=avx512; this build picks AVX2 here: GELU gets faster,
softmax, AdamW and adds slower), OMP_WAIT_POLICY=ACTIVE or PASSIVE (passive is slower),
OMP_PROC_BIND/OMP_PLACES (2x slower: threads created later inherit the first core),
torch.set_flush_denormal, AdamW(foreach=True), torch.backends.mkldnn off (fp32 Linear
runs on BLAS in 1.13 either way). This build has oneDNN (MKL-DNN 2.6.3, the version gotron
uses for its large GEMMs), but 1.13 gives an fp32 training step no way onto it: its
mkldnn_linear takes only MKL-DNN-layout tensors ("Could not run 'aten::mkldnn_linear' with
arguments from the 'CPU' backend" for dense ones), and the rest of the model (layer norm,
GELU, attention, autograd) has no kernels for that layout. Also left out: tcmalloc instead of jemalloc, jemalloc thp:always (no
transparent huge pages are granted in this VM), torch.jit.script with CPU fusion (within
noise). scaled_dot_product_attention and torch.compile do not exist in 1.13.
"""

import argparse
import math
import os
import resource
import sys
import time

OPENBLAS_OPENMP = "/usr/lib/x86_64-linux-gnu/openblas-openmp/libopenblas.so.0"
JEMALLOC = "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"
# jemalloc 5.x option names (Debian 12 ships 5.3.0): no background purging thread, and
# freed dirty and muzzy pages are never given back to the kernel.
MALLOC_CONF = "background_thread:false,dirty_decay_ms:-1,muzzy_decay_ms:-1"


def tuned_env(threads):
    """The environment of a --tuned run: everything here is read when the shared
    libraries initialise, that is before any Python code runs."""
    n = str(threads)
    return {
        "LD_PRELOAD": f"{OPENBLAS_OPENMP}:{JEMALLOC}",
        # libtorch also links libblas.so.3 and liblapack.so.3, whose alternatives are the
        # pthreads build's thin wrappers: take the OpenMP build's too
        "LD_LIBRARY_PATH": os.path.dirname(OPENBLAS_OPENMP),
        "MALLOC_CONF": MALLOC_CONF,
        "OMP_NUM_THREADS": n,
        "OPENBLAS_NUM_THREADS": n,
        "GOTO_NUM_THREADS": n,
        "MKL_NUM_THREADS": n,
    }


def ensure_tuned_env(threads):
    """Re-executes this script with the tuned environment unless it is already in force."""
    want = tuned_env(threads)
    missing = [p for p in want["LD_PRELOAD"].split(":") if not os.path.exists(p)]
    if missing:
        sys.exit(f"bench.py --tuned: {' '.join(missing)} missing: run scripts/deps.sh torchbench")
    if all(os.environ.get(k) == v for k, v in want.items()) and "OPENBLAS_CORETYPE" not in os.environ:
        return
    if os.environ.get("GOTRON_BENCH_REEXEC"):
        sys.exit("bench.py --tuned: the environment did not take effect after re-executing")
    env = dict(os.environ, GOTRON_BENCH_REEXEC="1", **want)
    env.pop("OPENBLAS_CORETYPE", None)
    os.execve(sys.executable, [sys.executable] + sys.argv, env)


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--configs", default="small,medium")
    ap.add_argument("--tuned", action="store_true",
                    help="OpenMP OpenBLAS, jemalloc without page decay and the thread counts, set "
                         "before start-up (re-executes itself with them when needed)")
    return ap.parse_args()


ARGS = parse_args() if __name__ == "__main__" else None
if ARGS is not None and ARGS.tuned:
    ensure_tuned_env(ARGS.threads)  # before torch is imported: torch loads BLAS and OpenMP

import ctypes  # noqa: E402

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

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
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"{name:<8} {c['layers']:>7} {c['hidden']:>7} {c['heads']:>6} {s:>5} {c['vocab']:>6} {b:>5} "
          f"{tokens / step:>12.0f} {flops(c, tokens) / step / 1e9:>10.1f} {step * 1000:>10.1f} {peak:>9.0f}",
          flush=True)


def mapped_files():
    """The files mapped into this process, in the order they first appear."""
    seen = []
    with open("/proc/self/maps") as f:
        for line in f:
            parts = line.split(maxsplit=5)
            if len(parts) == 6 and parts[5].startswith("/") and parts[5].strip() not in seen:
                seen.append(parts[5].strip())
    return seen


def blas_info(maps):
    """The BLAS implementation really mapped, by file, and what OpenBLAS says of itself."""
    libs = [p for p in maps if any(k in os.path.basename(p) for k in ("openblas", "mkl_", "blis", "libblas", "atlas"))]
    impl = [p for p in libs if "openblas" in os.path.basename(p) or "mkl_" in p or "blis" in p] or libs
    desc = ",".join(impl) or "none"
    wrappers = sorted({os.path.dirname(p) for p in libs if p not in impl})
    if wrappers and wrappers != sorted({os.path.dirname(p) for p in impl}):
        desc += f" [libblas/liblapack.so.3 from {','.join(wrappers)}]"
    try:
        ob = ctypes.CDLL("libopenblas.so.0", mode=os.RTLD_NOLOAD | os.RTLD_LAZY)  # the one already loaded
        ob.openblas_get_corename.restype = ctypes.c_char_p
        ob.openblas_get_config.restype = ctypes.c_char_p
        par = {0: "sequential", 1: "pthreads", 2: "openmp"}.get(ob.openblas_get_parallel(), "?")
        ver = ob.openblas_get_config().decode().split()[1]
        desc += (f" (OpenBLAS {ver}, kernel {ob.openblas_get_corename().decode()}, {par}, "
                 f"{ob.openblas_get_num_threads()} threads)")
    except (OSError, AttributeError):
        pass
    return desc


def malloc_info(maps):
    je = [p for p in maps if "jemalloc" in os.path.basename(p)]
    if not je:
        return "glibc malloc"
    desc = "jemalloc " + je[0]
    try:
        lib = ctypes.CDLL(je[0], mode=os.RTLD_NOLOAD | os.RTLD_LAZY)

        def ctl(name, ctype):
            v, n = ctype(), ctypes.c_size_t(ctypes.sizeof(ctype))
            if lib.mallctl(name.encode(), ctypes.byref(v), ctypes.byref(n), None, ctypes.c_size_t(0)) != 0:
                return "?"
            return v.value.decode() if ctype is ctypes.c_char_p else v.value

        desc += (f" ({ctl('version', ctypes.c_char_p).split('-')[0]}: "
                 f"background_thread {'on' if ctl('opt.background_thread', ctypes.c_bool) else 'off'}, "
                 f"dirty_decay_ms {ctl('opt.dirty_decay_ms', ctypes.c_ssize_t)}, "
                 f"muzzy_decay_ms {ctl('opt.muzzy_decay_ms', ctypes.c_ssize_t)})")
    except (OSError, AttributeError):
        pass
    return desc


def header(args):
    maps = mapped_files()
    cap = next((l.split(":", 1)[1].strip() for l in torch.__config__.show().splitlines()
                if "CPU capability usage" in l), "?")
    env = " ".join(f"{k}={os.environ.get(k, 'unset')}" for k in
                   ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "MKL_NUM_THREADS",
                    "OPENBLAS_CORETYPE"))
    return (f"pytorch {torch.__version__} {'tuned' if args.tuned else 'untuned'}: "
            f"{torch.get_num_threads()} thread(s) (interop {torch.get_num_interop_threads()}), fp32, "
            f"ATen {cap}; BLAS {blas_info(maps)}; {malloc_info(maps)}; {env}")


def main(args):
    torch.set_num_threads(args.threads)
    print(header(args), flush=True)
    print(f"{'config':<8} {'layers':>7} {'hidden':>7} {'heads':>6} {'seq':>5} {'vocab':>6} {'micro':>5} "
          f"{'tokens/s':>12} {'GFLOP/s':>10} {'step ms':>10} {'peak MiB':>9}")
    for name in args.configs.split(","):
        run(name, CONFIGS[name], args.iters)


if __name__ == "__main__":
    sys.exit(main(ARGS))
