/*
 * project.c — `dtnn bench --project NODES,GBITS`: after a one-rank profiled benchmark, the
 * projected scaling efficiency of data-parallel training on many nodes, from the per-layer
 * forward/backward times just measured and the alpha-beta all-reduce model of the library
 * (src/perf/projection.c). It prints a table of every all-reduce variant (ring or
 * hierarchical, blocking or overlapped, fp32 or fp16) and one JSON line per cell; a bucket
 * size "auto" gives each cell the size --bucket-mb auto would choose with this profile
 * (dtnn_project_bucket_auto). --project-profile flops takes the layers' shape from their FLOPs
 * instead of a timed run (deterministic, for documents). What it does not do: measure any
 * network; the link parameters come from options whose defaults are the calibration in
 * docs/scaling.md.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "project.h"

#define MAX_NODES 64
#define MAX_GBITS 16
#define MAX_LIST 8

/* A '/'-separated list of positive numbers (checked by project_check_options); with
 * allow_auto, "auto" stands for 0 (a bucket size chosen per cell). */
static int parse_list(const char *s, double *v, int *count, int allow_auto)
{
    *count = 0;
    while (s && *s) {
        char *e;
        double x = strtod(s, &e);
        if (allow_auto && !strncmp(s, "auto", 4) && (s[4] == '/' || !s[4])) {
            x = 0;
            e = (char *)s + 4;
        } else if (e == s || !(x > 0) || !isfinite(x)) {
            return -1;
        }
        if ((*e && *e != '/') || *count >= MAX_LIST)
            return -1;
        v[(*count)++] = x;
        s = *e ? e + 1 : e;
        if (*e && !*s)
            return -1;
    }
    return *count > 0 ? 0 : -1;
}

int project_check_options(const cli_opt *o, int n)
{
    const char *cmd = "bench";
    int nodes[MAX_NODES], n_nodes, n_gbits;
    double gbits[MAX_GBITS];
    dtnn_error err = {0};
    if (dtnn_project_parse_grid(cli_str(o, n, "project"), nodes, MAX_NODES, &n_nodes, gbits,
                                MAX_GBITS, &n_gbits, &err))
        return fprintf(stderr, "dtnn %s: %s\n", cmd, err.message), 2;
    double list[MAX_LIST];
    int count;
    int whole = !parse_list(cli_str(o, n, "ranks-per-node"), list, &count, 0);
    for (int i = 0; whole && i < count; i++)
        whole = list[i] == floor(list[i]) && list[i] <= 1024;
    if (!whole)
        return cli_usage_error(cmd, "--ranks-per-node must be up to 8 whole numbers in [1, "
                               "1024] separated by '/', not '%s'",
                               cli_str(o, n, "ranks-per-node"));
    if (cli_given(o, n, "project-bucket-mb") &&
        parse_list(cli_str(o, n, "project-bucket-mb"), list, &count, 1))
        return cli_usage_error(cmd, "--project-bucket-mb must be up to 8 positive sizes or "
                               "auto separated by '/', not '%s'",
                               cli_str(o, n, "project-bucket-mb"));
    const char *shape = cli_str(o, n, "project-profile");
    if (strcmp(shape, "measured") && strcmp(shape, "flops"))
        return cli_usage_error(cmd, "--project-profile is measured or flops, not '%s'", shape);
    if (!strcmp(shape, "flops") && !cli_given(o, n, "step-ms"))
        return cli_usage_error(cmd, "%s", "--project-profile flops has no time of its own: "
                               "give --step-ms");
    if (cli_int(o, n, "project-batch") < 0)
        return cli_usage_error(cmd, "--project-batch must not be negative, not %s",
                               cli_str(o, n, "project-batch"));
    static const char *const nonneg[] = {"alpha-us", "intra-alpha-us", "fp16-ns-per-value"};
    for (int i = 0; i < 3; i++)
        if (!(cli_float(o, n, nonneg[i]) >= 0) || !isfinite(cli_float(o, n, nonneg[i])))
            return fprintf(stderr, "dtnn %s: --%s must be >= 0, not %s\n", cmd,
                           nonneg[i], cli_str(o, n, nonneg[i])), 2;
    static const char *const pos[] = {"link-efficiency", "intra-gbs", "compute-scale"};
    for (int i = 0; i < 3; i++)
        if (!(cli_float(o, n, pos[i]) > 0) || !isfinite(cli_float(o, n, pos[i])))
            return fprintf(stderr, "dtnn %s: --%s must be positive, not %s\n", cmd, pos[i],
                           cli_str(o, n, pos[i])), 2;
    if (cli_float(o, n, "link-efficiency") > 1)
        return cli_usage_error(cmd, "--link-efficiency is a share of the line rate, at most 1, "
                               "not %s", cli_str(o, n, "link-efficiency"));
    if (cli_given(o, n, "step-ms") &&
        (!(cli_float(o, n, "step-ms") > 0) || !isfinite(cli_float(o, n, "step-ms"))))
        return cli_usage_error(cmd, "--step-ms must be positive, not %s",
                               cli_str(o, n, "step-ms"));
    if (cli_given(o, n, "step-ms") && cli_given(o, n, "compute-scale"))
        return cli_usage_error(cmd, "%s", "--step-ms and --compute-scale both set the compute "
                               "time: give one");
    return 0;
}

