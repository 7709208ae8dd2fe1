/*
 * projection.c — a model of data-parallel scaling: what one training step would cost on N
 * nodes, from a one-rank per-layer compute profile and an alpha-beta cost of the gradient
 * all-reduce (Hockney's model: a message of n bytes costs alpha + n beta). It runs no
 * communication; docs/scaling.md has the method, the calibration against measured runs and
 * its limits (no congestion, no contention between compute and communication for cores or
 * memory bandwidth, a perfect non-blocking network). It is a performance model, not part of
 * the communication layer: its users are `dtnn bench --project` (tools/project.c) and
 * whoever calls the public dtnn_project_* functions (dtnn.h).
 *
 * Ring all-reduce (reduce-scatter then all-gather, Patarasuk & Yuan 2009; Thakur et al. 2005):
 * 2 (P-1) steps, each moving n/P bytes over every link: 2 (P-1) alpha + 2 (P-1)/P n beta. With
 * several ranks per node in a node-major ring, only one hop per node crosses its NIC; the
 * ring moves in lock step, so each step costs the slower of that hop and an intra-node one.
 * Hierarchical (dtnn's --allreduce hierarchical): a binomial-tree reduce to the node's leader
 * and a broadcast back, ceil(log2 R) full-size messages each, around a ring among the N
 * leaders.
 *
 * The step simulation follows the gradient sync (grad_sync.c): buckets are cut from the end of
 * the flat gradient (the last layers, whose gradients backward produces first); with overlap,
 * bucket k starts at max(when backward has produced all of it, when bucket k-1 finished) — one
 * communication stream, as one MPI progress engine gives — and the exposed time is what is
 * left after backward. Without overlap every all-reduce runs after backward. 16-bit gradients
 * halve the bytes and may add a cost per value (converting and summing in software, as dtnn
 * does on a CPU), charged to the bucket's all-reduce.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"

void dtnn_project_params_default(dtnn_project_params *p)
{
    memset(p, 0, sizeof *p);
    p->nodes = 1;
    p->ranks_per_node = 1;
    p->inter.alpha = 25e-6;
    p->inter.beta = 8.0 / 10e9;
    p->intra.alpha = 5e-6;
    p->intra.beta = 1.0 / 10e9;
    p->algo = DTNN_PROJECT_RING;
    p->overlap = 1;
    p->bucket_bytes = 4.0 * 1048576.0;
}

static double ring_seconds(int p, dtnn_link l, double bytes)
{
    if (p <= 1)
        return 0.0;
    return 2.0 * (p - 1) * l.alpha + 2.0 * (p - 1) / p * bytes * l.beta;
}

static int ceil_log2(int r)
{
    int k = 0;
    while ((1 << k) < r)
        k++;
    return k;
}

double dtnn_project_allreduce_seconds(const dtnn_project_params *p, double bytes)
{
    int ranks = p->nodes * p->ranks_per_node;
    if (p->algo == DTNN_PROJECT_RING) {
        /* The ring moves in lock step, so every step costs what its slowest hop costs. */
        dtnn_link l = p->nodes > 1 ? p->inter : p->intra;
        if (p->nodes > 1 && p->ranks_per_node > 1) {
            l.alpha = fmax(l.alpha, p->intra.alpha);
            l.beta = fmax(l.beta, p->intra.beta);
        }
        return ring_seconds(ranks, l, bytes);
    }
    double tree = ceil_log2(p->ranks_per_node) * (p->intra.alpha + bytes * p->intra.beta);
    return 2.0 * tree + ring_seconds(p->nodes, p->inter, bytes);
}

static dtnn_status check(const dtnn_project_profile *prof, const dtnn_project_params *p,
                         dtnn_error *err)
{
    if (p->nodes < 1 || p->ranks_per_node < 1 || (double)p->nodes * p->ranks_per_node > 1e7)
        return dtnn_error_set(err, DTNN_ERR_ARG, "projection: %d nodes x %d ranks per node: "
                              "both must be at least 1", p->nodes, p->ranks_per_node);
    if (!(p->inter.alpha >= 0 && p->inter.beta >= 0 && p->intra.alpha >= 0 &&
          p->intra.beta >= 0 && p->half_cost >= 0 &&
          isfinite(p->inter.alpha + p->inter.beta + p->intra.alpha + p->intra.beta +
                   p->half_cost)))
        return dtnn_error_set(err, DTNN_ERR_ARG, "projection: link alpha and beta and the "
                              "fp16 cost must be finite and not negative");
    if (prof->layers < 0 || (prof->layers > 0 && (!prof->fwd_seconds || !prof->bwd_seconds ||
                                                  !prof->params)))
        return dtnn_error_set(err, DTNN_ERR_ARG, "projection: a profile of %d layers without "
                              "its arrays", prof->layers);
    double t = prof->other_seconds;
    for (int i = 0; i < prof->layers; i++)
        t += prof->fwd_seconds[i] + prof->bwd_seconds[i];
    if (!(t > 0) || !isfinite(t) || prof->other_seconds < 0)
        return dtnn_error_set(err, DTNN_ERR_ARG, "projection: the profile's compute time must "
                              "be positive and finite");
    for (int i = 0; i < prof->layers; i++)
        if (prof->fwd_seconds[i] < 0 || prof->bwd_seconds[i] < 0)
            return dtnn_error_set(err, DTNN_ERR_ARG, "projection: layer %d has a negative time",
                                  i);
    return DTNN_OK;
}

