/*
 * comm_mpi.c — the MPI communicator, and the only file of dtnn that includes mpi.h. Built when
 * CMake finds MPI (Open MPI by default, MPICH with -DDTNN_MPI_VENDOR=mpich); without it,
 * comm_mpi_create returns NULL and every run is a single process.
 *
 * MPI is initialised only when the process was started by an MPI launcher (mpirun, mpiexec,
 * srun: their environment variables tell), so a plain `dtnn train` never pays for MPI start-up.
 * All calls come from the main thread (MPI_THREAD_FUNNELED; OpenMP threads never call MPI).
 * Half-precision gradients are summed by user-defined MPI operations that widen to float.
 * Errors come back as dtnn_status with the MPI error string; MPI_ERRORS_RETURN is set so MPI
 * does not abort behind the caller's back.
 */
#include <stdlib.h>
#include <string.h>

#include "comm_internal.h"
#include "launch.h"

#ifndef DTNN_HAVE_MPI

dtnn_comm *comm_mpi_create(int *argc, char ***argv, dtnn_error *err)
{
    (void)argc, (void)argv, (void)err;
    return NULL;
}

#else

#include <mpi.h>

#include "../core/trace.h"
#include "../core/half.h"

/* What a rank answers a stall query: how many collectives it has started, the one it is
 * waiting in (-1: none, it is computing between progress calls), its training step, and what
 * that collective is for ("gradient bucket 3 of 8: MPI_Iallreduce"). */
typedef struct {
    long started, waiting;
    int64_t step;
    char label[80];
} stall_answer;

typedef struct {
    MPI_Comm world, node, leaders;      /* leaders: MPI_COMM_NULL on non-leaders */
    MPI_Comm stall;                     /* the stall queries and answers, apart from the data */
    MPI_Op sum_f16, sum_bf16;
    MPI_Request requests[COMM_MAX_REQUESTS];
    long request_seq[COMM_MAX_REQUESTS];
    int next_request;
    long started;                       /* collectives on world this rank has started */
    long waiting;                       /* the collective it waits in, or -1 */
    char waiting_label[80];             /* and what that collective is for */
    stall_answer query;                 /* the buffer of this rank's stall queries */
    /* per request in flight: what it is for and when it started (traces) */
    comm_purpose request_purpose[COMM_MAX_REQUESTS];
    double request_t0[COMM_MAX_REQUESTS];
    int64_t request_step[COMM_MAX_REQUESTS];
    int initialised_here;
} mpi_impl;

static dtnn_status mpi_check(int rc, const char *what, dtnn_comm *c, dtnn_error *err)
{
    if (rc == MPI_SUCCESS)
        return DTNN_OK;
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, text, &len);
    return dtnn_error_set(err, DTNN_ERR_COMM, "rank %d: %s failed: %s", c->rank, what, text);
}

/*
 * Stall detection (--stall-timeout). Every collective on world gets a sequence number, the
 * same on every rank because all ranks run the same program. With a timeout set, collectives
 * are started non-blocking and polled; while polling, a rank answers the stall queries of
 * others with how many collectives it has started. A rank whose wait passes the timeout asks
 * every other rank, collects answers for a short grace period, and names the ranks that have
 * not started the collective it waits in, or that did not answer at all (stopped, dead, or
 * computing outside MPI). Queries are only ever sent on that failure path, so a healthy run
 * exchanges no extra messages.
 */
enum { TAG_STALL_QUERY = 1, TAG_STALL_ANSWER = 2 };

/* Answers pending stall queries; with drain, also discards answers that arrived after their
 * asker's collective completed after all (never while that asker is still collecting them). */
static void answer_stall_queries(dtnn_comm *c, int drain)
{
    mpi_impl *im = c->impl;
    for (;;) {
        int flag = 0;
        MPI_Status status;
        if (MPI_Iprobe(MPI_ANY_SOURCE, drain ? MPI_ANY_TAG : TAG_STALL_QUERY, im->stall, &flag,
                       &status) != MPI_SUCCESS || !flag)
            return;
        stall_answer msg;
        MPI_Recv(&msg, (int)sizeof msg, MPI_BYTE, status.MPI_SOURCE, status.MPI_TAG, im->stall,
                 MPI_STATUS_IGNORE);
        if (status.MPI_TAG == TAG_STALL_QUERY) {
            /* ~100 bytes go eagerly: this send does not wait for the asker. */
            stall_answer a = {im->started, im->waiting, c->step, ""};
            memcpy(a.label, im->waiting_label, sizeof a.label);
            MPI_Send(&a, (int)sizeof a, MPI_BYTE, status.MPI_SOURCE, TAG_STALL_ANSWER, im->stall);
        }
    }
}

