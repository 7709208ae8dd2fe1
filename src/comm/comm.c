/*
 * comm.c — the public communicator calls, dispatched to the implementation's ops table, and
 * the choice between MPI and a single process.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../backend/backend.h"
#include "comm_internal.h"
#include "launch.h"

static const comm_purpose no_purpose = {NULL, -1, 0};

/* Ranks left to choose their CPU kernel set (DTNN_CPU auto) take the slowest set any rank
 * chose, which runs on all of them (the sets nest: a CPU with AVX-512 runs the AVX2 set, every
 * x86-64 the generic one). A run across nodes of different CPUs then computes alike instead
 * of stopping at the start-up agreement (replicas.c), which still stops ranks whose forced
 * sets differ or a forced set another rank cannot run. */
static dtnn_status agree_cpu_kernels(dtnn_comm *c, dtnn_error *err)
{
    char mine[24] = {0};
    int forced;
    snprintf(mine, sizeof mine, "%s", cpu_kernels_choice(&forced));
    char *all = malloc(sizeof mine * (size_t)c->size);
    if (!all)
        return dtnn_error_set(err, DTNN_ERR_NOMEM, "out of memory");
    comm_set_purpose(c, "start-up: the ranks' CPU kernel sets", -1, 0);
    dtnn_status st = dtnn_comm_allgather(c, mine, sizeof mine, all, err);
    for (int r = 0; r < c->size && !st && !forced; r++) {
        all[sizeof mine * (size_t)r + sizeof mine - 1] = '\0';
        (void)cpu_kernels_adopt(all + sizeof mine * (size_t)r);
    }
    free(all);
    return st;
}

dtnn_comm *dtnn_comm_create_auto(int *argc, char ***argv, dtnn_error *err)
{
    dtnn_error e = {0};
    dtnn_comm *c = comm_mpi_create(argc, argv, &e);
    if (c && c->size > 1 && agree_cpu_kernels(c, err)) {
        dtnn_comm_free(c);
        return NULL;
    }
    if (c)
        return c;
    if (e.code) {
        dtnn_error_set(err, e.code, "%s", e.message);
        return NULL;
    }
    /* A build without MPI under `srun -n 2` would train twice, alone, into the same files. (The
     * MPI build stops such a start itself, naming the --mpi plugin.) */
    int tasks = launch_srun_tasks(NULL);
    if (tasks > 1) {
        dtnn_error_set(err, DTNN_ERR_COMM, "srun started %d tasks, but this dtnn was built "
                       "without MPI, so each would train alone: build with MPI "
                       "(libopenmpi-dev) or start one task", tasks);
        return NULL;
    }
    c = dtnn_comm_create_single();
    if (!c)
        dtnn_error_set(err, DTNN_ERR_NOMEM, "out of memory");
    return c;
}

void dtnn_comm_free(dtnn_comm *c)
{
    if (c)
        c->ops->destroy(c);
}

int dtnn_comm_rank(const dtnn_comm *c) { return c->rank; }
int dtnn_comm_size(const dtnn_comm *c) { return c->size; }
int dtnn_comm_local_rank(const dtnn_comm *c) { return c->local_rank; }
int dtnn_comm_local_size(const dtnn_comm *c) { return c->local_size; }
int dtnn_comm_node_count(const dtnn_comm *c) { return c->nodes; }
int dtnn_comm_node(const dtnn_comm *c) { return c->node; }
const char *dtnn_comm_launcher(const dtnn_comm *c) { return c->launcher; }
const char *dtnn_comm_hosts(const dtnn_comm *c) { return c->hosts; }
const char *dtnn_comm_name(const dtnn_comm *c) { return c->name; }
int dtnn_comm_cores(const dtnn_comm *c) { return c->cores; }

void dtnn_comm_set_trace(dtnn_comm *c, dtnn_trace *t) { c->trace = t; }

void comm_purpose_label(char *out, size_t size, const comm_purpose *p, const char *op)
{
    if (p->what && p->count > 0)
        snprintf(out, size, "%s %d of %d: %s", p->what, p->index + 1, p->count, op);
    else if (p->what)
        snprintf(out, size, "%s: %s", p->what, op);
    else
        snprintf(out, size, "%s", op);
}

void comm_set_purpose(dtnn_comm *c, const char *what, int index, int count)
{
    c->purpose = (comm_purpose){what, index, count};
}

void comm_set_step(dtnn_comm *c, int64_t step) { c->step = step; }
dtnn_trace *comm_trace(const dtnn_comm *c) { return c->trace; }
int64_t comm_step(const dtnn_comm *c) { return c->step; }

