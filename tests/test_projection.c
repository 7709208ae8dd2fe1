/*
 * test_projection.c — the scaling projection (src/perf/projection.c) against cases worked by
 * hand: the ring and hierarchical all-reduce formulas, the overlap schedule of a three-layer
 * profile (a bucket that waits for backward, one that waits for the previous bucket), blocking
 * and fp16; then properties that must hold for any profile: efficiency never rises with the
 * node count or falls with a faster link, fp16 is never worse than fp32, overlap never worse
 * than the same buckets after backward, one rank is 100%; and the --project grid parser,
 * including every kind of bad input; and the choice of --bucket-mb auto against the rules it
 * must keep. No timing: the model is pure arithmetic (one process measures nothing).
 */
#include <math.h>
#include <string.h>

#include "testutil.h"

static int near(double got, double want, const char *what)
{
    int ok = fabs(got - want) <= 1e-12 + 1e-9 * fabs(want);
    printf("%-44s got %.9g want %.9g%s\n", what, got, want, ok ? "" : "  <-- MISMATCH");
    if (!ok)
        test_failures++;
    return ok;
}

static void test_formulas(void)
{
    dtnn_project_params p;
    dtnn_project_params_default(&p);
    p.nodes = 4;
    p.inter = (dtnn_link){1e-3, 1e-6};
    /* 2 (4-1) 1e-3 + 2 (3/4) 1000 1e-6 */
    near(dtnn_project_allreduce_seconds(&p, 1000), 7.5e-3, "ring, 4 nodes x 1");
    /* 8 ranks on 2 nodes: the ring over 8 ranks, priced on the inter-node link. */
    p.nodes = 2;
    p.ranks_per_node = 4;
    near(dtnn_project_allreduce_seconds(&p, 1000), 14e-3 + 1.75e-3, "ring, 2 nodes x 4");
    /* One node: the intra-node link. */
    p.nodes = 1;
    p.intra = (dtnn_link){1e-4, 1e-7};
    near(dtnn_project_allreduce_seconds(&p, 1000), 6e-4 + 1.5e-4, "ring, 1 node x 4");
    /* Hierarchical, 2 nodes x 4: reduce and broadcast, log2 4 = 2 messages each of
     * 1e-4 + 1000 1e-7, plus a ring over 2 nodes: 2 1e-3 + 1000 1e-6. */
    p.nodes = 2;
    p.algo = DTNN_PROJECT_HIERARCHICAL;
    near(dtnn_project_allreduce_seconds(&p, 1000), 8e-4 + 3e-3, "hierarchical, 2 nodes x 4");
    p.ranks_per_node = 3; /* ceil(log2 3) = 2 */
    near(dtnn_project_allreduce_seconds(&p, 1000), 8e-4 + 3e-3, "hierarchical, 2 nodes x 3");
    p.ranks_per_node = 1;
    near(dtnn_project_allreduce_seconds(&p, 1000), 3e-3, "hierarchical, 2 nodes x 1");
}

/* Layers in forward order: 100 parameters, none, 300; forward 1 s each, backward 2, 1, 3 s,
 * 0.5 s of optimizer. Backward ends the last layer at 3 + 3 = 6 s, the middle at 7, the first
 * at 9. Buckets of 200 floats from the end: [200, 400) lies in the last layer (ready at 6),
 * [0, 200) begins in the first (ready at 9). Link: 2 nodes, alpha 0.5 s, beta 4 ms/byte, so a
 * bucket of B bytes takes 2 (0.5) + B 4e-3 s. */
