/*
 * bucket_auto.c — the gradient bucket size for a job (`--bucket-mb auto`): the size that
 * minimises the exposed communication of one step in the projection's model (projection.c,
 * dtnn_project_step), searched over power-of-two sizes. dtnn_project_bucket_auto is the pure
 * choice (used by `dtnn bench --project` with a measured profile); dtnn_bucket_auto feeds it
 * for a running job: the link measured by timed all-reduces of two sizes among the ranks
 * (an alpha-beta fit of what MPI really does), and a backward profile shaped by each layer's
 * FLOPs at the rate of a short product on this rank's backend (be_matmul_rate). Rank 0 decides and broadcasts its choice,
 * so every rank cuts the same buckets whatever its own timings said.
 *
 * Why a search rather than the closed form (docs/scaling.md has both): with backward
 * producing a gradient of G bytes evenly over B seconds and an all-reduce of n bytes costing
 * a + c n, k buckets expose max(a + c G / k, B / k + k a + c G - B), smallest at
 * k = max(sqrt(B / a), (B - c G) / a); real models produce their gradient unevenly (ResNet's
 * and VGG's largest layers are the last, done first in backward), and the search prices that.
 * What it does not do: retune during the run (the choice is made once, at start-up), or see
 * per-call software costs the alpha-beta fit does not, which is why it stops at 1 MiB and
 * takes the larger size on a tie (exposures within 0.1% of the step).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../backend/backend.h"
#include "../comm/comm.h"
#include "../model/model.h"

#define MIB 1048576.0

/* Floats per bucket and the bucket count, as grad_sync.c cuts them. */
static size_t buckets_for(double bytes, size_t total, size_t *per_out)
{
    size_t per = (size_t)(bytes / sizeof(float));
    if (per == 0 || per > total)
        per = total ? total : 1;
    if (per_out)
        *per_out = per;
    return total ? (total + per - 1) / per : 1;
}

dtnn_status dtnn_project_bucket_auto(const dtnn_project_profile *prof,
                                     const dtnn_project_params *p, int max_buckets,
                                     dtnn_projection *best, double *bucket_bytes,
                                     dtnn_error *err)
{
    if (max_buckets <= 0)
        max_buckets = COMM_MAX_REQUESTS;
    size_t total = 0;
    for (int i = 0; i < prof->layers; i++)
        total += prof->params[i];
    dtnn_project_params q = *p;
    /* 1 MiB, 2 MiB, ... up to the first size that holds the whole gradient (one bucket):
     * at most 64 doublings of a size_t. */
    enum { MAX_CANDIDATES = 64 };
    dtnn_projection r[MAX_CANDIDATES];
    double size[MAX_CANDIDATES];
    int count = 0, least = -1;
    for (double bytes = MIB; count < MAX_CANDIDATES; bytes *= 2.0) {
        const int last = bytes / sizeof(float) >= (double)total;
        if (buckets_for(bytes, total, NULL) <= (size_t)max_buckets) {
            q.bucket_bytes = bytes;
            dtnn_status st = dtnn_project_step(prof, &q, &r[count], err);
            if (st)
                return st;
            size[count] = bytes;
            if (least < 0 || r[count].exposed < r[least].exposed)
                least = count;
            count++;
        }
        if (last)
            break;
    }
    /* Sizes within DTNN_BUCKET_AUTO_TIE of the step of the least exposure are ties, and the
     * largest of them wins: fewer messages, whose per-call costs the model does not see, and
     * a choice that does not flip between neighbours over differences no run could measure. */
    int pick = least;
    const double margin = DTNN_BUCKET_AUTO_TIE * r[least].compute;
    for (int i = least + 1; i < count; i++)
        if (r[i].exposed <= r[least].exposed + margin)
            pick = i;
    if (best)
        *best = r[pick];
    *bucket_bytes = size[pick];
    return DTNN_OK;
}