/* Appends rank r to a space-separated list, ending it with "..." when full. */
static void list_rank(char *list, size_t size, int r)
{
    size_t len = strlen(list);
    if (len + 16 < size)
        snprintf(list + len, size - len, "%s%d", len ? " " : "", r);
    else if (!strstr(list, "..."))
        snprintf(list + len, size - len, " ...");
}

/* What answer a says of its rank, relative to the collective seq the asker waits in. */
static void describe_answer(char *out, size_t size, const stall_answer *a, long seq)
{
    if (a->waiting >= 0)
        snprintf(out, size, "wait in collective #%ld (%.*s) at step %lld%s", a->waiting,
                 (int)sizeof a->label, a->label, (long long)a->step,
                 a->waiting < seq ? ", an earlier one" : a->waiting > seq ? ", a later one" : "");
    else
        snprintf(out, size, "are computing at step %lld, %s collective #%ld", (long long)a->step,
                 a->started <= seq ? "not yet at" : "past", seq);
}

/* Groups the ranks that said the same thing: "; rank(s) 2 3 wait in collective #51 (...)". */
static void append_groups(char *detail, size_t size, const stall_answer *answers, int n,
                          int self, long seq)
{
    char *seen = calloc(n > 0 ? (size_t)n : 1, 1);
    if (!seen)
        return;
    for (int r = 0; r < n; r++) {
        if (seen[r] || r == self || answers[r].started < 0)
            continue;
        char what[200], other[200], ranks[160] = "";
        describe_answer(what, sizeof what, &answers[r], seq);
        for (int q = r; q < n; q++) {
            if (seen[q] || q == self || answers[q].started < 0)
                continue;
            describe_answer(other, sizeof other, &answers[q], seq);
            if (!strcmp(what, other)) {
                seen[q] = 1;
                list_rank(ranks, sizeof ranks, q);
            }
        }
        size_t len = strlen(detail);
        snprintf(detail + len, size - len, "; rank(s) %s %s", ranks, what);
    }
    free(seen);
}

static dtnn_status report_stall(dtnn_comm *c, MPI_Request *req, long seq, const char *label,
                                double waited, dtnn_error *err)
{
    mpi_impl *im = c->impl;
    stall_answer *answers = malloc(sizeof *answers * (size_t)c->size);
    if (!answers)
        return dtnn_error_set(err, DTNN_ERR_COMM, "rank %d: stalled %.1f s in %s", c->rank,
                              waited, label);
    memset(&im->query, 0, sizeof im->query);
    im->query.started = im->query.waiting = seq;
    for (int r = 0; r < c->size; r++) {
        answers[r].started = r == c->rank ? im->started : -1;
        answers[r].waiting = seq;
        if (r != c->rank) {
            MPI_Request q;
            MPI_Isend(&im->query, (int)sizeof im->query, MPI_BYTE, r, TAG_STALL_QUERY,
                      im->stall, &q);
            MPI_Request_free(&q);
        }
    }
    double grace = DTNN_MIN(2.0, c->stall_timeout), t0 = MPI_Wtime();
    int pending = c->size - 1, done = 0;
    while (pending > 0 && !done && MPI_Wtime() - t0 < grace) {
        int flag = 0;
        MPI_Status status;
        MPI_Iprobe(MPI_ANY_SOURCE, TAG_STALL_ANSWER, im->stall, &flag, &status);
        if (flag) {
            stall_answer a;
            MPI_Recv(&a, (int)sizeof a, MPI_BYTE, status.MPI_SOURCE, TAG_STALL_ANSWER,
                     im->stall, MPI_STATUS_IGNORE);
            if (answers[status.MPI_SOURCE].started < 0)
                pending--;
            answers[status.MPI_SOURCE] = a;
        }
        answer_stall_queries(c, 0);
        MPI_Test(req, &done, MPI_STATUS_IGNORE);
    }
    if (done) {
        /* It completed after all: slow, not stalled. Late answers are drained later. */
        free(answers);
        return DTNN_OK;
    }
    /* Silent ranks are the likely cause; each rank that answered says what it waits in (or
     * that it is computing), grouped with the ranks that said the same. */
    char silent[160] = "", detail[1200] = "";
    for (int r = 0; r < c->size; r++)
        if (answers[r].started < 0)
            list_rank(silent, sizeof silent, r);
    if (*silent)
        snprintf(detail, sizeof detail, "; rank(s) %s did not answer (stopped, dead or busy "
                 "outside MPI)", silent);
    append_groups(detail, sizeof detail, answers, c->size, c->rank, seq);
    free(answers);
    if (!*detail)
        snprintf(detail, sizeof detail, "; every rank reached it, yet it did not complete");
    return dtnn_error_set(err, DTNN_ERR_COMM, "rank %d stalled %.1f s in collective #%ld (%s) at "
                          "step %lld (--stall-timeout %g)%s", c->rank, waited, seq, label,
                          (long long)c->step, c->stall_timeout, detail);
}

