/*
 * trace.h — what the engine records into a timeline (--trace, dtnn_trace in dtnn.h). Callers
 * take trace_clock at a span's start and call trace_span at its end; both do nothing with a
 * NULL trace, so a run without --trace reads no clock and stores nothing.
 */
#ifndef DTNN_TRACE_H
#define DTNN_TRACE_H

#include <stdint.h>

#include "dtnn.h"

/* A span's kind: its Chrome trace category, its colour in scripts/trace_plot. TRACE_BUCKET
 * spans (a gradient bucket from the moment it is ready to the moment its all-reduce is seen
 * complete) overlap each other, so they go on a track of their own as async events. */
typedef enum {
    TRACE_STEP,
    TRACE_DATA,             /* waiting for the loader's next batch */
    TRACE_FORWARD,          /* the forward pass; its layers are TRACE_LAYER_FWD spans in it */
    TRACE_LAYER_FWD,
    TRACE_LOSS,
    TRACE_BACKWARD,
    TRACE_LAYER_BWD,
    TRACE_GRAD_WAIT,        /* after backward: completing the gradient all-reduces */
    TRACE_COLLECTIVE,       /* a blocking collective (also one the stall detector polls) */
    TRACE_BUCKET,
    TRACE_OPTIMIZER,
    TRACE_CHECKPOINT,
    TRACE_EVAL,
    TRACE_N_KINDS
} trace_kind;

/* Seconds on this rank's clock (dtnn__now), or 0 without a trace. */
double trace_clock(const dtnn_trace *t);

/* Records a span of kind from t0 to now. name must stay valid until the trace is written
 * (string literals, layer names); step: the training step, or -1. */
void trace_span(dtnn_trace *t, trace_kind kind, const char *name, double t0, int64_t step);

/* A collective (TRACE_COLLECTIVE) or a bucket's all-reduce (TRACE_BUCKET) from t0 to t1:
 * what it is for ("gradient bucket", "epoch metrics"; NULL: op alone names it), the operation
 * ("MPI_Allreduce"), its number among the rank's collectives (equal on every rank, as in the
 * stall report), and for buckets index of count (else -1, 0). */
void trace_comm(dtnn_trace *t, trace_kind kind, const char *what, const char *op, double t0,
                double t1, int64_t step, int64_t seq, int index, int count);

/* For perf/trace_ranks.c, which adds what needs a communicator. trace_alloc makes an empty
 * trace of rank of size (max_events 0: the default cap) on this rank's own clock;
 * trace_set_clock puts it on rank 0's (origin: rank 0's clock at creation; offset: this
 * rank's clock minus rank 0's). trace_serialise gives this rank's header, strings and events
 * as one byte string (malloc'd, *bytes long); trace_write_file writes the file from n ranks'
 * strings (blobs[r] of sizes[r] bytes) through the atomic writer, so a reader never sees half
 * a file. */
dtnn_trace *trace_alloc(int rank, int size, size_t max_events, dtnn_error *err);
void trace_set_clock(dtnn_trace *t, double origin, double offset);
unsigned char *trace_serialise(const dtnn_trace *t, size_t *bytes);
dtnn_status trace_write_file(const dtnn_trace *t, const char *path, unsigned char **blobs,
                             const size_t *sizes, int n, dtnn_error *err);

#endif