/* ---- for a running job --------------------------------------------------------------- */

/* Fastest of `reps` blocking all-reduces of n floats (after one untimed), seconds. */
static dtnn_status time_allreduce(dtnn_comm *comm, float *buf, size_t n, int reps, double *best,
                                  dtnn_error *err)
{
    *best = 1e30;
    for (int i = 0; i <= reps; i++) {
        double t0 = dtnn__now();
        dtnn_status st = dtnn_comm_allreduce_sum(comm, buf, n, err);
        if (st)
            return st;
        double t = dtnn__now() - t0;
        if (i > 0 && t < *best)
            *best = t;
    }
    return DTNN_OK;
}

/* What rank 0 decides and broadcasts. */
typedef struct {
    double bucket_bytes, alpha, beta, backward;
    int measured, buckets;
} decision;

static dtnn_status decide(dtnn_model *m, int ranks, dtnn_allreduce_mode mode,
                          dtnn_comm_dtype dtype, double rate, double t_small,
                          double bytes_small, double t_large, double bytes_large, decision *d,
                          dtnn_error *err)
{
    /* T(n) = a + c n; the ring's a = 2 (P-1) alpha and c = 2 (P-1)/P beta give the link. */
    double c = (t_large - t_small) / (bytes_large - bytes_small);
    if (!(c > 0.1 * t_large / bytes_large))
        c = 0.1 * t_large / bytes_large;    /* noise made the slope vanish: a fast link */
    double a = t_small - c * bytes_small;
    if (!(a > 0.5 * t_small))
        a = 0.5 * t_small;
    d->alpha = a / (2.0 * (ranks - 1));
    d->beta = c * ranks / (2.0 * (ranks - 1));
    d->measured = 1;
    const int layers = dtnn_model_layer_count(m);
    double *fwd = calloc((size_t)layers + 1, sizeof *fwd);
    double *bwd = calloc((size_t)layers + 1, sizeof *bwd);
    size_t *params = calloc((size_t)layers + 1, sizeof *params);
    if (!fwd || !bwd || !params) {
        free(fwd), free(bwd), free(params);
        return dtnn_error_set(err, DTNN_ERR_NOMEM, "out of memory for the bucket choice");
    }
    const int max_batch = model_build_params(m)->max_batch, batch = max_batch > 0 ? max_batch : 1;
    d->backward = 0;
    for (int i = 0; i < layers; i++) {
        dtnn_layer_info li;
        dtnn_model_layer_info(m, i, &li);
        /* Backward computes the input's and the weights' gradients: twice the forward. */
        fwd[i] = rate > 0 ? li.flops * batch / rate : 0;
        bwd[i] = 2.0 * fwd[i] + 1e-9;
        params[i] = li.params;
        d->backward += bwd[i];
    }
    dtnn_project_profile prof = {layers, fwd, bwd, params, 0};
    dtnn_project_params p;
    dtnn_project_params_default(&p);
    /* A flat all-reduce among all ranks, as measured: P "nodes" of one rank each price
     * exactly a + c n. Without overlap (blocking, hierarchical) the model's answer is one
     * bucket, since every bucket adds its latency after backward. */
    p.nodes = ranks;
    p.ranks_per_node = 1;
    p.inter = (dtnn_link){d->alpha, d->beta};
    p.overlap = mode == DTNN_ALLREDUCE_OVERLAP;
    p.half = dtype != DTNN_COMM_F32;
    dtnn_projection r = {0};
    dtnn_status st = dtnn_project_bucket_auto(&prof, &p, COMM_MAX_REQUESTS, &r, &d->bucket_bytes,
                                              err);
    d->buckets = st ? 0 : r.buckets;
    free(fwd), free(bwd), free(params);
    return st;
}