/* Completes a request of collective number seq: MPI_Wait, or with a stall timeout a polling
 * loop that answers stall queries and gives up with a report after the timeout. */
static dtnn_status wait_request(dtnn_comm *c, MPI_Request *req, long seq, const char *op,
                                const comm_purpose *purpose, dtnn_error *err)
{
    mpi_impl *im = c->impl;
    char label[80];
    comm_purpose_label(label, sizeof label, purpose, op);
    if (c->stall_timeout <= 0)
        return mpi_check(MPI_Wait(req, MPI_STATUS_IGNORE), label, c, err);
    double t0 = MPI_Wtime();
    im->waiting = seq;
    memcpy(im->waiting_label, label, sizeof label);
    for (;;) {
        int done = 0;
        dtnn_status st = mpi_check(MPI_Test(req, &done, MPI_STATUS_IGNORE), label, c, err);
        if (st || done) {
            im->waiting = -1;
            return st;
        }
        answer_stall_queries(c, 1);
        double waited = MPI_Wtime() - t0;
        if (waited > c->stall_timeout)
            return report_stall(c, req, seq, label, waited, err);
    }
}

/* A blocking collective into status st: the blocking MPI call itself, or with a stall
 * timeout its non-blocking twin (started into req_) and wait_request; either way a span in
 * the trace. COLLECTIVE returns that status. */
#define COLLECTIVE_STATUS(c, st, op, blocking_call, nonblocking_call)                          \
    do {                                                                                       \
        mpi_impl *im_ = (c)->impl;                                                             \
        long seq_ = im_->started++;                                                            \
        double t0_ = trace_clock((c)->trace);                                                  \
        if ((c)->stall_timeout <= 0) {                                                         \
            (st) = mpi_check(blocking_call, op, c, err);                                       \
        } else {                                                                               \
            MPI_Request req_;                                                                  \
            (st) = mpi_check(nonblocking_call, op, c, err);                                    \
            if (!(st))                                                                         \
                (st) = wait_request(c, &req_, seq_, op, &(c)->purpose, err);                   \
        }                                                                                      \
        if ((c)->trace)                                                                        \
            trace_comm((c)->trace, TRACE_COLLECTIVE, (c)->purpose.what, op, t0_,               \
                       trace_clock((c)->trace), (c)->step, seq_, (c)->purpose.index,           \
                       (c)->purpose.count);                                                    \
    } while (0)

#define COLLECTIVE(c, op, blocking_call, nonblocking_call)                                     \
    do {                                                                                       \
        dtnn_status cst_;                                                                      \
        COLLECTIVE_STATUS(c, cst_, op, blocking_call, nonblocking_call);                       \
        return cst_;                                                                           \
    } while (0)

static void sum_f16(void *in, void *inout, int *len, MPI_Datatype *type)
{
    (void)type;
    const uint16_t *a = in;
    uint16_t *b = inout;
    for (int i = 0; i < *len; i++)
        b[i] = f32_to_f16(f16_to_f32(a[i]) + f16_to_f32(b[i]));
}

