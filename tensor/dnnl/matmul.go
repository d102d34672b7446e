//go:build cgo && !gotron_purego

package dnnl

/*
#cgo LDFLAGS: -ldnnl -lgomp
#include <stdint.h>
#include <stdlib.h>
#include <pthread.h>
#include <omp.h>
#include <oneapi/dnnl/dnnl.h>
#include <oneapi/dnnl/dnnl_debug.h>

// gt_gemm is one cached GEMM: the primitive, the descriptors of A, B and C
// that executions wrap the caller's pointers in, and the scratchpad it needs.
typedef struct {
	dnnl_primitive_t prim;
	dnnl_memory_desc_t a, b, c, scratch;
	size_t scratch_size;
} gt_gemm;

// gt_thread is one OS thread's stream and scratchpad buffer.
typedef struct {
	dnnl_stream_t stream;
	void *scratch;
	size_t scratch_size;
} gt_thread;

static dnnl_engine_t gt_engine;
static pthread_key_t gt_key;

static void gt_thread_free(void *p) {
	gt_thread *t = p;
	if (t->stream) dnnl_stream_destroy(t->stream);
	free(t->scratch);
	free(t);
}

// GT_TRY runs a oneDNN call; on failure it records the call's name and jumps
// to the cleanup at done.
#define GT_TRY(fn, args) do { \
	st = fn args; \
	if (st != dnnl_success) { *where = #fn; goto done; } \
} while (0)

// GT_FAIL records a failure outside oneDNN as the given status.
#define GT_FAIL(name, status) do { st = (status); *where = (name); goto done; } while (0)

// gt_init creates the CPU engine and the key of the per-thread state.
static dnnl_status_t gt_init(const char **where) {
	dnnl_status_t st = dnnl_success;
	if (pthread_key_create(&gt_key, gt_thread_free) != 0) GT_FAIL("pthread_key_create", dnnl_runtime_error);
	GT_TRY(dnnl_engine_create, (&gt_engine, dnnl_cpu, 0));
done:
	return st;
}

// gt_bf16 reports whether oneDNN dispatches to AVX-512 BF16 on this CPU.
static int gt_bf16(void) {
	return (dnnl_get_effective_cpu_isa() & dnnl_cpu_isa_avx512_core_bf16) == dnnl_cpu_isa_avx512_core_bf16;
}

// gt_threads sets the calling OS thread's OpenMP thread count, which oneDNN
// reads when it creates and runs a primitive.
static void gt_threads(int n) {
	if (omp_get_max_threads() != n) omp_set_num_threads(n);
}

// gt_create builds the row-major GEMM C[m×n] = alpha·op(A)·op(B) + beta·C:
// A and B f32 (f32 set) or bf16, C f32, with the transposes and leading
// dimensions as strides.
static dnnl_status_t gt_create(int64_t m, int64_t n, int64_t k, int ta, int tb,
		int64_t lda, int64_t ldb, int64_t ldc, float alpha, float beta, int nthr, int f32,
		gt_gemm **out, const char **where) {
	dnnl_status_t st = dnnl_success;
	dnnl_primitive_attr_t attr = NULL;
	dnnl_post_ops_t po = NULL;
	dnnl_primitive_desc_t pd = NULL;
	dnnl_matmul_desc_t md;
	gt_gemm *g = calloc(1, sizeof *g);
	if (!g) GT_FAIL("calloc", dnnl_out_of_memory);
	dnnl_dims_t ad = {m, k}, bd = {k, n}, cd = {m, n};
	dnnl_dims_t as = {lda, 1}, bs = {ldb, 1}, cs = {ldc, 1};
	if (ta) { as[0] = 1; as[1] = lda; }
	if (tb) { bs[0] = 1; bs[1] = ldb; }
	gt_threads(nthr);
	dnnl_data_type_t src = f32 ? dnnl_f32 : dnnl_bf16;
	GT_TRY(dnnl_memory_desc_init_by_strides, (&g->a, 2, ad, src, as));
	GT_TRY(dnnl_memory_desc_init_by_strides, (&g->b, 2, bd, src, bs));
	GT_TRY(dnnl_memory_desc_init_by_strides, (&g->c, 2, cd, dnnl_f32, cs));
	GT_TRY(dnnl_matmul_desc_init, (&md, &g->a, &g->b, NULL, &g->c));
	GT_TRY(dnnl_primitive_attr_create, (&attr));
	GT_TRY(dnnl_primitive_attr_set_scratchpad_mode, (attr, dnnl_scratchpad_mode_user));
	if (alpha != 1) GT_TRY(dnnl_primitive_attr_set_output_scales, (attr, 1, 0, &alpha));
	if (beta != 0) {
		GT_TRY(dnnl_post_ops_create, (&po));
		GT_TRY(dnnl_post_ops_append_sum, (po, beta));
		GT_TRY(dnnl_primitive_attr_set_post_ops, (attr, po));
	}
	GT_TRY(dnnl_primitive_desc_create, (&pd, &md, attr, gt_engine, NULL));
	const dnnl_memory_desc_t *sm = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
	if (sm) {
		g->scratch = *sm;
		g->scratch_size = dnnl_memory_desc_get_size(sm);
	}
	GT_TRY(dnnl_primitive_create, (&g->prim, pd));
done:
	if (pd) dnnl_primitive_desc_destroy(pd);
	if (po) dnnl_post_ops_destroy(po);
	if (attr) dnnl_primitive_attr_destroy(attr);
	if (st != dnnl_success) {
		free(g);
		g = NULL;
	}
	*out = g;
	return st;
}

static void gt_destroy(gt_gemm *g) {
	dnnl_primitive_destroy(g->prim);
	free(g);
}

// gt_exec runs g on the caller's buffers with nthr OpenMP threads, on the
// calling OS thread's stream and scratchpad, and waits for it.
static dnnl_status_t gt_exec(const gt_gemm *g, void *a, void *b, void *c, int nthr, const char **where) {
	dnnl_status_t st = dnnl_success;
	dnnl_memory_t ma = NULL, mb = NULL, mc = NULL, ms = NULL;
	gt_thread *t = pthread_getspecific(gt_key);
	if (!t) {
		t = calloc(1, sizeof *t);
		if (!t) GT_FAIL("calloc", dnnl_out_of_memory);
		if (pthread_setspecific(gt_key, t) != 0) {
			free(t);
			GT_FAIL("pthread_setspecific", dnnl_runtime_error);
		}
	}
	if (!t->stream) GT_TRY(dnnl_stream_create, (&t->stream, gt_engine, dnnl_stream_default_flags));
	if (t->scratch_size < g->scratch_size) {
		size_t size = (g->scratch_size + 63) & ~(size_t)63;
		free(t->scratch);
		t->scratch = aligned_alloc(64, size);
		t->scratch_size = t->scratch ? size : 0;
		if (!t->scratch) GT_FAIL("aligned_alloc", dnnl_out_of_memory);
	}
	gt_threads(nthr);
	GT_TRY(dnnl_memory_create, (&ma, &g->a, gt_engine, a));
	GT_TRY(dnnl_memory_create, (&mb, &g->b, gt_engine, b));
	GT_TRY(dnnl_memory_create, (&mc, &g->c, gt_engine, c));
	dnnl_exec_arg_t args[4] = {
		{DNNL_ARG_SRC, ma}, {DNNL_ARG_WEIGHTS, mb}, {DNNL_ARG_DST, mc}, {DNNL_ARG_SCRATCHPAD, NULL},
	};
	int nargs = 3;
	if (g->scratch_size) {
		GT_TRY(dnnl_memory_create, (&ms, &g->scratch, gt_engine, t->scratch));
		args[3].memory = ms;
		nargs = 4;
	}
	GT_TRY(dnnl_primitive_execute, (g->prim, t->stream, nargs, args));
	GT_TRY(dnnl_stream_wait, (t->stream));
done:
	if (ms) dnnl_memory_destroy(ms);
	if (mc) dnnl_memory_destroy(mc);
	if (mb) dnnl_memory_destroy(mb);
	if (ma) dnnl_memory_destroy(ma);
	return st;
}
*/
import "C"