typedef struct {
    const int *nodes;
    int n_nodes;
    const double *gbits;
    int n_gbits;
    double link_efficiency;
    int batch;
    const char *model;
} grid;

static const char *variant_name(int v);

/* One table (every node count x link rate x variant) for pp's ranks per node and buckets,
 * then its cells as JSON lines. Bucket size 0 is auto: each cell gets the size
 * dtnn_project_bucket_auto chooses for it, and the table the ring-ovl fp32 choice. */
static int print_grid(const dtnn_project_profile *prof, dtnn_project_params *pp, const grid *g)
{
    dtnn_error err = {0};
    const int is_auto = pp->bucket_bytes <= 0;
    if (is_auto)
        printf("\n%d rank%s per node, auto buckets\n%6s %7s", pp->ranks_per_node,
               pp->ranks_per_node == 1 ? "" : "s", "nodes", "Gbit/s");
    else
        printf("\n%d rank%s per node, %g MiB buckets\n%6s %7s", pp->ranks_per_node,
               pp->ranks_per_node == 1 ? "" : "s", pp->bucket_bytes / 1048576.0, "nodes",
               "Gbit/s");
    for (int c = 0; c < 8; c++)
        printf("%s %9s", c == 0 ? " | fp32:" : c == 4 ? " | fp16:" : "", variant_name(c));
    printf("%s\n", is_auto ? " | ring-ovl fp32 MiB" : "");
    size_t cells = (size_t)g->n_gbits * g->n_nodes * 8;
    dtnn_projection *res = malloc(cells * sizeof *res);
    double *chosen = calloc(cells, sizeof *chosen);
    if (!res || !chosen) {
        free(res);
        free(chosen);
        fprintf(stderr, "dtnn bench: out of memory for the projection\n");
        return 1;
    }
    for (int k = 0; k < g->n_gbits; k++)
        for (int i = 0; i < g->n_nodes; i++) {
            pp->nodes = g->nodes[i];
            pp->inter.beta = 8.0 / (g->gbits[k] * 1e9 * g->link_efficiency);
            printf("%6d %7g", g->nodes[i], g->gbits[k]);
            for (int c = 0; c < 8; c++) {
                pp->half = c >= 4;
                pp->algo = (c & 2) ? DTNN_PROJECT_HIERARCHICAL : DTNN_PROJECT_RING;
                pp->overlap = c & 1;
                const size_t cell = ((size_t)k * g->n_nodes + i) * 8 + c;
                dtnn_projection *r = &res[cell];
                chosen[cell] = pp->bucket_bytes;
                if (is_auto ? dtnn_project_bucket_auto(prof, pp, 0, r, &chosen[cell], &err)
                            : dtnn_project_step(prof, pp, r, &err)) {
                    free(res);
                    free(chosen);
                    return cli_fail("bench", &err);
                }
                printf("%s %8.1f%%", c == 0 || c == 4 ? " |      " : "", 100.0 * r->efficiency);
            }
            if (is_auto)
                printf(" | %8g", chosen[((size_t)k * g->n_nodes + i) * 8 + 1] / 1048576.0);
            printf("\n");
        }
    for (int k = 0; k < g->n_gbits; k++)
        for (int i = 0; i < g->n_nodes; i++)
            for (int c = 0; c < 8; c++) {
                const size_t cell = ((size_t)k * g->n_nodes + i) * 8 + c;
                const dtnn_projection *r = &res[cell];
                int ranks = g->nodes[i] * pp->ranks_per_node;
                /* auto: bucket_mb 0 (as --bucket-mb auto is 0 in the API) and the choice. */
                printf("{\"projection\": \"%s\", \"nodes\": %d, \"ranks_per_node\": %d, "
                       "\"gbits\": %g, \"bucket_mb\": %g, ", g->model, g->nodes[i],
                       pp->ranks_per_node, g->gbits[k], is_auto ? 0.0 : chosen[cell] / 1048576.0);
                if (is_auto)
                    printf("\"auto_bucket_mb\": %g, ", chosen[cell] / 1048576.0);
                printf("\"algo\": \"%s\", \"overlap\": %d, "
                       "\"comm_dtype\": \"%s\", \"buckets\": %d, \"compute_ms\": %.4f, "
                       "\"comm_ms\": %.4f, \"exposed_ms\": %.4f, \"exposed_share\": %.5f, "
                       "\"efficiency\": %.5f, \"images_per_sec\": %.2f}\n",
                       (c & 2) ? "hierarchical" : "ring", c & 1,
                       c >= 4 ? "fp16" : "fp32", r->buckets, 1e3 * r->compute, 1e3 * r->comm,
                       1e3 * r->exposed, r->exposed / (r->compute + r->exposed), r->efficiency,
                       (double)g->batch * ranks / (r->compute + r->exposed));
            }
    free(res);
    free(chosen);
    return 0;
}