static void sum_bf16(void *in, void *inout, int *len, MPI_Datatype *type)
{
    (void)type;
    const uint16_t *a = in;
    uint16_t *b = inout;
    for (int i = 0; i < *len; i++)
        b[i] = f32_to_bf16(bf16_to_f32(a[i]) + bf16_to_f32(b[i]));
}

static void type_and_op(mpi_impl *im, dtnn_comm_dtype dtype, MPI_Datatype *t, MPI_Op *op)
{
    switch (dtype) {
    case DTNN_COMM_F16:
        *t = MPI_UINT16_T;
        *op = im->sum_f16;
        return;
    case DTNN_COMM_BF16:
        *t = MPI_UINT16_T;
        *op = im->sum_bf16;
        return;
    case DTNN_COMM_F32:
        break;
    }
    *t = MPI_FLOAT;
    *op = MPI_SUM;
}

/* MPI counts are int: larger buffers go in pieces. */
enum { MPI_CHUNK = 1 << 30 };

static dtnn_status allreduce_piece(dtnn_comm *c, void *buf, int cnt, MPI_Datatype t, MPI_Op op,
                                   MPI_Comm comm, dtnn_error *err)
{
    COLLECTIVE(c, "MPI_Allreduce", MPI_Allreduce(MPI_IN_PLACE, buf, cnt, t, op, comm),
               MPI_Iallreduce(MPI_IN_PLACE, buf, cnt, t, op, comm, &req_));
}

static dtnn_status mpi_allreduce_sum(dtnn_comm *c, float *buf, size_t n, dtnn_error *err)
{
    mpi_impl *im = c->impl;
    for (size_t i = 0; i < n; i += MPI_CHUNK) {
        int cnt = (int)DTNN_MIN((size_t)MPI_CHUNK, n - i);
        dtnn_status st = allreduce_piece(c, buf + i, cnt, MPI_FLOAT, MPI_SUM, im->world, err);
        if (st)
            return st;
    }
    return DTNN_OK;
}

static dtnn_status mpi_allreduce_sum_f64(dtnn_comm *c, double *buf, size_t n, dtnn_error *err)
{
    mpi_impl *im = c->impl;
    return allreduce_piece(c, buf, (int)n, MPI_DOUBLE, MPI_SUM, im->world, err);
}

static dtnn_status bcast_piece(dtnn_comm *c, void *buf, int cnt, MPI_Datatype t, int root,
                               MPI_Comm comm, dtnn_error *err)
{
    COLLECTIVE(c, "MPI_Bcast", MPI_Bcast(buf, cnt, t, root, comm),
               MPI_Ibcast(buf, cnt, t, root, comm, &req_));
}

static dtnn_status mpi_broadcast(dtnn_comm *c, void *buf, size_t bytes, int root,
                                 dtnn_error *err)
{
    mpi_impl *im = c->impl;
    for (size_t i = 0; i < bytes; i += MPI_CHUNK) {
        int cnt = (int)DTNN_MIN((size_t)MPI_CHUNK, bytes - i);
        dtnn_status st = bcast_piece(c, (char *)buf + i, cnt, MPI_BYTE, root, im->world, err);
        if (st)
            return st;
    }
    return DTNN_OK;
}

static dtnn_status mpi_allgather(dtnn_comm *c, const void *send, size_t bytes, void *recv,
                                 dtnn_error *err)
{
    mpi_impl *im = c->impl;
    COLLECTIVE(c, "MPI_Allgather",
               MPI_Allgather(send, (int)bytes, MPI_BYTE, recv, (int)bytes, MPI_BYTE, im->world),
               MPI_Iallgather(send, (int)bytes, MPI_BYTE, recv, (int)bytes, MPI_BYTE, im->world,
                              &req_));
}

static dtnn_status mpi_allreduce(dtnn_comm *c, void *buf, size_t n, dtnn_comm_dtype dtype,
                                 dtnn_error *err)
{
    mpi_impl *im = c->impl;
    if (n > (size_t)MPI_CHUNK)
        return dtnn_error_set(err, DTNN_ERR_COMM, "all-reduce of %zu values is larger than MPI "
                              "allows in one call", n);
    MPI_Datatype t;
    MPI_Op op;
    type_and_op(im, dtype, &t, &op);
    return allreduce_piece(c, buf, (int)n, t, op, im->world, err);
}