import (
	"fmt"
	"math"
	"sync"
	"unsafe"

	"github.com/gotron/gotron/tensor/blas"
)

// key names one cached primitive.
type key struct {
	m, n, k, lda, ldb, ldc int
	transA, transB         bool
	alpha, beta            uint32 // float32 bits
	threads                int    // OpenMP threads
	f32                    bool   // float32 A and B, else bfloat16
}

var (
	cache = struct {
		sync.RWMutex
		m map[key]*C.gt_gemm
	}{m: map[key]*C.gt_gemm{}}

	engineErr = sync.OnceValue(func() error {
		var where *C.char
		return statusErr(C.gt_init(&where), where)
	})
	native = sync.OnceValue(func() bool {
		return engineErr() == nil && C.gt_bf16() != 0
	})
)

// statusErr turns a oneDNN status into nil or an error naming the failed
// call.
func statusErr(st C.dnnl_status_t, where *C.char) error {
	if st == C.dnnl_success {
		return nil
	}
	return fmt.Errorf("dnnl: %s: %s (status %d)", C.GoString(where), C.GoString(C.dnnl_status2str(st)), int(st))
}

// Available reports whether GemmBF16 runs on oneDNN, which needs a CPU with
// AVX-512 BF16 (oneDNN's effective ISA). When it is false GemmBF16 widens to
// float32 and calls blas.Sgemm.
func Available() bool { return native() }

