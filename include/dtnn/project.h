/*
 * dtnn/project.h — the scaling projection: an alpha-beta model of the gradient all-reduce
 * (ring or hierarchical, with or without overlap) that prices a training step on a cluster
 * from a one-node profile (`dtnn bench --project`, docs/scaling.md), and the bucket size it
 * would choose. Part of the public API; dtnn.h includes it.
 */
#ifndef DTNN_API_PROJECT_H
#define DTNN_API_PROJECT_H

#include "../dtnn.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A link: alpha seconds per message, beta seconds per byte. */
typedef struct {
    double alpha, beta;
} dtnn_link;

typedef enum { DTNN_PROJECT_RING = 0, DTNN_PROJECT_HIERARCHICAL } dtnn_project_algo;

typedef struct {
    int nodes, ranks_per_node;
    dtnn_link inter;            /* between nodes (one NIC per node) */
    dtnn_link intra;            /* between the ranks of one node */
    dtnn_project_algo algo;
    int overlap;                /* buckets start as backward produces them (else after it) */
    int half;                   /* gradients travel as 16-bit values: half the bytes */
    double half_cost;           /* with half: seconds per value to convert and sum 16-bit
                                 * values (software fp16 on a CPU; about 0 on a GPU) */
    double bucket_bytes;        /* of fp32 gradient; <= 0 or without overlap-ring: see below */
} dtnn_project_params;
/* 1 node x 1 rank, 10 Gbit/s at 100%, alpha 25 us; intra 10 GB/s, 5 us; ring, overlap,
 * fp32, 4 MiB buckets. */
void dtnn_project_params_default(dtnn_project_params *p);

/* What one training step costs on one rank, from a per-layer profile. Layers are in forward
 * order; layer i's gradient is params[i] consecutive floats of the flat buffer, after those of
 * layers 0..i-1 (the model's layout); backward runs from the last layer to the first. */
typedef struct {
    int layers;
    const double *fwd_seconds, *bwd_seconds;  /* [layers] */
    const size_t *params;                     /* [layers] */
    double other_seconds;   /* loss and optimizer: not overlappable with the all-reduce */
} dtnn_project_profile;

typedef struct {
    double compute;         /* forward + backward + other, seconds */
    double comm;            /* sum of the all-reduces of the step */
    double exposed;         /* communication after backward ended, seconds */
    double efficiency;      /* compute / (compute + exposed) */
    int buckets;
} dtnn_projection;

/* Seconds of one all-reduce of `bytes` (as sent: already halved for 16-bit) under p's
 * algorithm: ring over all ranks: 2 (P-1) alpha + 2 (P-1)/P bytes beta (with nodes > 1 the
 * slower of the inter- and intra-node alpha and beta, each); hierarchical: binomial reduce and broadcast inside the node, each
 * ceil(log2 R) (alpha_intra + bytes beta_intra), around a ring over the nodes. */
double dtnn_project_allreduce_seconds(const dtnn_project_params *p, double bytes);
/* Simulates one step: buckets are cut from the end of the flat gradient as dtnn's gradient
 * sync cuts them; with overlap each starts when backward has produced all of it and the
 * previous bucket has finished (one communication stream); without, all run after backward
 * (one bucket for the ring, as --allreduce blocking; buckets for hierarchical, as dtnn's). */
dtnn_status dtnn_project_step(const dtnn_project_profile *prof, const dtnn_project_params *p,
                              dtnn_projection *out, dtnn_error *err);
/* The bucket size of `--bucket-mb auto`: the one of least exposed communication in
 * dtnn_project_step's model for profile prof and p's links, ranks, algorithm, overlap and
 * dtype (p->bucket_bytes is ignored), over the sizes 1, 2, 4, ... MiB up to the first that
 * holds the whole gradient in one bucket, leaving out those that would cut more than
 * max_buckets buckets (<= 0: dtnn's limit of requests in flight, which dtnn_grad_sync_create
 * enforces). Sizes that expose within DTNN_BUCKET_AUTO_TIE of the step's compute time of the
 * least exposure tie, and the largest of them wins (fewer messages; the model does not see
 * their per-call costs). *bucket_bytes gets the size, *best (may be NULL) its projection.
 * The closed form it approximates: backward producing G bytes of gradient evenly over B
 * seconds, an all-reduce of n bytes costing a + c n (ring: a = 2 (P-1) alpha, c = 2 (P-1)/P
 * beta), k buckets expose max(a + c G / k, B / k + k a + c G - B), least at
 * k = max(sqrt(B / a), (B - c G) / a): more ranks (larger a) or a slower link (larger c) mean
 * fewer, larger buckets; without overlap one bucket is best. */
#define DTNN_BUCKET_AUTO_TIE 1e-3
dtnn_status dtnn_project_bucket_auto(const dtnn_project_profile *prof,
                                     const dtnn_project_params *p, int max_buckets,
                                     dtnn_projection *best, double *bucket_bytes,
                                     dtnn_error *err);

/* Parses "NODES,GBITS", e.g. "8-1024,10/25/100" or "2/4,1/10": NODES is a '/'-separated list
 * of node counts or ranges A-B (A, 2A, 4A, .. up to B), GBITS a '/'-separated list of positive
 * link rates in Gbit/s. Fills at most max_* values; errors name the part at fault. */
dtnn_status dtnn_project_parse_grid(const char *spec, int *nodes, int max_nodes, int *n_nodes,
                                    double *gbits, int max_gbits, int *n_gbits, dtnn_error *err);

#ifdef __cplusplus
}
#endif
#endif