static void test_schedule(void)
{
    const double fwd[3] = {1, 1, 1}, bwd[3] = {2, 1, 3};
    const size_t params[3] = {100, 0, 300};
    dtnn_project_profile prof = {3, fwd, bwd, params, 0.5};
    dtnn_project_params p;
    dtnn_project_params_default(&p);
    p.nodes = 2;
    p.inter = (dtnn_link){0.5, 4e-3};
    p.bucket_bytes = 800;
    dtnn_projection r;
    dtnn_error err = {0};

    /* Overlap: 800 bytes take 4.2 s; bucket 0 runs 6 -> 10.2, bucket 1 is ready at 9 but waits
     * for the stream: 10.2 -> 14.4. Exposed 14.4 - 9 = 5.4. */
    CHECK_OK(dtnn_project_step(&prof, &p, &r, &err), &err);
    near(r.compute, 9.5, "compute");
    near(r.comm, 8.4, "overlap: communication");
    near(r.exposed, 5.4, "overlap: exposed");
    near(r.efficiency, 9.5 / 14.9, "overlap: efficiency");
    CHECK(r.buckets == 2);

    /* fp16: 400 bytes take 2.6 s; 6 -> 8.6, then ready at 9: 9 -> 11.6. Exposed 2.6. */
    p.half = 1;
    CHECK_OK(dtnn_project_step(&prof, &p, &r, &err), &err);
    near(r.exposed, 2.6, "overlap fp16: exposed (waits for backward)");
    /* A cost of 1 ms per value adds 0.2 s to each bucket: 6 -> 8.8, 9 -> 11.8. */
    p.half_cost = 1e-3;
    CHECK_OK(dtnn_project_step(&prof, &p, &r, &err), &err);
    near(r.exposed, 2.8, "overlap fp16, 1 ms per value: exposed");
    p.half_cost = 0;

    /* Blocking ring: one bucket of 1600 bytes after backward: 1 + 6.4 s. */
    p.half = 0;
    p.overlap = 0;
    CHECK_OK(dtnn_project_step(&prof, &p, &r, &err), &err);
    near(r.exposed, 7.4, "blocking ring: exposed");
    CHECK(r.buckets == 1);

    /* Hierarchical, as dtnn runs it: its buckets one after another after backward; with one
     * rank per node the ring over 2 nodes: 2 x 4.2 s. */
    p.algo = DTNN_PROJECT_HIERARCHICAL;
    CHECK_OK(dtnn_project_step(&prof, &p, &r, &err), &err);
    near(r.exposed, 8.4, "hierarchical (after backward): exposed");
    CHECK(r.buckets == 2);

    /* One rank: nothing to communicate. */
    p.nodes = 1;
    CHECK_OK(dtnn_project_step(&prof, &p, &r, &err), &err);
    near(r.efficiency, 1.0, "1 node x 1 rank: efficiency");

    /* Bad input is refused with a message. */
    p.nodes = 0;
    CHECK(dtnn_project_step(&prof, &p, &r, &err) == DTNN_ERR_ARG);
    p.nodes = 2;
    p.inter.beta = -1;
    CHECK(dtnn_project_step(&prof, &p, &r, &err) == DTNN_ERR_ARG);
    printf("refused: %s\n", err.message);
}

/* Properties on a made-up 60-layer profile with a fixed pseudo-random pattern. */
static void test_properties(void)
{
    enum { L = 60 };
    double fwd[L], bwd[L];
    size_t params[L];
    unsigned s = 7;
    for (int i = 0; i < L; i++) {
        s = s * 1103515245u + 12345u;
        fwd[i] = 1e-3 * (1 + (s >> 16) % 20);
        bwd[i] = 2 * fwd[i];
        params[i] = (i % 3 == 2) ? 0 : (size_t)((s >> 8) % 2000000);
    }
    dtnn_project_profile prof = {L, fwd, bwd, params, 5e-3};
    const double gbits[] = {1, 10, 25, 100};
    int violations = 0, checked = 0;
    for (int c = 0; c < 8; c++)
        for (int rpn = 1; rpn <= 4; rpn *= 4)
            for (int g = 0; g < 4; g++) {
                dtnn_project_params p;
                dtnn_project_params_default(&p);
                p.algo = (c & 2) ? DTNN_PROJECT_HIERARCHICAL : DTNN_PROJECT_RING;
                p.overlap = c & 1;
                p.half = c >= 4;
                p.ranks_per_node = rpn;
                p.inter.beta = 8.0 / (gbits[g] * 1e9);
                double prev = 2.0;
                for (int nodes = 1; nodes <= 4096; nodes *= 2) {
                    dtnn_projection r, other;
                    dtnn_error err = {0};
                    p.nodes = nodes;
                    CHECK_OK(dtnn_project_step(&prof, &p, &r, &err), &err);
                    checked++;
                    if (r.efficiency > prev + 1e-12 || r.efficiency <= 0 || r.efficiency > 1) {
                        printf("efficiency rose or left (0, 1]: variant %d, %d x %d, %g Gbit/s: "
                               "%g after %g\n", c, nodes, rpn, gbits[g], r.efficiency, prev);
                        violations++;
                    }
                    prev = r.efficiency;
                    dtnn_project_params q = p;
                    if (!q.half) { /* fp16 never worse than fp32 */
                        q.half = 1;
                        CHECK_OK(dtnn_project_step(&prof, &q, &other, &err), &err);
                        if (other.efficiency < r.efficiency - 1e-12)
                            violations++, printf("fp16 worse than fp32: variant %d, %d nodes, "
                                                 "%g Gbit/s\n", c, nodes, gbits[g]);
                    }
                    q = p;
                    if (g < 3) { /* a faster link never hurts */
                        q.inter.beta = 8.0 / (gbits[g + 1] * 1e9);
                        CHECK_OK(dtnn_project_step(&prof, &q, &other, &err), &err);
                        if (other.efficiency < r.efficiency - 1e-12)
                            violations++, printf("faster link worse: variant %d, %d nodes\n", c,
                                                 nodes);
                    }
                    q = p;
                    if (p.algo == DTNN_PROJECT_HIERARCHICAL && !p.overlap) {
                        /* The same buckets started as backward produces them never finish
                         * later than after backward. */
                        q.overlap = 1;
                        CHECK_OK(dtnn_project_step(&prof, &q, &other, &err), &err);
                        if (other.efficiency < r.efficiency - 1e-12)
                            violations++, printf("overlap worse than after backward: %d nodes\n",
                                                 nodes);
                    }
                    if (nodes * rpn == 1 && r.efficiency != 1.0)
                        violations++, printf("one rank is not 100%%: %g\n", r.efficiency);
                }
            }
    printf("properties: %d projections, %d violations\n", checked, violations);
    CHECK(violations == 0);
}