static dtnn_status mpi_iallreduce(dtnn_comm *c, void *buf, size_t n, dtnn_comm_dtype dtype,
                                  int *request, dtnn_error *err)
{
    mpi_impl *im = c->impl;
    if (im->next_request == COMM_MAX_REQUESTS)
        return dtnn_error_set(err, DTNN_ERR_COMM, "more than %d all-reduces in flight: raise "
                              "--bucket-mb", COMM_MAX_REQUESTS);
    if (n > (size_t)MPI_CHUNK)
        return dtnn_error_set(err, DTNN_ERR_COMM, "bucket of %zu values is larger than MPI "
                              "allows in one call", n);
    MPI_Datatype t;
    MPI_Op op;
    type_and_op(im, dtype, &t, &op);
    int r = im->next_request++;
    *request = r;
    im->request_seq[r] = im->started++;
    im->request_purpose[r] = c->purpose;
    im->request_step[r] = c->step;
    im->request_t0[r] = trace_clock(c->trace);
    return mpi_check(MPI_Iallreduce(MPI_IN_PLACE, buf, (int)n, t, op, im->world,
                                    &im->requests[r]), "MPI_Iallreduce", c, err);
}

/* A request seen complete: its span from start to now goes into the trace, once. */
static void request_done(dtnn_comm *c, int r)
{
    mpi_impl *im = c->impl;
    if (!c->trace || im->request_t0[r] < 0)
        return;
    const comm_purpose *p = &im->request_purpose[r];
    trace_comm(c->trace, TRACE_BUCKET, p->what, "MPI_Iallreduce", im->request_t0[r],
               trace_clock(c->trace), im->request_step[r], im->request_seq[r], p->index,
               p->count);
    im->request_t0[r] = -1;
}

static dtnn_status mpi_test(dtnn_comm *c, int request, int *done, dtnn_error *err)
{
    mpi_impl *im = c->impl;
    if (c->stall_timeout > 0)
        answer_stall_queries(c, 1);
    dtnn_status st = mpi_check(MPI_Test(&im->requests[request], done, MPI_STATUS_IGNORE),
                               "MPI_Test", c, err);
    if (!st && *done)
        request_done(c, request);
    return st;
}

static dtnn_status mpi_wait(dtnn_comm *c, int request, dtnn_error *err)
{
    mpi_impl *im = c->impl;
    dtnn_status st = wait_request(c, &im->requests[request], im->request_seq[request],
                                  "MPI_Iallreduce", &im->request_purpose[request], err);
    if (!st)
        request_done(c, request);
    /* Request slots are reused once the last one in flight has completed. */
    if (request == im->next_request - 1)
        im->next_request = 0;
    return st;
}

static dtnn_status reduce_in_node(dtnn_comm *c, void *buf, int cnt, MPI_Datatype t, MPI_Op op,
                                  dtnn_error *err)
{
    mpi_impl *im = c->impl;
    void *send = c->local_rank == 0 ? MPI_IN_PLACE : buf;
    void *recv = c->local_rank == 0 ? buf : NULL;
    COLLECTIVE(c, "MPI_Reduce (node)", MPI_Reduce(send, recv, cnt, t, op, 0, im->node),
               MPI_Ireduce(send, recv, cnt, t, op, 0, im->node, &req_));
}

/* The three phases count as three collectives: every rank runs the first and the last, and
 * the middle is numbered on non-leaders too so that the numbers stay equal on all ranks. */
static dtnn_status mpi_hierarchical(dtnn_comm *c, void *buf, size_t n, dtnn_comm_dtype dtype,
                                    dtnn_error *err)
{
    mpi_impl *im = c->impl;
    MPI_Datatype t;
    MPI_Op op;
    type_and_op(im, dtype, &t, &op);
    int cnt = (int)n;
    dtnn_status st;
    if (c->local_size > 1 && (st = reduce_in_node(c, buf, cnt, t, op, err)))
        return st;
    if (im->leaders != MPI_COMM_NULL && c->nodes > 1) {
        if ((st = allreduce_piece(c, buf, cnt, t, op, im->leaders, err)))
            return st;
    } else {
        im->started++;
    }
    if (c->local_size > 1)
        return bcast_piece(c, buf, cnt, t, 0, im->node, err);
    return DTNN_OK;
}

