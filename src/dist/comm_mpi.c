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

#ifndef DTNN_HAVE_MPI

dtnn_comm *comm_mpi_create(int *argc, char ***argv, dtnn_error *err)
{
    (void)argc, (void)argv, (void)err;
    return NULL;
}

#else

#include <mpi.h>

#include "half.h"

typedef struct {
    MPI_Comm world, node, leaders;      /* leaders: MPI_COMM_NULL on non-leaders */
    MPI_Op sum_f16, sum_bf16;
    MPI_Request requests[COMM_MAX_REQUESTS];
    int next_request;
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

static dtnn_status mpi_allreduce_sum(dtnn_comm *c, float *buf, size_t n, dtnn_error *err)
{
    mpi_impl *im = c->impl;
    for (size_t i = 0; i < n; i += MPI_CHUNK) {
        int cnt = (int)DTNN_MIN((size_t)MPI_CHUNK, n - i);
        dtnn_status st = mpi_check(MPI_Allreduce(MPI_IN_PLACE, buf + i, cnt, MPI_FLOAT, MPI_SUM,
                                                 im->world), "MPI_Allreduce", c, err);
        if (st)
            return st;
    }
    return DTNN_OK;
}

static dtnn_status mpi_allreduce_sum_f64(dtnn_comm *c, double *buf, size_t n, dtnn_error *err)
{
    mpi_impl *im = c->impl;
    return mpi_check(MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, MPI_DOUBLE, MPI_SUM, im->world),
                     "MPI_Allreduce", c, err);
}

static dtnn_status mpi_broadcast(dtnn_comm *c, void *buf, size_t bytes, int root,
                                 dtnn_error *err)
{
    mpi_impl *im = c->impl;
    for (size_t i = 0; i < bytes; i += MPI_CHUNK) {
        int cnt = (int)DTNN_MIN((size_t)MPI_CHUNK, bytes - i);
        dtnn_status st = mpi_check(MPI_Bcast((char *)buf + i, cnt, MPI_BYTE, root, im->world),
                                   "MPI_Bcast", c, err);
        if (st)
            return st;
    }
    return DTNN_OK;
}

static dtnn_status mpi_allgather(dtnn_comm *c, const void *send, size_t bytes, void *recv,
                                 dtnn_error *err)
{
    mpi_impl *im = c->impl;
    return mpi_check(MPI_Allgather(send, (int)bytes, MPI_BYTE, recv, (int)bytes, MPI_BYTE,
                                   im->world), "MPI_Allgather", c, err);
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
    return mpi_check(MPI_Iallreduce(MPI_IN_PLACE, buf, (int)n, t, op, im->world,
                                    &im->requests[r]), "MPI_Iallreduce", c, err);
}

static dtnn_status mpi_test(dtnn_comm *c, int request, int *done, dtnn_error *err)
{
    mpi_impl *im = c->impl;
    return mpi_check(MPI_Test(&im->requests[request], done, MPI_STATUS_IGNORE), "MPI_Test", c,
                     err);
}

static dtnn_status mpi_wait(dtnn_comm *c, int request, dtnn_error *err)
{
    mpi_impl *im = c->impl;
    dtnn_status st = mpi_check(MPI_Wait(&im->requests[request], MPI_STATUS_IGNORE), "MPI_Wait",
                               c, err);
    /* Request slots are reused once the last one in flight has completed. */
    if (request == im->next_request - 1)
        im->next_request = 0;
    return st;
}

static dtnn_status mpi_hierarchical(dtnn_comm *c, void *buf, size_t n, dtnn_comm_dtype dtype,
                                    dtnn_error *err)
{
    mpi_impl *im = c->impl;
    MPI_Datatype t;
    MPI_Op op;
    type_and_op(im, dtype, &t, &op);
    int cnt = (int)n;
    dtnn_status st;
    if (c->local_size > 1) {
        void *send = c->local_rank == 0 ? MPI_IN_PLACE : buf;
        void *recv = c->local_rank == 0 ? buf : NULL;
        if ((st = mpi_check(MPI_Reduce(send, recv, cnt, t, op, 0, im->node), "MPI_Reduce "
                            "(node)", c, err)))
            return st;
    }
    if (im->leaders != MPI_COMM_NULL && c->nodes > 1 &&
        (st = mpi_check(MPI_Allreduce(MPI_IN_PLACE, buf, cnt, t, op, im->leaders),
                        "MPI_Allreduce (leaders)", c, err)))
        return st;
    if (c->local_size > 1)
        return mpi_check(MPI_Bcast(buf, cnt, t, 0, im->node), "MPI_Bcast (node)", c, err);
    return DTNN_OK;
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
    .iallreduce = mpi_iallreduce,
    .test = mpi_test,
    .wait = mpi_wait,
    .hierarchical_allreduce = mpi_hierarchical,
    .abort = mpi_abort,
    .destroy = mpi_destroy,
};

static int launched_by_mpi(void)
{
    static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK",
                                       "MPI_LOCALNRANKS", "HYDRA_CONTROL_FD"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        if (getenv(vars[i]))
            return 1;
    return 0;
}

dtnn_comm *comm_mpi_create(int *argc, char ***argv, dtnn_error *err)
{
    int initialised = 0;
    MPI_Initialized(&initialised);
    if (!initialised && !launched_by_mpi())
        return NULL;
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
    MPI_Comm_rank(im->world, &c->rank);
    MPI_Comm_size(im->world, &c->size);
    MPI_Comm_split_type(im->world, MPI_COMM_TYPE_SHARED, c->rank, MPI_INFO_NULL, &im->node);
    MPI_Comm_set_errhandler(im->node, MPI_ERRORS_RETURN);
    MPI_Comm_rank(im->node, &c->local_rank);
    MPI_Comm_size(im->node, &c->local_size);
    MPI_Comm_split(im->world, c->local_rank == 0 ? 0 : MPI_UNDEFINED, c->rank, &im->leaders);
    if (im->leaders != MPI_COMM_NULL)
        MPI_Comm_set_errhandler(im->leaders, MPI_ERRORS_RETURN);
    int leader = c->local_rank == 0;
    MPI_Allreduce(&leader, &c->nodes, 1, MPI_INT, MPI_SUM, im->world);
    MPI_Op_create(sum_f16, 1, &im->sum_f16);
    MPI_Op_create(sum_bf16, 1, &im->sum_bf16);
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    MPI_Get_library_version(version, &len);
    version[strcspn(version, ",\n")] = '\0';
    version[sizeof c->name - 1] = '\0';
    memcpy(c->name, version, strlen(version) + 1);
    return c;
}

#endif