dtnn_status comm_gather(dtnn_comm *c, const void *send, size_t bytes, void *recv,
                        const uint64_t *counts, dtnn_error *err)
{
    dtnn_status st = c->ops->gather(c, send, bytes, recv, counts, err);
    c->purpose = no_purpose;
    return st;
}

void dtnn_comm_set_stall_timeout(dtnn_comm *c, double seconds)
{
    c->stall_timeout = seconds > 0 ? seconds : 0;
}

dtnn_status dtnn_comm_allreduce_sum(dtnn_comm *c, float *buf, size_t n, dtnn_error *err)
{
    dtnn_status st = c->ops->allreduce_sum(c, buf, n, err);
    c->purpose = no_purpose;
    return st;
}

dtnn_status dtnn_comm_allreduce_sum_f64(dtnn_comm *c, double *buf, size_t n, dtnn_error *err)
{
    dtnn_status st = c->ops->allreduce_sum_f64(c, buf, n, err);
    c->purpose = no_purpose;
    return st;
}

dtnn_status dtnn_comm_broadcast(dtnn_comm *c, void *buf, size_t bytes, int root,
                                dtnn_error *err)
{
    dtnn_status st = c->ops->broadcast(c, buf, bytes, root, err);
    c->purpose = no_purpose;
    return st;
}

dtnn_status dtnn_comm_allgather(dtnn_comm *c, const void *send, size_t bytes, void *recv,
                                dtnn_error *err)
{
    dtnn_status st = c->ops->allgather(c, send, bytes, recv, err);
    c->purpose = no_purpose;
    return st;
}

void dtnn_comm_abort(dtnn_comm *c, int code, const char *message)
{
    c->ops->abort(c, code, message);
}

dtnn_status comm_iallreduce(dtnn_comm *c, void *buf, size_t n, dtnn_comm_dtype dtype,
                            int *request, dtnn_error *err)
{
    dtnn_status st = c->ops->iallreduce(c, buf, n, dtype, request, err);
    c->purpose = no_purpose;
    return st;
}

dtnn_status comm_allreduce(dtnn_comm *c, void *buf, size_t n, dtnn_comm_dtype dtype,
                           dtnn_error *err)
{
    dtnn_status st = c->ops->allreduce(c, buf, n, dtype, err);
    c->purpose = no_purpose;
    return st;
}

dtnn_status comm_test(dtnn_comm *c, int request, int *done, dtnn_error *err)
{
    return c->ops->test(c, request, done, err);
}

dtnn_status comm_wait(dtnn_comm *c, int request, dtnn_error *err)
{
    return c->ops->wait(c, request, err);
}

dtnn_status comm_hierarchical_allreduce(dtnn_comm *c, void *buf, size_t n,
                                        dtnn_comm_dtype dtype, dtnn_error *err)
{
    dtnn_status st = c->ops->hierarchical_allreduce(c, buf, n, dtype, err);
    c->purpose = no_purpose;
    return st;
}

dtnn_status dtnn_allreduce_parse(const char *name, dtnn_allreduce_mode *mode, dtnn_error *err)
{
    if (!strcmp(name, "overlap"))
        *mode = DTNN_ALLREDUCE_OVERLAP;
    else if (!strcmp(name, "blocking"))
        *mode = DTNN_ALLREDUCE_BLOCKING;
    else if (!strcmp(name, "hierarchical"))
        *mode = DTNN_ALLREDUCE_HIERARCHICAL;
    else
        return dtnn_error_set(err, DTNN_ERR_ARG, "unknown all-reduce '%s' (overlap, blocking, "
                              "hierarchical)", name);
    return DTNN_OK;
}

dtnn_status dtnn_comm_dtype_parse(const char *name, dtnn_comm_dtype *dtype, dtnn_error *err)
{
    if (!strcmp(name, "fp32"))
        *dtype = DTNN_COMM_F32;
    else if (!strcmp(name, "fp16"))
        *dtype = DTNN_COMM_F16;
    else if (!strcmp(name, "bf16"))
        *dtype = DTNN_COMM_BF16;
    else
        return dtnn_error_set(err, DTNN_ERR_ARG, "unknown communication type '%s' (fp32, fp16, "
                              "bf16)", name);
    return DTNN_OK;
}

int comm_reduces_backend_memory(const dtnn_comm *c, const struct dtnn_backend *be)
{
    if (c->ops->reduces_backend_memory)
        return c->ops->reduces_backend_memory(c, be);
    return be->host_memory;
}