static dtnn_status mpi_gather(dtnn_comm *c, const void *send, size_t bytes, void *recv,
                              const uint64_t *counts, dtnn_error *err)
{
    mpi_impl *im = c->impl;
    int *cnt = NULL, *displ = NULL;
    if (c->rank == 0) {
        cnt = malloc(sizeof *cnt * (size_t)c->size);
        displ = malloc(sizeof *displ * (size_t)c->size);
    }
    /* Every rank learns whether rank 0 can take part, so none is left waiting in the gather. */
    double ok = c->rank != 0 || (cnt && displ);
    uint64_t total = 0;
    for (int r = 0; r < c->size; r++)
        total += counts[r];
    if (total > INT32_MAX)
        ok = 0;
    dtnn_status st = mpi_allreduce_sum_f64(c, &ok, 1, err);
    if (!st && ok < c->size)
        st = dtnn_error_set(err, total > INT32_MAX ? DTNN_ERR_UNSUPPORTED : DTNN_ERR_NOMEM,
                            "gathering %llu bytes on rank 0: %s", (unsigned long long)total,
                            total > INT32_MAX ? "more than one MPI call moves" : "out of memory");
    if (!st) {
        for (int r = 0, at = 0; c->rank == 0 && r < c->size; at += cnt[r], r++) {
            cnt[r] = (int)counts[r];
            displ[r] = at;
        }
        COLLECTIVE_STATUS(c, st, "MPI_Gatherv",
                          MPI_Gatherv(send, (int)bytes, MPI_BYTE, recv, cnt, displ, MPI_BYTE, 0,
                                      im->world),
                          MPI_Igatherv(send, (int)bytes, MPI_BYTE, recv, cnt, displ, MPI_BYTE, 0,
                                       im->world, &req_));
    }
    free(cnt);
    free(displ);
    return st;
}

static void mpi_abort(dtnn_comm *c, int code, const char *message)
{
    mpi_impl *im = c->impl;
    if (message)
        fprintf(stderr, "dtnn (rank %d of %d): %s\n", c->rank, c->size, message);
    fflush(stderr);
    fflush(stdout);
    MPI_Abort(im->world, code);
}

static void mpi_destroy(dtnn_comm *c)
{
    mpi_impl *im = c->impl;
    if (im) {
        MPI_Op_free(&im->sum_f16);
        MPI_Op_free(&im->sum_bf16);
        if (im->leaders != MPI_COMM_NULL)
            MPI_Comm_free(&im->leaders);
        MPI_Comm_free(&im->node);
        MPI_Comm_free(&im->stall);
        MPI_Comm_free(&im->world);
        if (im->initialised_here)
            MPI_Finalize();
        free(im);
    }
    free(c);
}

static const dtnn_comm_ops mpi_ops = {
    .name = "mpi",
    .allreduce_sum = mpi_allreduce_sum,
    .allreduce_sum_f64 = mpi_allreduce_sum_f64,
    .broadcast = mpi_broadcast,
    .allgather = mpi_allgather,
    .allreduce = mpi_allreduce,
    .iallreduce = mpi_iallreduce,
    .test = mpi_test,
    .wait = mpi_wait,
    .hierarchical_allreduce = mpi_hierarchical,
    .gather = mpi_gather,
    .abort = mpi_abort,
    .destroy = mpi_destroy,
};

/* The cores of this rank's affinity mask, shared evenly among the ranks of the node whose
 * masks overlap it: 2 unbound ranks on 2 cores get 1 core each, a rank bound to 1 core gets 1. */