static void test_grid(void)
{
    int nodes[16], nn = 0, ng = 0;
    double gbits[8];
    dtnn_error err = {0};
    CHECK_OK(dtnn_project_parse_grid("8-1024,10/25/100", nodes, 16, &nn, gbits, 8, &ng, &err),
             &err);
    CHECK(nn == 8 && nodes[0] == 8 && nodes[7] == 1024 && ng == 3 && gbits[0] == 10 &&
          gbits[1] == 25 && gbits[2] == 100);
    CHECK_OK(dtnn_project_parse_grid("2/4/3-12,1.5", nodes, 16, &nn, gbits, 8, &ng, &err), &err);
    CHECK(nn == 5 && nodes[0] == 2 && nodes[1] == 4 && nodes[2] == 3 && nodes[3] == 6 &&
          nodes[4] == 12 && ng == 1 && gbits[0] == 1.5);
    static const char *const bad[] = {
        "8-1024", "0-8,10", "8-4,10", "8,0", "8,10,", "a,10", "8,10/", "8-,10", "2.5,10",
        "8,10-20", ",10", "8,", "8,-1", "8,nan", "8,inf", "1-1048577,10", "1-1024,10",
        "8//16,10", "", "8 ,10",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err.message[0] = '\0';
        dtnn_status st = dtnn_project_parse_grid(bad[i], nodes, 8, &nn, gbits, 8, &ng, &err);
        printf("'%s' -> %s\n", bad[i], st ? err.message : "ACCEPTED");
        CHECK(st == DTNN_ERR_ARG && strstr(err.message, "--project"));
    }
    CHECK(dtnn_project_parse_grid(NULL, nodes, 8, &nn, gbits, 8, &ng, &err) == DTNN_ERR_ARG);
}

/* A profile of L equal layers of `values` floats in all, backward B seconds in all: the
 * gradient produced evenly, as the closed form of dtnn_project_bucket_auto assumes. */
enum { UNIFORM_LAYERS = 128 };
typedef struct {
    double fwd[UNIFORM_LAYERS], bwd[UNIFORM_LAYERS];
    size_t params[UNIFORM_LAYERS];
    dtnn_project_profile prof;
} uniform_profile;

static void uniform(uniform_profile *u, size_t values, double backward)
{
    for (int i = 0; i < UNIFORM_LAYERS; i++) {
        u->fwd[i] = backward / 2 / UNIFORM_LAYERS;
        u->bwd[i] = backward / UNIFORM_LAYERS;
        u->params[i] = values / UNIFORM_LAYERS;
    }
    u->prof = (dtnn_project_profile){UNIFORM_LAYERS, u->fwd, u->bwd, u->params, 1e-3};
}

