//go:build mpi

package mpi

/*
#cgo pkg-config: ompi-c
#include <stdlib.h>
#include <string.h>
#include <mpi.h>

// Element type codes shared with Go (see mpiType in mem.go).
enum { GT_BYTE = 0, GT_F32 = 1, GT_U16 = 2, GT_I64 = 3 };

static MPI_Datatype gt_type(int code) {
	switch (code) {
	case GT_F32: return MPI_FLOAT;
	case GT_U16: return MPI_UINT16_T;
	case GT_I64: return MPI_INT64_T;
	}
	return MPI_BYTE;
}

// gt_init initialises MPI with MPI_THREAD_MULTIPLE unless it already is,
// and reports the thread level the library gives.
static int gt_init(int *provided) {
	int inited = 0, finalized = 0;
	MPI_Finalized(&finalized);
	if (finalized) return -1;
	MPI_Initialized(&inited);
	if (inited) return MPI_Query_thread(provided);
	int rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_MULTIPLE, provided);
	if (rc != MPI_SUCCESS) return rc;
	return MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
}

// gt_state returns 1 when MPI is initialised and 2 when it is finalised.
static int gt_state(void) {
	int i = 0, f = 0;
	MPI_Initialized(&i);
	MPI_Finalized(&f);
	return f ? 2 : i;
}

static int gt_finalize(void) { return MPI_Finalize(); }
static void gt_abort(int code) { MPI_Abort(MPI_COMM_WORLD, code); }

static MPI_Comm gt_world(void) { return MPI_COMM_WORLD; }
static int gt_dup_world(MPI_Comm *out) { return MPI_Comm_dup(MPI_COMM_WORLD, out); }
static int gt_dup(MPI_Comm c, MPI_Comm *out) { return MPI_Comm_dup(c, out); }
static int gt_split(MPI_Comm c, int color, int key, MPI_Comm *out) {
	return MPI_Comm_split(c, color < 0 ? MPI_UNDEFINED : color, key, out);
}
static int gt_is_null(MPI_Comm c) { return c == MPI_COMM_NULL; }
static int gt_free(MPI_Comm c) { return MPI_Comm_free(&c); }
static int gt_rank_size(MPI_Comm c, int *rank, int *size) {
	int rc = MPI_Comm_rank(c, rank);
	if (rc != MPI_SUCCESS) return rc;
	return MPI_Comm_size(c, size);
}
// gt_local_size sets *n to the number of processes of c on this node.
static int gt_local_size(MPI_Comm c, int *n) {
	MPI_Comm local;
	int rc = MPI_Comm_split_type(c, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local);
	if (rc != MPI_SUCCESS) return rc;
	rc = MPI_Comm_size(local, n);
	MPI_Comm_free(&local);
	return rc;
}
static int gt_tag_ub(int *ub) {
	int *v = NULL, flag = 0;
	int rc = MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &v, &flag);
	*ub = (rc == MPI_SUCCESS && flag) ? *v : 32767;
	return rc;
}
static void gt_error_string(int code, char *buf, int cap) {
	int n = 0;
	if (MPI_Error_string(code, buf, &n) != MPI_SUCCESS) n = 0;
	buf[n < cap ? n : cap - 1] = 0;
}
static int gt_error_class(int code) {
	int cls = code;
	MPI_Error_class(code, &cls);
	return cls;
}
static int gt_err_truncate(void) { return MPI_ERR_TRUNCATE; }
static int gt_thread_multiple(void) { return MPI_THREAD_MULTIPLE; }

// gt_status is what gt_test reports: done is 1 once the request has
// completed, and src, tag and nbytes then describe the message (for
// receives). It lives in the Go request, so that a poll allocates nothing.
typedef struct { int done, src, tag, nbytes; } gt_status;

// gt_test tests one request.
static int gt_test(MPI_Request *r, gt_status *s) {
	MPI_Status st;
	memset(&st, 0, sizeof st);
	st.MPI_TAG = -1;
	s->done = 0;
	int rc = MPI_Test(r, &s->done, &st);
	if (rc != MPI_SUCCESS) s->done = 1;
	if (s->done) {
		s->src = st.MPI_SOURCE;
		s->tag = st.MPI_TAG;
		MPI_Get_count(&st, MPI_BYTE, &s->nbytes);
	}
	return rc;
}

static int gt_cancel_wait(MPI_Request *r) {
	if (*r == MPI_REQUEST_NULL) return MPI_SUCCESS;
	MPI_Cancel(r);
	return MPI_Wait(r, MPI_STATUS_IGNORE);
}

static MPI_Request gt_null_request(void) { return MPI_REQUEST_NULL; }

// Nonblocking operations. A NULL send buffer means MPI_IN_PLACE.
static int gt_iallgather(void *s, int sc, void *r, int rc, int dt, MPI_Comm c, MPI_Request *q) {
	return MPI_Iallgather(s ? s : MPI_IN_PLACE, sc, gt_type(dt), r, rc, gt_type(dt), c, q);
}
static int gt_iallgatherv(void *s, int sc, void *r, const int *counts, const int *displs, int dt, MPI_Comm c, MPI_Request *q) {
	return MPI_Iallgatherv(s ? s : MPI_IN_PLACE, sc, gt_type(dt), r, counts, displs, gt_type(dt), c, q);
}
static int gt_ialltoall(void *s, int sc, void *r, int rc, int dt, MPI_Comm c, MPI_Request *q) {
	return MPI_Ialltoall(s, sc, gt_type(dt), r, rc, gt_type(dt), c, q);
}
static int gt_ialltoallv(void *s, const int *sc, const int *sd, void *r, const int *rc, const int *rd, int dt, MPI_Comm c, MPI_Request *q) {
	return MPI_Ialltoallv(s, sc, sd, gt_type(dt), r, rc, rd, gt_type(dt), c, q);
}
static int gt_ibcast(void *b, int n, int dt, int root, MPI_Comm c, MPI_Request *q) {
	return MPI_Ibcast(b, n, gt_type(dt), root, c, q);
}
static int gt_iallreduce_sum(void *b, int n, int dt, MPI_Comm c, MPI_Request *q) {
	return MPI_Iallreduce(MPI_IN_PLACE, b, n, gt_type(dt), MPI_SUM, c, q);
}
static int gt_isend(void *b, int n, int dt, int dst, int tag, MPI_Comm c, MPI_Request *q) {
	return MPI_Isend(b, n, gt_type(dt), dst, tag, c, q);
}
static int gt_irecv(void *b, int n, int dt, int src, int tag, MPI_Comm c, MPI_Request *q) {
	return MPI_Irecv(b, n, gt_type(dt), src < 0 ? MPI_ANY_SOURCE : src, tag < 0 ? MPI_ANY_TAG : tag, c, q);
}
static int gt_improbe(int src, int tag, MPI_Comm c, int *flag, MPI_Message *m, int *nbytes) {
	MPI_Status st;
	int rc = MPI_Improbe(src, tag, c, flag, m, &st);
	if (rc == MPI_SUCCESS && *flag) MPI_Get_count(&st, MPI_BYTE, nbytes);
	return rc;
}
static int gt_imrecv(void *b, int n, MPI_Message *m, MPI_Request *q) {
	return MPI_Imrecv(b, n, MPI_BYTE, m, q);
}
*/
import "C"

