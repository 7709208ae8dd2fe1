/*
 * trace_ranks.c — the collective parts of a run's timeline (core/trace.c records it): at
 * creation the ranks align their clocks, and dtnn_trace_write gathers every rank's events to
 * rank 0, which writes the one merged file. core/trace.c says how the offsets are found and
 * what the file holds.
 */
#include <stdlib.h>
#include <string.h>

#include "../comm/comm.h"
#include "../core/internal.h"
#include "../core/trace.h"

#define TRACE_CLOCK_ROUNDS 7

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

dtnn_trace *dtnn_trace_create(dtnn_comm *comm, size_t max_events, dtnn_error *err)
{
    const int rank = comm ? dtnn_comm_rank(comm) : 0, size = comm ? dtnn_comm_size(comm) : 1;
    dtnn_trace *t = trace_alloc(rank, size, max_events, err);
    if (!t || size == 1)
        return t;
    double *all = malloc(sizeof *all * ((size_t)size + 1) * TRACE_CLOCK_ROUNDS);
    if (!all) {
        dtnn_trace_free(t);
        dtnn_error_set(err, DTNN_ERR_NOMEM, "out of memory for the trace");
        return NULL;
    }
    {
        double *mine = all + (size_t)size * TRACE_CLOCK_ROUNDS, barrier = 0.0;
        for (int k = 0; k < TRACE_CLOCK_ROUNDS; k++) {
            double now;
            dtnn_status st = dtnn_comm_allreduce_sum_f64(comm, &barrier, 1, err);
            now = dtnn__now();
            if (!st)
                st = dtnn_comm_allgather(comm, &now, sizeof now, all + (size_t)k * size, err);
            if (st) {
                free(all);
                dtnn_trace_free(t);
                return NULL;
            }
            mine[k] = all[(size_t)k * size + rank] - all[(size_t)k * size];
        }
        qsort(mine, TRACE_CLOCK_ROUNDS, sizeof *mine, cmp_double);
        trace_set_clock(t, all[(size_t)(TRACE_CLOCK_ROUNDS - 1) * size],
                        mine[TRACE_CLOCK_ROUNDS / 2]);
    }
    free(all);
    return t;
}

dtnn_status dtnn_trace_write(dtnn_trace *t, dtnn_comm *comm, const char *path, dtnn_error *err)
{
    const int size = comm ? dtnn_comm_size(comm) : 1, rank = comm ? dtnn_comm_rank(comm) : 0;
    size_t bytes = 0;
    unsigned char *mine = trace_serialise(t, &bytes);
    uint64_t my_size = mine ? bytes : 0, *all_sizes = malloc(sizeof *all_sizes * (size_t)size);
    dtnn_status st = DTNN_OK;
    if (!all_sizes)
        st = dtnn_error_set(err, DTNN_ERR_NOMEM, "out of memory for the trace");
    /* Every rank takes part in every collective, even one that ran out of memory: the
     * all-gathered sizes tell all ranks whether to go on. */
    if (!st && size > 1)
        st = dtnn_comm_allgather(comm, &my_size, sizeof my_size, all_sizes, err);
    else if (!st)
        all_sizes[0] = my_size;
    for (int r = 0; r < size && !st; r++)
        if (!all_sizes[r])
            st = dtnn_error_set(err, DTNN_ERR_NOMEM, "out of memory for rank %d's trace", r);
    size_t total = 0;
    for (int r = 0; r < size && !st; r++)
        total += all_sizes[r];
    unsigned char *gathered = NULL;
    if (!st && rank == 0 && !(gathered = malloc(total)))
        st = dtnn_error_set(err, DTNN_ERR_NOMEM, "out of memory for the merged trace");
    if (!st && size > 1)
        st = comm_gather(comm, mine, bytes, gathered, all_sizes, err);
    else if (!st)
        memcpy(gathered, mine, bytes);
    if (!st && rank == 0) {
        unsigned char **blobs = malloc(sizeof *blobs * (size_t)size);
        size_t *sizes = malloc(sizeof *sizes * (size_t)size);
        if (!blobs || !sizes)
            st = dtnn_error_set(err, DTNN_ERR_NOMEM, "out of memory for the merged trace");
        size_t at = 0;
        for (int r = 0; r < size && !st; at += all_sizes[r], r++) {
            blobs[r] = gathered + at;
            sizes[r] = all_sizes[r];
        }
        if (!st)
            st = trace_write_file(t, path, blobs, sizes, size, err);
        free(blobs);
        free(sizes);
    }
    free(gathered);
    free(all_sizes);
    free(mine);
    return st;
}