static double choose(const dtnn_project_profile *prof, const dtnn_project_params *p, int max,
                     dtnn_projection *r)
{
    double bytes = 0;
    dtnn_error err = {0};
    CHECK_OK(dtnn_project_bucket_auto(prof, p, max, r, &bytes, &err), &err);
    return bytes;
}

/* --bucket-mb auto's choice: larger buckets for more ranks and for slower links, never more
 * buckets than the request limit allows, never worse than a fixed size, one bucket without
 * overlap, near the closed form on an even profile. */
static void test_bucket_auto(void)
{
    static uniform_profile u;
    uniform(&u, 25000000, 0.1); /* ResNet-50-like: 100 MB of gradient, 100 ms backward */
    dtnn_project_params p;
    dtnn_project_params_default(&p);
    p.inter.alpha = 13.8e-6;
    dtnn_projection r;
    const double gbits[] = {100, 25, 10, 1};
    for (int g = 0; g < 4; g++) {
        p.inter.beta = 8.0 / (gbits[g] * 1e9);
        double prev = 0, first = 0;
        for (int nodes = 2; nodes <= 4096; nodes *= 2) {
            p.nodes = nodes;
            double b = choose(&u.prof, &p, 0, &r);
            /* Where communication hides (under 1% of the step shows) the size hardly matters
             * and the tail bucket's remainder makes the choice jitter between 1 and 2 MiB. */
            if (r.exposed < 0.01 * r.compute)
                continue;
            if (b < prev)
                printf("auto: %d nodes at %g Gbit/s chose %g MiB, fewer than %g at half the "
                       "nodes  <-- MISMATCH\n", nodes, gbits[g], b / 1048576, prev / 1048576),
                    test_failures++;
            first = first ? first : b;
            prev = b;
        }
        printf("auto at %g Gbit/s: %g MiB where communication first shows, %g MiB on 4096 "
               "nodes\n", gbits[g],
               first / 1048576, prev / 1048576);
        CHECK(prev > first);
    }
    for (int nodes = 32; nodes <= 512; nodes *= 4) {
        p.nodes = nodes;
        double prev = 0, first = 0;
        for (int g = 0; g < 4; g++) {
            p.inter.beta = 8.0 / (gbits[g] * 1e9);
            double b = choose(&u.prof, &p, 0, &r);
            if (r.exposed < 0.01 * r.compute)
                continue;
            if (b < prev)
                printf("auto: %d nodes: %g Gbit/s chose %g MiB, fewer than %g for a faster "
                       "link  <-- MISMATCH\n", nodes, gbits[g], b / 1048576, prev / 1048576),
                    test_failures++;
            first = first ? first : b;
            prev = b;
        }
        printf("auto on %d nodes: %g MiB at the fastest link where communication shows, %g "
               "MiB at 1 Gbit/s\n", nodes, first / 1048576,
               prev / 1048576);
        CHECK(prev > first);
    }

    /* The closed form, where communication is the limit: k = sqrt(B / a) buckets, within a
     * power of two (the sizes searched are powers of two). */
    p.nodes = 256;
    p.inter.beta = 8.0 / 10e9;
    const double a = 2.0 * (p.nodes - 1) * p.inter.alpha;
    const double k = sqrt(0.1 / a), want = 4.0 * 25000000 / k, got = choose(&u.prof, &p, 0, &r);
    printf("closed form at 256 nodes, 10 Gbit/s: %.3g MiB; chosen %g MiB\n", want / 1048576,
           got / 1048576);
    CHECK(got >= want / 2 && got <= want * 2);

    /* The request limit: with 20 G values (80 GB) 1 MiB would need 76294 buckets. */
    static uniform_profile big;
    uniform(&big, (size_t)20000000000ull, 1.0);
    p.nodes = 8;
    p.inter.beta = 8.0 / 100e9;
    const size_t total = (size_t)20000000000ull / UNIFORM_LAYERS * UNIFORM_LAYERS;
    const int limits[] = {0, 4096, 100, 3, 1};
    for (int i = 0; i < 5; i++) {
        double b = choose(&big.prof, &p, limits[i], &r);
        size_t per = (size_t)(b / sizeof(float));
        size_t count = (total + per - 1) / per;
        int limit = limits[i] ? limits[i] : 4096; /* COMM_MAX_REQUESTS */
        printf("limit %d buckets: %g MiB, %zu buckets\n", limit, b / 1048576, count);
        CHECK(count <= (size_t)limit && r.buckets == (int)count);
    }

    /* Never worse than a fixed size of 1 MiB or more (by more than the tie margin), in every
     * variant; no overlap: one bucket. */
    int violations = 0, checked = 0;
    for (int c = 0; c < 8; c++)
        for (int nodes = 2; nodes <= 1024; nodes *= 4)
            for (int g = 0; g < 4; g++) {
                dtnn_project_params q;
                dtnn_project_params_default(&q);
                q.algo = (c & 2) ? DTNN_PROJECT_HIERARCHICAL : DTNN_PROJECT_RING;
                q.overlap = c & 1;
                q.half = c >= 4;
                q.nodes = nodes;
                q.ranks_per_node = 1 + (c & 1) * 3;
                q.inter.beta = 8.0 / (gbits[g] * 1e9);
                double b = choose(&u.prof, &q, 0, &r);
                if (!q.overlap && b / sizeof(float) < 25000000.0)
                    violations++, printf("no overlap, yet %g MiB buckets\n", b / 1048576);
                for (double mb = 1; mb <= 512; mb *= 2) {
                    dtnn_projection fixed;
                    dtnn_error err = {0};
                    q.bucket_bytes = mb * 1048576;
                    CHECK_OK(dtnn_project_step(&u.prof, &q, &fixed, &err), &err);
                    checked++;
                    if (fixed.exposed < r.exposed - DTNN_BUCKET_AUTO_TIE * r.compute - 1e-12)
                        violations++, printf("variant %d, %d nodes, %g Gbit/s: %g MiB exposes "
                                             "%g s, auto (%g MiB) %g s\n", c, nodes, gbits[g],
                                             mb, fixed.exposed, b / 1048576, r.exposed);
                }
            }
    printf("auto against fixed sizes: %d projections, %d violations\n", checked, violations);
    CHECK(violations == 0);
}

