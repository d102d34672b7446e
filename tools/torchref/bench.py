"""PyTorch's training throughput on gotron's benchmark models, for side-by-side runs.

Trains the small and medium GPTs of `gotron bench` (same shapes, mock-sized random
tokens, AdamW) with PyTorch's own fused modules (F.layer_norm, F.gelu, F.cross_entropy,
batched attention with a causal mask) on N threads, in float32 or (--bf16) under bf16
autocast, and prints tokens/s and GFLOP/s with the same FLOP formula as gotron:
    6·T·(12·L·h² + V·h) + 12·L·h·s·T

    /usr/bin/python3 tools/torchref/bench.py [--threads 2] [--iters 5] [--tuned] [--bf16]

The first line says how the process actually ran: fp32 or bf16 autocast, the BLAS library
mapped into it (read from /proc/self/maps, with the kernel OpenBLAS loaded, from
openblas_get_corename, and its threading), oneDNN's version and the ISA it may use, the
allocator, the thread settings, ATen's vector ISA, OPENBLAS_CORETYPE and
ATEN_CPU_CAPABILITY (with what chose them) and the torch version.
Peak MiB is the process's peak resident set so far (ru_maxrss): a later model's includes the
earlier's.

--tuned is PyTorch at its best on this CPU (scripts/bench-torch.sh runs it beside the
untuned default): the OpenMP build of OpenBLAS (Debian's libopenblas0-openmp) preloaded
and first on LD_LIBRARY_PATH, so that OpenBLAS and ATen share one OpenMP thread pool
instead of two pools spinning against each other on two cores; jemalloc (libjemalloc2)
with page decay off, so freed activations are reused instead of being returned to the
kernel and faulted in again every step; every thread count set to --threads before the
libraries start; OpenBLAS's core type and ATen's vector ISA chosen from the CPU's features
(the flags line of /proc/cpuinfo), below. The libraries and the environment must be in
place before the interpreter starts, so when they are not, --tuned re-executes itself with
them (scripts/deps.sh torchbench installs them). A different OPENBLAS_CORETYPE or
ATEN_CPU_CAPABILITY in the caller's environment is replaced, and said on stderr; --coretype
and --aten-isa set others (auto: unset, the library's own choice). --print-coretype and
--print-aten-isa print the values chosen (bench-torch.sh puts them on its command lines).

OpenBLAS core type (OPENBLAS_CORETYPE), from the features: avx512f+vl+bw+dq+cd with
avx512_bf16 → Cooperlake, without → SkylakeX; avx2+fma → Haswell (the Zen core type uses
Haswell's sgemm kernel and measured no faster here: 145–177 GFLOP/s at the models' GEMM
shapes against 159–195 for Haswell, two threads); avx → Sandybridge; otherwise unset.
OpenBLAS 0.3.21's own detection goes by the CPU's model number and falls back to the
generic Prescott kernel on models it does not know: it did so on an Intel Xeon with
AVX-512 BF16 under KVM (issue 27: 6× slower GEMMs). On the Xeon of 2026-11-28 (KVM,
model 167, AVX-512 BF16 and AMX) it picks SkylakeX by itself, whose float32 kernels
Cooperlake shares (KERNEL.COOPERLAKE includes KERNEL.SKYLAKEX): tokens/s equal within noise
(small 5,496–5,511 auto against 5,465–5,903 Cooperlake and 5,692–5,722 SkylakeX; medium
1,235–1,241, 1,247–1,252, 1,226–1,244). What a wrong kernel costs there (small, tokens/s):
Haswell 4,642, Sandybridge 3,700, Prescott 2,502 (its sgemm at 80–85 GFLOP/s on two
threads against 250–310).

ATen's vector ISA (ATEN_CPU_CAPABILITY=avx512 where the CPU has avx512f+vl+bw+dq and fma;
this build runs AVX2 kernels by default): on that Xeon 2–6% faster in float32 (three
interleaved rounds, small 5,469–5,601 → 5,636–5,928, medium 1,199–1,240 → 1,246–1,264) and
1.1–1.3× in bf16 (small 9,200–9,823 → 11,790–12,014, medium 2,381–2,402 → 2,676–2,920
tokens/s): GELU and its backward take 35 ms of a small bf16 step instead of 60, softmax 7
instead of 9. On the AMD EPYC (Zen 4) of the earlier runs it did not measurably help in
float32 (GELU faster; softmax, AdamW and adds slower).

--bf16 is PyTorch's own mixed precision: the forward pass (and so its backward) under
torch.autocast("cpu", dtype=torch.bfloat16), float32 master weights, gradients and AdamW as
in float32, the loss within 1e-4 relative of float32's. In 1.13 CPU autocast runs linear,
matmul, bmm and baddbmm in bf16 and they go to oneDNN's matmul (PyTorch's oneDNN, 2.6.3,
the one gotron uses): ONEDNN_VERBOSE=1 shows every one of a step's 75 (small) on
brg:avx512_core_amx_bf16 on that Xeon, and none in float32. Where the CPU has no AMX
(ONEDNN_MAX_CPU_ISA=AVX512_CORE_BF16 on that Xeon) bf16 falls from 9,823 to 5,090 tokens/s
(small), about float32's rate; on a Xeon with AVX-512 BF16 and no AMX (issue 27) it was
0.68× float32.
Tried for bf16 and left out: torch.backends.mkldnn.enabled = False (bf16 GEMMs then run on
ATen's scalar fallback: 130 tokens/s, small), ONEDNN_MAX_CPU_ISA below AMX (above); 1.13 has
no other oneDNN setting (torch.backends.mkldnn has only `enabled`) and
set_float32_matmul_precision does not reach its CPU matmuls. The rest of a bf16 step on that
Xeon (small, tuned): GEMMs about 35%, the fp32↔bf16 casts (aten::copy_) 14%, GELU and its
backward 20%.

Tried on the AMD EPYC and left out, as they did not measurably help: OMP_WAIT_POLICY=ACTIVE
or PASSIVE (passive is slower), OMP_PROC_BIND/OMP_PLACES (2x slower: threads created later
inherit the first core), torch.set_flush_denormal, AdamW(foreach=True),
torch.backends.mkldnn off (fp32 Linear runs on BLAS in 1.13 either way). This build has
oneDNN (MKL-DNN 2.6.3, the version gotron uses for its large GEMMs), but 1.13 gives an
fp32 training step no way onto it: its mkldnn_linear takes only MKL-DNN-layout tensors
("Could not run 'aten::mkldnn_linear' with arguments from the 'CPU' backend" for dense ones),
and the rest of the model (layer norm, GELU, attention, autograd) has no kernels for that
layout. Also left out: tcmalloc instead of jemalloc, jemalloc thp:always (no transparent
huge pages are granted in this VM), torch.jit.script with CPU fusion (within noise).
scaled_dot_product_attention and torch.compile do not exist in 1.13.
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


def cpu_flags(path="/proc/cpuinfo"):
    """The CPU's feature flags as the kernel reports them (the first `flags` line): a
    feature the kernel does not enable (AVX-512 state not saved, say) is not listed."""
    try:
        with open(path) as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


# OpenBLAS's x86-64 core types, best first, with the features each one's kernels need.
# Cooperlake is SkylakeX's float32 kernels plus bf16 ones (KERNEL.COOPERLAKE includes
# KERNEL.SKYLAKEX); Zen's sgemm kernel is Haswell's (KERNEL.ZEN), so Haswell is the core
# type for AVX2 CPUs of either vendor.
CORETYPES = [
    ("Cooperlake", ("avx512f", "avx512vl", "avx512bw", "avx512dq", "avx512cd", "avx512_bf16")),
    ("SkylakeX", ("avx512f", "avx512vl", "avx512bw", "avx512dq", "avx512cd")),
    ("Haswell", ("avx2", "fma")),
    ("Sandybridge", ("avx",)),
]
# ATen's vector ISA: this build runs its AVX2 kernels by default even where the CPU has
# the AVX-512 ATen requires (F, VL, BW, DQ and FMA); below that its own choice stands.
ATEN_ISAS = [("avx512", ("avx512f", "avx512vl", "avx512bw", "avx512dq", "fma"))]

# The variables --tuned chooses from the CPU's features: (option, table).
FEATURE_VARS = {"OPENBLAS_CORETYPE": ("--coretype", CORETYPES),
                "ATEN_CPU_CAPABILITY": ("--aten-isa", ATEN_ISAS)}


def by_features(table, flags):
    """The first entry of table whose features the CPU has, and those features joined by
    '+', or (None, None)."""
    for name, need in table:
        if all(f in flags for f in need):
            return name, "+".join(need)
    return None, None


def chosen(var, arg, flags):
    """The value a --tuned run gives var (None: unset, the library decides) and why."""
    opt, table = FEATURE_VARS[var]
    if arg == "auto":
        return None, f"{opt} auto"
    if arg:
        return arg, opt
    name, need = by_features(table, flags)
    return name, f"the CPU's {need}" if name else "no CPU feature of the table: the library's own choice"


def tuned_choices(args):
    """{variable: (value or None, why)} for a --tuned run with these arguments."""
    flags = cpu_flags()
    return {"OPENBLAS_CORETYPE": chosen("OPENBLAS_CORETYPE", args.coretype, flags),
            "ATEN_CPU_CAPABILITY": chosen("ATEN_CPU_CAPABILITY", args.aten_isa, flags)}


def ensure_tuned_env(threads, choices):
    """Re-executes this script with the tuned environment unless it is already in force.
    OpenBLAS reads OPENBLAS_CORETYPE when it is loaded and ATen ATEN_CPU_CAPABILITY when
    torch is imported, so they, too, are set by re-executing. A value of the caller's that
    differs is replaced, and said on stderr."""
    want = tuned_env(threads)
    missing = [p for p in want["LD_PRELOAD"].split(":") if not os.path.exists(p)]
    if missing:
        sys.exit(f"bench.py --tuned: {' '.join(missing)} missing: run scripts/deps.sh torchbench")
    if (all(os.environ.get(k) == v for k, v in want.items()) and
            all(os.environ.get(k) == v for k, (v, _) in choices.items())):
        return
    if os.environ.get("GOTRON_BENCH_REEXEC"):
        sys.exit("bench.py --tuned: the environment did not take effect after re-executing")
    env = dict(os.environ, GOTRON_BENCH_REEXEC="1", **want)
    for k, (v, why) in choices.items():
        have = env.pop(k, None)
        if have is not None and have != v:
            print(f"bench.py --tuned: the environment's {k}={have} replaced by "
                  f"{v or 'nothing (unset)'}, from {why}", file=sys.stderr, flush=True)
        if v:
            env[k] = v
    os.execve(sys.executable, [sys.executable] + sys.argv, env)


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--configs", default="small,medium")
    ap.add_argument("--tuned", action="store_true",
                    help="OpenMP OpenBLAS, jemalloc without page decay, the thread counts, and "
                         "OpenBLAS's core type and ATen's ISA for the CPU's features, set before "
                         "start-up (re-executes itself with them when needed)")
    ap.add_argument("--bf16", action="store_true",
                    help="the forward pass under torch.autocast('cpu', dtype=torch.bfloat16): "
                         "float32 weights, gradients and AdamW, bf16 GEMMs on oneDNN")
    ap.add_argument("--coretype", default="",
                    help="with --tuned, this OPENBLAS_CORETYPE instead of the one the CPU's "
                         "features choose (auto: unset, OpenBLAS picks by itself)")
    ap.add_argument("--aten-isa", default="",
                    help="with --tuned, this ATEN_CPU_CAPABILITY (avx512, avx2, default) instead "
                         "of the one the CPU's features choose (auto: unset, ATen picks by itself)")
    ap.add_argument("--print-coretype", action="store_true",
                    help="print the OPENBLAS_CORETYPE --tuned sets on this CPU (empty: unset) and exit")
    ap.add_argument("--print-aten-isa", action="store_true",
                    help="print the ATEN_CPU_CAPABILITY --tuned sets on this CPU (empty: unset) and exit")
    return ap.parse_args()


ARGS = parse_args() if __name__ == "__main__" else None
if ARGS is not None and (ARGS.print_coretype or ARGS.print_aten_isa):
    choices = tuned_choices(ARGS)
    var = "OPENBLAS_CORETYPE" if ARGS.print_coretype else "ATEN_CPU_CAPABILITY"
    print(choices[var][0] or "")
    sys.exit(0)
CHOICES = tuned_choices(ARGS) if ARGS is not None and ARGS.tuned else None
if CHOICES is not None:
    ensure_tuned_env(ARGS.threads, CHOICES)  # before torch is imported: torch loads BLAS and OpenMP

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


def run(name, c, iters, bf16=False):
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
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
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


ONEDNN_ISA = {0x0: "all", 0x1: "sse41", 0x3: "avx", 0x7: "avx2", 0xf: "avx512_mic", 0x1f: "avx512_mic_4ops",
              0x27: "avx512_core", 0x67: "avx512_core_vnni", 0xe7: "avx512_core_bf16",
              0x3e7: "avx512_core_amx", 0x407: "avx2_vnni"}


def onednn_info():
    """oneDNN's version and the widest ISA it may use here (the CPU's, capped by
    ONEDNN_MAX_CPU_ISA): under bf16 autocast ATen's matmuls run on it."""
    if not torch.backends.mkldnn.is_available():
        return "not built in"
    try:
        lib = ctypes.CDLL("libdnnl.so.2", mode=os.RTLD_NOLOAD | os.RTLD_LAZY)
    except OSError:
        return "built in"

    class Version(ctypes.Structure):
        _fields_ = [("major", ctypes.c_int), ("minor", ctypes.c_int), ("patch", ctypes.c_int),
                    ("hash", ctypes.c_char_p), ("cpu_runtime", ctypes.c_uint), ("gpu_runtime", ctypes.c_uint)]

    lib.dnnl_version.restype = ctypes.POINTER(Version)
    v = lib.dnnl_version().contents
    isa = lib.dnnl_get_effective_cpu_isa()
    enabled = "" if torch.backends.mkldnn.enabled else ", torch.backends.mkldnn disabled"
    return f"{v.major}.{v.minor}.{v.patch} (ISA {ONEDNN_ISA.get(isa, hex(isa))}{enabled})"


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
    def var(k):
        why = f" ({CHOICES[k][1]})" if CHOICES and k in CHOICES else ""
        return f"{k}={os.environ.get(k, 'unset')}{why}"

    env = " ".join(var(k) for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS",
                                    "MKL_NUM_THREADS", "OPENBLAS_CORETYPE", "ATEN_CPU_CAPABILITY"))
    mode = "bf16 autocast (fp32 weights and AdamW)" if args.bf16 else "fp32"
    return (f"pytorch {torch.__version__} {'tuned' if args.tuned else 'untuned'}: "
            f"{torch.get_num_threads()} thread(s) (interop {torch.get_num_interop_threads()}), {mode}, "
            f"ATen {cap}; BLAS {blas_info(maps)}; oneDNN {onednn_info()}; {malloc_info(maps)}; {env}")


def main(args):
    torch.set_num_threads(args.threads)
    print(header(args), flush=True)
    print(f"{'config':<8} {'layers':>7} {'hidden':>7} {'heads':>6} {'seq':>5} {'vocab':>6} {'micro':>5} "
          f"{'tokens/s':>12} {'GFLOP/s':>10} {'step ms':>10} {'peak MiB':>9}")
    for name in args.configs.split(","):
        run(name, CONFIGS[name], args.iters, args.bf16)


if __name__ == "__main__":
    sys.exit(main(ARGS))