static const char *variant_name(int v)
{
    static const char *const names[] = {"ring-blk", "ring-ovl", "hier-blk", "hier-ovl"};
    return names[v & 3];
}

int project_run(const cli_opt *o, int n, dtnn_model *m, double step_seconds, int64_t steps,
                int batch)
{
    const char *cmd = "bench";
    int nodes[MAX_NODES], n_nodes, n_gbits;
    double gbits[MAX_GBITS];
    dtnn_error err = {0};
    if (dtnn_project_parse_grid(cli_str(o, n, "project"), nodes, MAX_NODES, &n_nodes, gbits,
                                MAX_GBITS, &n_gbits, &err))
        return cli_fail(cmd, &err);
    const int layers = dtnn_model_layer_count(m);
    double *fwd = calloc((size_t)layers + 1, sizeof *fwd);
    double *bwd = calloc((size_t)layers + 1, sizeof *bwd);
    size_t *params = calloc((size_t)layers + 1, sizeof *params);
    if (!fwd || !bwd || !params) {
        free(fwd), free(bwd), free(params);
        fprintf(stderr, "dtnn %s: out of memory for the profile\n", cmd);
        return 1;
    }
    double measured = 0, f_sum = 0, b_sum = 0;
    size_t total = 0;
    /* flops: no run, each layer's forward FLOPs (nanoseconds per GFLOP, rescaled by --step-ms
     * below) and a backward of twice that (the input's and the weights' gradients). */
    const int from_flops = !strcmp(cli_str(o, n, "project-profile"), "flops");
    for (int i = 0; i < layers; i++) {
        dtnn_layer_info li;
        dtnn_model_layer_info(m, i, &li);
        fwd[i] = from_flops ? li.flops * 1e-9 : li.seconds_fwd / (double)steps;
        bwd[i] = from_flops ? 2.0 * fwd[i] : li.seconds_bwd / (double)steps;
        params[i] = li.params;
        f_sum += fwd[i];
        b_sum += bwd[i];
        total += li.params;
    }
    /* Loss, optimizer and anything else the per-layer timers do not see: after backward. */
    double other = from_flops ? 0.0 : step_seconds - f_sum - b_sum;
    if (other < 0)
        other = 0;
    measured = f_sum + b_sum + other;
    double scale = 1.0 / cli_float(o, n, "compute-scale");
    if (cli_given(o, n, "step-ms"))
        scale = cli_float(o, n, "step-ms") / 1e3 / measured;
    for (int i = 0; i < layers; i++) {
        fwd[i] *= scale;
        bwd[i] *= scale;
    }
    dtnn_project_profile prof = {layers, fwd, bwd, params, other * scale};
    dtnn_project_params pp;
    dtnn_project_params_default(&pp);
    pp.inter.alpha = cli_float(o, n, "alpha-us") * 1e-6;
    pp.intra.alpha = cli_float(o, n, "intra-alpha-us") * 1e-6;
    pp.intra.beta = 1.0 / (cli_float(o, n, "intra-gbs") * 1e9);
    pp.half_cost = cli_float(o, n, "fp16-ns-per-value") * 1e-9;
    if (cli_int(o, n, "project-batch") > 0)
        batch = (int)cli_int(o, n, "project-batch");
    grid g = {nodes, n_nodes, gbits, n_gbits, cli_float(o, n, "link-efficiency"), batch,
              cli_str(o, n, "model")};
    double rpn[MAX_LIST], buckets[MAX_LIST];
    int n_rpn = 0, n_buckets = 0;
    parse_list(cli_str(o, n, "ranks-per-node"), rpn, &n_rpn, 0);
    parse_list(cli_given(o, n, "project-bucket-mb") ? cli_str(o, n, "project-bucket-mb")
                                                    : cli_str(o, n, "bucket-mb"),
               buckets, &n_buckets, 1);
    if (from_flops)
        printf("projection: %s, batch %d per rank; compute %.2f ms per step (shaped by the "
               "layers' FLOPs, backward 2x forward: forward %.2f, backward %.2f); gradient "
               "%.2f MB\n", cli_str(o, n, "model"), batch, 1e3 * measured * scale,
               1e3 * f_sum * scale, 1e3 * b_sum * scale, 4.0 * (double)total / 1048576.0);
    else
        printf("projection: %s, batch %d per rank; compute %.2f ms per step (measured %.2f ms "
               "x %.4g: forward %.2f, backward %.2f, other %.2f); gradient %.2f MB\n",
               cli_str(o, n, "model"), batch, 1e3 * measured * scale, 1e3 * measured, scale,
               1e3 * f_sum * scale, 1e3 * b_sum * scale, 1e3 * other * scale,
               4.0 * (double)total / 1048576.0);
    printf("links: inter-node alpha %s us, %s of the line rate; intra-node alpha %s us, %s GB/s"
           "; fp16 costs %s ns per value"
           "\nefficiency = compute / (compute + exposed communication); blk: all-reduce after "
           "backward, ovl: overlapped with it (hier-ovl is modelled only, dtnn has no such mode)"
           "\n", cli_str(o, n, "alpha-us"), cli_str(o, n, "link-efficiency"),
           cli_str(o, n, "intra-alpha-us"), cli_str(o, n, "intra-gbs"),
           cli_str(o, n, "fp16-ns-per-value"));
    int rc = 0;
    for (int r = 0; r < n_rpn && !rc; r++)
        for (int b = 0; b < n_buckets && !rc; b++) {
            pp.ranks_per_node = (int)rpn[r];
            pp.bucket_bytes = buckets[b] * 1048576.0;
            rc = print_grid(&prof, &pp, &g);
        }
    free(fwd), free(bwd), free(params);
    return rc;
}