// F32 reports whether GemmF32 runs on oneDNN (this build links it and its
// CPU engine starts); when it is false GemmF32 calls blas.Sgemm.
func F32() bool { return engineErr() == nil }

// Version names the library behind the GEMMs and the instruction set it
// dispatches to, for example "oneDNN 2.6.3 (avx512_core_bf16)".
func Version() string {
	if engineErr() != nil {
		return "oneDNN unavailable: " + engineErr().Error()
	}
	v := C.dnnl_version()
	return fmt.Sprintf("oneDNN %d.%d.%d (%s)", int(v.major), int(v.minor), int(v.patch), isaName(C.dnnl_get_effective_cpu_isa()))
}

// isaName names a oneDNN CPU ISA.
func isaName(isa C.dnnl_cpu_isa_t) string {
	switch isa {
	case C.dnnl_cpu_isa_sse41:
		return "sse41"
	case C.dnnl_cpu_isa_avx:
		return "avx"
	case C.dnnl_cpu_isa_avx2:
		return "avx2"
	case C.dnnl_cpu_isa_avx2_vnni:
		return "avx2_vnni"
	case C.dnnl_cpu_isa_avx512_core:
		return "avx512_core"
	case C.dnnl_cpu_isa_avx512_core_vnni:
		return "avx512_core_vnni"
	case C.dnnl_cpu_isa_avx512_core_bf16:
		return "avx512_core_bf16"
	case C.dnnl_cpu_isa_avx512_core_amx:
		return "avx512_core_amx"
	}
	return fmt.Sprintf("isa %#x", int(isa))
}

// gemm is GemmBF16 on checked arguments with m, n, k ≥ 1 and alpha ≠ 0.
func gemm(transA, transB bool, m, n, k int, alpha float32, a []uint16, lda int, b []uint16, ldb int, beta float32, c []float32, ldc int, threads int) error {
	if !native() {
		if err := engineErr(); err != nil {
			return err
		}
		return gemmWidened(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, threads)
	}
	return run(key{m, n, k, lda, ldb, ldc, transA, transB, math.Float32bits(alpha), math.Float32bits(beta), threads, false},
		unsafe.Pointer(&a[0]), unsafe.Pointer(&b[0]), unsafe.Pointer(&c[0]))
}

// gemmF32 is GemmF32 on checked arguments with m, n, k ≥ 1 and alpha ≠ 0.
func gemmF32(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int, threads int) error {
	if !F32() {
		blas.Sgemm(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
		return nil
	}
	return run(key{m, n, k, lda, ldb, ldc, transA, transB, math.Float32bits(alpha), math.Float32bits(beta), threads, true},
		unsafe.Pointer(&a[0]), unsafe.Pointer(&b[0]), unsafe.Pointer(&c[0]))
}

// run executes the cached primitive for kk on a, b and c.
func run(kk key, a, b, c unsafe.Pointer) error {
	g, err := primitive(kk)
	if err != nil {
		return err
	}
	var where *C.char
	st := C.gt_exec(g, a, b, c, C.int(kk.threads), &where)
	return statusErr(st, where)
}

// primitive returns the cached primitive for kk, creating it on first use.
// Two goroutines missing at once both create one; the loser's is destroyed.
func primitive(kk key) (*C.gt_gemm, error) {
	cache.RLock()
	g := cache.m[kk]
	cache.RUnlock()
	if g != nil {
		return g, nil
	}
	var where *C.char
	st := C.gt_create(C.int64_t(kk.m), C.int64_t(kk.n), C.int64_t(kk.k), cBool(kk.transA), cBool(kk.transB),
		C.int64_t(kk.lda), C.int64_t(kk.ldb), C.int64_t(kk.ldc),
		C.float(math.Float32frombits(kk.alpha)), C.float(math.Float32frombits(kk.beta)), C.int(kk.threads), cBool(kk.f32), &g, &where)
	if err := statusErr(st, where); err != nil {
		return nil, err
	}
	cache.Lock()
	defer cache.Unlock()
	if old := cache.m[kk]; old != nil {
		C.gt_destroy(g)
		return old, nil
	}
	cache.m[kk] = g
	return g, nil
}

func cBool(b bool) C.int {
	if b {
		return 1
	}
	return 0
}