/* One process: auto measures nothing and cuts one bucket. */
static void test_bucket_auto_single(void)
{
    dtnn_error err = {0};
    dtnn_comm *comm = dtnn_comm_create_single();
    dtnn_model *m = dtnn_model_from_spec("lenet5", 10, 1, 28, 28, &err);
    CHECK(comm && m);
    if (!comm || !m)
        return;
    dtnn_build_params bp;
    dtnn_build_params_default(&bp);
    bp.max_batch = 4;
    bp.device = tu_device();
    CHECK_OK(dtnn_model_build(m, &bp, &err), &err);
    dtnn_bucket_auto_info info;
    CHECK_OK(dtnn_bucket_auto(comm, m, DTNN_ALLREDUCE_OVERLAP, DTNN_COMM_F32, &info, &err),
             &err);
    printf("one process: %s\n", info.reason);
    CHECK(!info.measured && info.ranks == 1);
    dtnn_grad_sync *gs = dtnn_grad_sync_create(comm, m, DTNN_ALLREDUCE_OVERLAP,
                                               DTNN_BUCKET_AUTO, DTNN_COMM_F32, &err);
    CHECK(gs != NULL);
    if (gs) {
        CHECK(dtnn_grad_sync_bucket_count(gs) == 1);
        CHECK(dtnn_grad_sync_bucket_mb(gs) * 1048576 >= 4.0 * dtnn_model_param_count(m));
        CHECK(strstr(dtnn_grad_sync_bucket_reason(gs), "auto") != NULL);
    }
    dtnn_grad_sync_free(gs);
    gs = dtnn_grad_sync_create(comm, m, DTNN_ALLREDUCE_OVERLAP, 0.05, DTNN_COMM_F32, &err);
    CHECK(gs && dtnn_grad_sync_bucket_mb(gs) == 0.05 && dtnn_grad_sync_bucket_count(gs) > 1 &&
          !*dtnn_grad_sync_bucket_reason(gs));
    dtnn_grad_sync_free(gs);
    dtnn_model_free(m);
    dtnn_comm_free(comm);
}

int main(void)
{
    test_formulas();
    test_schedule();
    test_properties();
    test_grid();
    test_bucket_auto();
    test_bucket_auto_single();
    return test_finish("test_projection");
}