static int cores_given(dtnn_comm *c)
{
    mpi_impl *im = c->impl;
    uint64_t mine[DTNN_CPU_MASK_WORDS];
    int count = dtnn__cpu_affinity(mine);
    uint64_t *all = malloc(sizeof mine * (size_t)c->local_size);
    if (!all || MPI_Allgather(mine, (int)sizeof mine, MPI_BYTE, all, (int)sizeof mine, MPI_BYTE,
                              im->node) != MPI_SUCCESS) {
        free(all);
        return DTNN_MAX(1, count / c->local_size);
    }
    int sharing = 0;
    for (int r = 0; r < c->local_size; r++) {
        int overlap = 0;
        for (int w = 0; w < DTNN_CPU_MASK_WORDS; w++)
            overlap |= (all[r * DTNN_CPU_MASK_WORDS + w] & mine[w]) != 0;
        sharing += overlap;
    }
    free(all);
    return DTNN_MAX(1, count / DTNN_MAX(1, sharing));
}

/* Whether a launcher started this process, told by what it puts in every rank's environment.
 * Checked: Open MPI 4.1's mpirun sets OMPI_COMM_WORLD_SIZE and PMIX_RANK; MPICH 4.0's Hydra
 * mpiexec sets PMI_RANK, PMI_SIZE, PMI_FD, MPI_LOCALNRANKS and MPI_LOCALRANKID. PMI_SIZE and
 * PMIX_RANK also stand for other PMI-2 and PMIx launchers (srun), HYDRA_CONTROL_FD for older
 * Hydra. */
static int launched_by_mpi(void)
{
    static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK",
                                       "MPI_LOCALNRANKS", "HYDRA_CONTROL_FD"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        if (getenv(vars[i]))
            return 1;
    return 0;
}

/* The number of ranks the launcher started, where it says; 0 where it does not. srun says
 * for every plugin, PMIx included, where PMI_SIZE is not set. */
static int launcher_size(void)
{
    static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i]);
        if (v)
            return atoi(v);
    }
    return launch_srun_tasks(NULL);
}

/* srun --mpi=none (or a plugin that sets nothing MPI reads) starts tasks that would each train
 * alone as rank 0 of 1 and write the same files. Debian's Open MPI 4.1 joins srun's tasks
 * through PMIx only (not PMI-2: its MPI_Init then stops with "OMPI was not built with SLURM's
 * PMI support"); MPICH's may use pmi2. */
static dtnn_status check_srun_plugin(const char *but, int size, dtnn_error *err)
{
    const char *plugin = NULL;
    int tasks = launch_srun_tasks(&plugin);
    if (tasks <= 1 || tasks == size)
        return DTNN_OK;
    return dtnn_error_set(err, DTNN_ERR_COMM, "srun started %d tasks (--mpi=%s), but %s, so "
                          "each would train alone: start them with srun --mpi=pmix (the plugin "
                          "Debian's Slurm 22.05 and Open MPI 4.1 share; `srun --mpi=list` shows "
                          "this cluster's), or run mpirun inside the allocation", tasks, plugin,
                          but);
}

/* c->name from MPI_Get_library_version: its first line up to a comma, without MPICH's label,
 * so "Open MPI v4.1.4, package: ..." gives "Open MPI v4.1.4" and "MPICH Version:\t4.0.2\n..."
 * gives "MPICH 4.0.2". */
static void library_name(char *name, size_t cap, const char *version)
{
    static const char label[] = "Version:";
    size_t n = 0;
    for (const char *p = version; *p && *p != ',' && *p != '\n' && n + 1 < cap; p++) {
        if (!strncmp(p, label, sizeof label - 1)) {
            p += sizeof label - 2;
            continue;
        }
        int space = *p == ' ' || *p == '\t';
        if (space && (n == 0 || name[n - 1] == ' '))
            continue;
        name[n++] = space ? ' ' : *p;
    }
    while (n > 0 && name[n - 1] == ' ')
        n--;
    name[n] = '\0';
}

/* c->node and c->hosts: the node leaders number themselves and share their processor names
 * (one per node, not per rank), then tell the ranks of their node. Start-up only. */