import (
	"fmt"
	"unsafe"
)

// This file is gotron's whole binding to Open MPI: thin wrappers that turn
// return codes into errors. Handles (MPI_Comm, MPI_Request) are C pointers
// held in Go values; buffers are C memory or pinned Go memory (mem.go).

// mpiComm is a communicator handle.
type mpiComm = C.MPI_Comm

// Element type codes, as in the C preamble.
const (
	tByte = C.GT_BYTE
	tF32  = C.GT_F32
	tU16  = C.GT_U16
	tI64  = C.GT_I64
)

// mpiError is an error code returned by an MPI call.
type mpiError struct {
	call string
	code int
}

func (e *mpiError) Error() string {
	var buf [C.MPI_MAX_ERROR_STRING + 1]C.char
	C.gt_error_string(C.int(e.code), &buf[0], C.int(len(buf)))
	return fmt.Sprintf("mpi: %s: %s (error code %d)", e.call, C.GoString(&buf[0]), e.code)
}

// truncated reports whether err is MPI_ERR_TRUNCATE: a message longer than
// the receive buffer.
func truncated(err error) bool {
	e, ok := err.(*mpiError)
	return ok && int(C.gt_error_class(C.int(e.code))) == int(C.gt_err_truncate())
}

func check(call string, rc C.int) error {
	if rc == C.MPI_SUCCESS {
		return nil
	}
	return &mpiError{call: call, code: int(rc)}
}