static void describe(dtnn_bucket_auto_info *out, dtnn_allreduce_mode mode, const decision *d)
{
    char size[32];
    if (out->bucket_mb * MIB / sizeof(float) >= (double)out->gradient_values)
        snprintf(size, sizeof size, "one bucket");
    else
        snprintf(size, sizeof size, "%g MiB", out->bucket_mb);
    if (out->ranks <= 1) {
        snprintf(out->reason, sizeof out->reason, "auto: one process, no all-reduce");
        return;
    }
    snprintf(out->reason, sizeof out->reason, "auto %s (%.3g M gradients, %d ranks on %d "
             "node%s, link %.3g Gbit/s %.4g us measured, backward ~%.3g ms estimated%s)", size,
             (double)out->gradient_values / 1e6, out->ranks, out->nodes,
             out->nodes == 1 ? "" : "s", out->link_gbits, 1e6 * out->link_alpha,
             1e3 * d->backward, mode == DTNN_ALLREDUCE_OVERLAP ? "" : "; after backward, "
             "each bucket only adds latency");
}

dtnn_status dtnn_bucket_auto(dtnn_comm *comm, dtnn_model *m, dtnn_allreduce_mode mode,
                             dtnn_comm_dtype dtype, dtnn_bucket_auto_info *out, dtnn_error *err)
{
    memset(out, 0, sizeof *out);
    out->ranks = dtnn_comm_size(comm);
    out->nodes = dtnn_comm_node_count(comm);
    out->gradient_values = dtnn_model_grads_length(m);
    decision d;
    memset(&d, 0, sizeof d);
    if (out->ranks <= 1) {
        /* One process reduces nothing: no measurement, no buckets. */
        out->bucket_mb = ceil(4.0 * (double)out->gradient_values / MIB);
        if (out->bucket_mb < 1)
            out->bucket_mb = 1;
        describe(out, mode, &d);
        return DTNN_OK;
    }
    /* Two sizes: 1 KiB (latency) and the gradient up to 4 MiB (bandwidth), at least 256 KiB so
     * that the slope is not all noise. */
    const size_t n_small = 256;
    size_t n_large = out->gradient_values < ((size_t)1 << 20) ? out->gradient_values
                                                              : ((size_t)1 << 20);
    if (n_large < ((size_t)1 << 16))
        n_large = (size_t)1 << 16;
    float *buf = calloc(n_large, sizeof(float));
    if (!buf)
        return dtnn_error_set(err, DTNN_ERR_NOMEM, "out of memory for the link measurement");
    /* Every rank times its products at once, as every rank computes at once in training: a rank
     * timed alone would race the others' MPI polling for the cores instead. */
    const double rate = be_matmul_rate(model_backend(m));
    double t_small = 0, t_large = 0;
    dtnn_status st = time_allreduce(comm, buf, n_small, 8, &t_small, err);
    if (!st)
        st = time_allreduce(comm, buf, n_large, 4, &t_large, err);
    free(buf);
    if (!st && dtnn_comm_rank(comm) == 0)
        st = decide(m, out->ranks, mode, dtype, rate, t_small, 4.0 * n_small, t_large,
                    4.0 * (double)n_large, &d, err);
    /* Every rank takes rank 0's decision (a failed decision is broadcast as a zero size). */
    if (st)
        memset(&d, 0, sizeof d);
    dtnn_status bst = dtnn_comm_broadcast(comm, &d, sizeof d, 0, err);
    if (st || bst)
        return st ? st : bst;
    if (!(d.bucket_bytes > 0))
        return dtnn_error_set(err, DTNN_ERR_COMM, "rank 0 could not choose the bucket size: "
                              "give --bucket-mb");
    out->bucket_mb = d.bucket_bytes / MIB;
    out->buckets = (int)buckets_for(d.bucket_bytes, out->gradient_values, NULL);
    out->measured = d.measured;
    out->link_alpha = d.alpha;
    out->link_gbits = 8.0 / d.beta / 1e9;
    out->backward_seconds = d.backward;
    describe(out, mode, &d);
    return DTNN_OK;
}