static void node_names(dtnn_comm *c)
{
    mpi_impl *im = c->impl;
    int node = 0;
    if (im->leaders != MPI_COMM_NULL) {
        char name[MPI_MAX_PROCESSOR_NAME + 1] = {0};
        int len = 0;
        MPI_Comm_rank(im->leaders, &node);
        MPI_Get_processor_name(name, &len);
        char *all = calloc((size_t)c->nodes, sizeof name);
        if (all && MPI_Allgather(name, (int)sizeof name, MPI_CHAR, all, (int)sizeof name,
                                 MPI_CHAR, im->leaders) == MPI_SUCCESS)
            launch_hostlist(all, c->nodes, sizeof name, c->hosts, sizeof c->hosts);
        else
            snprintf(c->hosts, sizeof c->hosts, "%d hosts", c->nodes);
        free(all);
    }
    MPI_Bcast(&node, 1, MPI_INT, 0, im->node);
    MPI_Bcast(c->hosts, (int)sizeof c->hosts, MPI_CHAR, 0, im->node);
    c->node = node;
}

dtnn_comm *comm_mpi_create(int *argc, char ***argv, dtnn_error *err)
{
    int initialised = 0;
    MPI_Initialized(&initialised);
    if (!initialised && !launched_by_mpi()) {
        check_srun_plugin("their environment has no MPI process manager to join them", 1, err);
        return NULL;
    }
    dtnn_comm *c = calloc(1, sizeof *c);
    mpi_impl *im = calloc(1, sizeof *im);
    if (!c || !im) {
        free(c);
        free(im);
        dtnn_error_set(err, DTNN_ERR_NOMEM, "out of memory");
        return NULL;
    }
    if (!initialised) {
        int provided;
        if (MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
            free(c);
            free(im);
            dtnn_error_set(err, DTNN_ERR_COMM, "MPI_Init_thread failed");
            return NULL;
        }
        im->initialised_here = 1;
    }
    c->ops = &mpi_ops;
    c->impl = im;
    MPI_Comm_dup(MPI_COMM_WORLD, &im->world);
    MPI_Comm_set_errhandler(im->world, MPI_ERRORS_RETURN);
    MPI_Comm_dup(im->world, &im->stall);
    im->waiting = -1;
    MPI_Comm_rank(im->world, &c->rank);
    MPI_Comm_size(im->world, &c->size);
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    MPI_Get_library_version(version, &len);
    library_name(c->name, sizeof c->name, version);
    /* A build's MPI started by another MPI's launcher (an MPICH build under Debian's default
     * mpirun, which is Open MPI's) initialises as that many singletons, each of which would
     * train alone and write the same files: stop instead. */
    int launched = launcher_size();
    if (launched > 0 && launched != c->size) {
        char but[160];
        snprintf(but, sizeof but, "this build's MPI (%s) sees %d rank%s", c->name, c->size,
                 c->size == 1 ? "" : "s");
        if (launch_srun_tasks(NULL) > 0)
            check_srun_plugin(but, c->size, err);
        else
            dtnn_error_set(err, DTNN_ERR_COMM, "the launcher started %d ranks, but this build's "
                           "MPI (%s) sees %d: start dtnn with that MPI's own mpiexec", launched,
                           c->name, c->size);
        MPI_Comm_free(&im->stall);
        MPI_Comm_free(&im->world);
        if (im->initialised_here)
            MPI_Finalize();
        free(im);
        free(c);
        return NULL;
    }
    MPI_Comm_split_type(im->world, MPI_COMM_TYPE_SHARED, c->rank, MPI_INFO_NULL, &im->node);
    MPI_Comm_set_errhandler(im->node, MPI_ERRORS_RETURN);
    MPI_Comm_rank(im->node, &c->local_rank);
    MPI_Comm_size(im->node, &c->local_size);
    MPI_Comm_split(im->world, c->local_rank == 0 ? 0 : MPI_UNDEFINED, c->rank, &im->leaders);
    if (im->leaders != MPI_COMM_NULL)
        MPI_Comm_set_errhandler(im->leaders, MPI_ERRORS_RETURN);
    int leader = c->local_rank == 0;
    MPI_Allreduce(&leader, &c->nodes, 1, MPI_INT, MPI_SUM, im->world);
    node_names(c);
    launch_describe(c->launcher, sizeof c->launcher);
    c->cores = cores_given(c);
    MPI_Op_create(sum_f16, 1, &im->sum_f16);
    MPI_Op_create(sum_bf16, 1, &im->sum_bf16);
    return c;
}

#endif