// initThreadMultiple initialises MPI (unless it is already) and checks that
// the library gives MPI_THREAD_MULTIPLE.
func initThreadMultiple() error {
	var provided C.int
	rc := C.gt_init(&provided)
	if rc == -1 {
		return fmt.Errorf("mpi: MPI has already been finalised in this process; it cannot be initialised again")
	}
	if err := check("MPI_Init_thread", rc); err != nil {
		return err
	}
	if provided < C.gt_thread_multiple() {
		return fmt.Errorf("mpi: the MPI library gives thread level %d, gotron needs MPI_THREAD_MULTIPLE (%d) because goroutines call MPI concurrently; use an Open MPI built with thread support (Debian's libopenmpi-dev is)",
			int(provided), int(C.gt_thread_multiple()))
	}
	return nil
}

func mpiInitialized() bool { return C.gt_state() == 1 }

func mpiFinalize() error { return check("MPI_Finalize", C.gt_finalize()) }

func mpiAbort(code int) { C.gt_abort(C.int(code)) }

func dupWorld() (mpiComm, error) {
	var c mpiComm
	return c, check("MPI_Comm_dup", C.gt_dup_world(&c))
}

func dupComm(c mpiComm) (mpiComm, error) {
	var out mpiComm
	return out, check("MPI_Comm_dup", C.gt_dup(c, &out))
}

// splitComm is MPI_Comm_split; color < 0 is MPI_UNDEFINED, and the result
// is then nil with ok false.
func splitComm(c mpiComm, color, key int) (out mpiComm, ok bool, err error) {
	if err := check("MPI_Comm_split", C.gt_split(c, C.int(color), C.int(key), &out)); err != nil {
		return out, false, err
	}
	return out, C.gt_is_null(out) == 0, nil
}

// worldRankSize returns this process's rank and the number of processes in
// MPI_COMM_WORLD.
func worldRankSize() (rank, size int, err error) { return rankSize(C.gt_world()) }

func freeComm(c mpiComm) error { return check("MPI_Comm_free", C.gt_free(c)) }

func rankSize(c mpiComm) (rank, size int, err error) {
	var r, s C.int
	err = check("MPI_Comm_rank", C.gt_rank_size(c, &r, &s))
	return int(r), int(s), err
}

// localSize returns the number of processes of c on this node (a
// collective over c: MPI_Comm_split_type with MPI_COMM_TYPE_SHARED).
func localSize(c mpiComm) (int, error) {
	var n C.int
	err := check("MPI_Comm_split_type", C.gt_local_size(c, &n))
	return int(n), err
}

func tagUB() int {
	var ub C.int
	C.gt_tag_ub(&ub)
	return int(ub)
}

// request is a nonblocking operation's handle.
type request struct {
	r    C.MPI_Request
	st   C.gt_status // gt_test's report
	done bool
	// Filled when done, for receives.
	src, tag, nbytes int
	err              error
}