dtnn_status dtnn_project_step(const dtnn_project_profile *prof, const dtnn_project_params *p,
                              dtnn_projection *out, dtnn_error *err)
{
    memset(out, 0, sizeof *out);
    dtnn_status st = check(prof, p, err);
    if (st)
        return st;
    size_t total = 0;
    double fwd = 0, bwd = 0;
    for (int i = 0; i < prof->layers; i++) {
        total += prof->params[i];
        fwd += prof->fwd_seconds[i];
        bwd += prof->bwd_seconds[i];
    }
    out->compute = fwd + bwd + prof->other_seconds;
    out->efficiency = 1.0;
    if (total == 0 || p->nodes * p->ranks_per_node == 1)
        return DTNN_OK;
    /* Floats per bucket, as grad_sync.c: one bucket for the blocking ring. */
    size_t per = (size_t)(p->bucket_bytes / sizeof(float));
    if ((p->algo == DTNN_PROJECT_RING && !p->overlap) || per == 0 || per > total)
        per = total;
    const double elem_bytes = p->half ? 2.0 : 4.0;
    const double backward_end = fwd + bwd;
    double comm_free = p->overlap ? 0.0 : backward_end;
    /* Walk backward (last layer first) and the buckets (last range first) together: `done` is
     * when the layer holding the current bucket's first element has finished backward. */
    int layer = prof->layers - 1;
    size_t layer_begin = total - prof->params[layer];
    double done = fwd + prof->bwd_seconds[layer];
    size_t end = total;
    while (end > 0) {
        size_t begin = end > per ? end - per : 0;
        while (begin < layer_begin) {
            layer--;
            layer_begin -= prof->params[layer];
            done += prof->bwd_seconds[layer];
        }
        double start = p->overlap ? (done > comm_free ? done : comm_free) : comm_free;
        double t = dtnn_project_allreduce_seconds(p, (double)(end - begin) * elem_bytes);
        if (p->half)
            t += p->half_cost * (double)(end - begin);
        comm_free = start + t;
        out->comm += t;
        out->buckets++;
        end = begin;
    }
    out->exposed = comm_free > backward_end ? comm_free - backward_end : 0.0;
    out->efficiency = out->compute / (out->compute + out->exposed);
    return DTNN_OK;
}

/* One list of the grid: values or ranges A-B separated by '/', up to `stop`. */
static dtnn_status parse_list(const char *s, const char *stop, int is_nodes, int *nodes,
                              double *gbits, int max, int *count, dtnn_error *err)
{
    const char *what = is_nodes ? "NODES" : "GBITS";
    *count = 0;
    if (s == stop)
        return dtnn_error_set(err, DTNN_ERR_ARG, "--project: %s is empty (NODES,GBITS, e.g. "
                              "8-1024,10/25/100)", what);
    while (s < stop) {
        char *e;
        double a = strtod(s, &e), b = a;
        if (e == s)
            return dtnn_error_set(err, DTNN_ERR_ARG, "--project: %s: '%.*s' is not a number",
                                  what, (int)(stop - s), s);
        if (*e == '-' && is_nodes) {
            const char *s2 = e + 1;
            b = strtod(s2, &e);
            if (e == s2)
                return dtnn_error_set(err, DTNN_ERR_ARG, "--project: %s: the range '%.*s' "
                                      "has no end", what, (int)(stop - s), s);
        }
        if (e != stop && *e != '/')
            return dtnn_error_set(err, DTNN_ERR_ARG, "--project: %s: unexpected '%.*s'", what,
                                  (int)(stop - e), e);
        if (is_nodes) {
            if (a != floor(a) || b != floor(b) || a < 1 || b < a || b > 1 << 20)
                return dtnn_error_set(err, DTNN_ERR_ARG, "--project: NODES: %g-%g must be "
                                      "whole numbers with 1 <= A <= B <= %d", a, b, 1 << 20);
            for (double v = a; v <= b; v *= 2) {
                if (*count >= max)
                    return dtnn_error_set(err, DTNN_ERR_ARG, "--project: more than %d node "
                                          "counts", max);
                nodes[(*count)++] = (int)v;
            }
        } else {
            if (!(a > 0) || !isfinite(a))
                return dtnn_error_set(err, DTNN_ERR_ARG, "--project: GBITS: %g must be a "
                                      "positive link rate", a);
            if (*count >= max)
                return dtnn_error_set(err, DTNN_ERR_ARG, "--project: more than %d link "
                                      "rates", max);
            gbits[(*count)++] = a;
        }
        s = e == stop ? e : e + 1;
        if (e != stop && s == stop)
            return dtnn_error_set(err, DTNN_ERR_ARG, "--project: %s ends with '/'", what);
    }
    return DTNN_OK;
}

dtnn_status dtnn_project_parse_grid(const char *spec, int *nodes, int max_nodes, int *n_nodes,
                                    double *gbits, int max_gbits, int *n_gbits, dtnn_error *err)
{
    const char *comma = spec ? strchr(spec, ',') : NULL;
    if (!comma || strchr(comma + 1, ','))
        return dtnn_error_set(err, DTNN_ERR_ARG, "--project must be NODES,GBITS (e.g. "
                              "8-1024,10/25/100), not '%s'", spec ? spec : "");
    dtnn_status st = parse_list(spec, comma, 1, nodes, NULL, max_nodes, n_nodes, err);
    if (!st)
        st = parse_list(comma + 1, comma + 1 + strlen(comma + 1), 0, NULL, gbits, max_gbits,
                        n_gbits, err);
    return st;
}
