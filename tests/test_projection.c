/*
 * test_projection.c — the scaling projection (src/perf/projection.c) against cases worked by
 * hand: the ring and hierarchical all-reduce formulas, the overlap schedule of a three-layer
 * profile (a bucket that waits for backward, one that waits for the previous bucket), blocking
 * and fp16; then properties that must hold for any profile: efficiency never rises with the
 * node count or falls with a faster link, fp16 is never worse than fp32, overlap never worse
 * than the same buckets after backward, one rank is 100%; and the --project grid parser,
 * including every kind of bad input. No timing: the model is pure arithmetic.
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

int main(void)
{
    test_formulas();
    test_schedule();
    test_properties();
    test_grid();
    return test_finish("test_projection");
}