// test reports whether the request has completed, and its error.
func (q *request) test(call string) (bool, error) {
	if q.done {
		return true, q.err
	}
	rc := C.gt_test(&q.r, &q.st)
	if q.st.done == 0 {
		return false, nil
	}
	q.done, q.src, q.tag, q.nbytes = true, int(q.st.src), int(q.st.tag), int(q.st.nbytes)
	q.err = check(call, rc)
	return true, q.err
}

// cancel cancels a pending receive and waits for it.
func (q *request) cancel() {
	if !q.done {
		C.gt_cancel_wait(&q.r)
		q.done = true
	}
}

// posted returns the error of posting q; a request that was not posted
// counts as done.
func posted(q *request, call string, rc C.int) error {
	err := check(call, rc)
	if err != nil {
		q.done, q.err = true, err
	}
	return err
}

func iallgather(send unsafe.Pointer, sc int, recv unsafe.Pointer, rc int, dt C.int, c mpiComm, q *request) error {
	return posted(q, "MPI_Iallgather", C.gt_iallgather(send, C.int(sc), recv, C.int(rc), dt, c, &q.r))
}

func iallgatherv(send unsafe.Pointer, sc int, recv unsafe.Pointer, counts, displs *C.int, dt C.int, c mpiComm, q *request) error {
	return posted(q, "MPI_Iallgatherv", C.gt_iallgatherv(send, C.int(sc), recv, counts, displs, dt, c, &q.r))
}

func ialltoall(send unsafe.Pointer, sc int, recv unsafe.Pointer, rc int, dt C.int, c mpiComm, q *request) error {
	return posted(q, "MPI_Ialltoall", C.gt_ialltoall(send, C.int(sc), recv, C.int(rc), dt, c, &q.r))
}

func ialltoallv(send unsafe.Pointer, sc, sd *C.int, recv unsafe.Pointer, rc, rd *C.int, dt C.int, c mpiComm, q *request) error {
	return posted(q, "MPI_Ialltoallv", C.gt_ialltoallv(send, sc, sd, recv, rc, rd, dt, c, &q.r))
}

func ibcast(buf unsafe.Pointer, n int, dt C.int, root int, c mpiComm, q *request) error {
	return posted(q, "MPI_Ibcast", C.gt_ibcast(buf, C.int(n), dt, C.int(root), c, &q.r))
}

func iallreduceSum(buf unsafe.Pointer, n int, dt C.int, c mpiComm, q *request) error {
	return posted(q, "MPI_Iallreduce", C.gt_iallreduce_sum(buf, C.int(n), dt, c, &q.r))
}

func isend(buf unsafe.Pointer, n int, dt C.int, dst, tag int, c mpiComm, q *request) error {
	return posted(q, "MPI_Isend", C.gt_isend(buf, C.int(n), dt, C.int(dst), C.int(tag), c, &q.r))
}

// irecv posts a receive; src < 0 is MPI_ANY_SOURCE and tag < 0 MPI_ANY_TAG.
func irecv(buf unsafe.Pointer, n int, dt C.int, src, tag int, c mpiComm, q *request) error {
	return posted(q, "MPI_Irecv", C.gt_irecv(buf, C.int(n), dt, C.int(src), C.int(tag), c, &q.r))
}

// probedMessage is a message matched by improbe, to be received by imrecv.
type probedMessage struct {
	m      C.MPI_Message
	nbytes int
}

// improbe matches the next message from src with tag, if one has arrived.
func improbe(src, tag int, c mpiComm) (msg probedMessage, ok bool, err error) {
	var flag, nbytes C.int
	err = check("MPI_Improbe", C.gt_improbe(C.int(src), C.int(tag), c, &flag, &msg.m, &nbytes))
	msg.nbytes = int(nbytes)
	return msg, flag != 0, err
}

// imrecv receives a probed message into buf (msg.nbytes bytes).
func imrecv(buf unsafe.Pointer, msg *probedMessage, q *request) error {
	return posted(q, "MPI_Imrecv", C.gt_imrecv(buf, C.int(msg.nbytes), &msg.m, &q.r))
}
