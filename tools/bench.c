/*
 * bench.c — `dtnn bench`: training throughput on synthetic data (SGD with momentum, forward +
 * backward + update after warm-up), with a per-layer profile. Under an MPI launcher each rank
 * trains --batch-size samples per step with the real gradient all-reduce (weak scaling), and
 * the all-reduce's bandwidth is measured next to a plain MPI_Allreduce of the same gradient.
 * --sweep runs every ranks x threads combination that fits the cores given to this process,
 * each as a child `dtnn bench` (under the launcher for more than one rank), and prints one
 * table, so the best split between MPI ranks and threads is measured, not guessed.
 * --loader instead measures the input pipeline alone: images/s that a dtnn_loader decodes and
 * augments (RandomResizedCrop + flip) from an image folder, with no training to feed.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "cli_options.h"
#include "dtnn.h"
#include "progress.h"
#include "project.h"


static cli_opt bench_opts[] = {
    {"model", OPT_STRING, NULL, "zoo model name or model file (required but with --loader)", 0,
     NULL, 0},
    {"batch-size", OPT_INT, "64", "batch size (per rank under MPI)", 0, NULL, 0},
    {"steps", OPT_INT, "20", "timed training steps", 0, NULL, 0},
    {"warmup", OPT_INT, "3", "untimed steps first", 0, NULL, 0},
    {"input", OPT_STRING, NULL, "CxHxW of a zoo model's input (default: the model's)", 0, NULL, 0},
    {"classes", OPT_INT, "0", "output classes of a zoo model (0: its own)", 0, NULL, 0},
    {"threads", OPT_INT, "0", "kernel threads (0: the cores given to this process)", 0, NULL, 0},
    CLI_DEVICE_OPTION,
    CLI_PRECISION_OPTION,
    {"workspace-mb", OPT_FLOAT, "0", "scratch the convolutions may use, MiB (0: the library's "
     "default)", 0, NULL, 0},
    {"conv-algo", OPT_STRING, "auto", "convolutions: auto (the fastest path that applies) | "
     "direct (auto without Winograd) | im2col (the reference path), for comparison", 0, NULL,
     0},
    {"no-fusion", OPT_FLAG, NULL, "run every layer on its own (no ReLU fused into the batch "
     "norm or add before it), for comparison", 0, NULL, 0},
    {"profile", OPT_FLAG, NULL, "print per-layer forward/backward time", 0, NULL, 0},
    {"allreduce", OPT_STRING, "overlap", "under MPI: overlap | blocking | hierarchical", 0, NULL,
     0},
    {"bucket-mb", OPT_STRING, "auto", "under MPI: all-reduce bucket size in MiB, or auto "
     "(chosen for the gradient, the ranks and the link measured at start-up)", 0, NULL, 0},
    {"comm-dtype", OPT_STRING, "fp32", "under MPI: gradients travel as fp32 | fp16 | bf16", 0,
     NULL, 0},
    {"collectives", OPT_STRING, "mpi", "under MPI: gradients all-reduced by mpi | nccl (on the "
     "GPUs, --device cuda)", 0, NULL, 0},
    {"trace", OPT_STRING, NULL, "timeline of the timed steps of every rank (Chrome trace-event "
     "JSON, as train's --trace), to see where a step's time goes or what tracing costs", 0,
     NULL, 0},
    {"fma-peak", OPT_FLAG, NULL, "instead: the float32 FMA peak of --threads threads from a "
     "register-only loop, in ymm and (where the CPU and OS have AVX-512) zmm vectors", 0, NULL,
     0},
    {"sgemm", OPT_INT, "0", "instead: time an N x N x N SGEMM on the kernel threads (the peak "
     "that training GFLOP/s compare to)", 0, NULL, 0},
    {"sweep", OPT_FLAG, NULL, "run every ranks x threads combination that fits the cores and "
     "print a table", 0, NULL, 0},
    {"launcher", OPT_STRING, "mpirun --bind-to none", "--sweep: command that starts N ranks "
     "with '-np N' appended", 0, NULL, 0},
    {"loader", OPT_FLAG, NULL, "instead: images/s the image-folder loader decodes and augments "
     "(--data-dir, --loader-threads, --image-size)", 0, NULL, 0},
    {"shards", OPT_FLAG, NULL, "--loader: --data-dir holds shards (dtnn shard's output), not an "
     "image folder", 0, NULL, 0},
    {"data-dir", OPT_STRING, NULL, "--loader: image folder (DIR/train/<class>/<image>)", 0, NULL,
     0},
    {"loader-threads", OPT_INT, "2", "--loader: decoding threads (0: in the calling thread)", 0,
     NULL, 0},
    {"image-size", OPT_INT, "224", "--loader: crop size", 0, NULL, 0},
    {"prefetch", OPT_INT, "0", "--loader: batches decoded ahead (0: max(2, threads))", 0, NULL,
     0},
    {"project", OPT_STRING, NULL, "one rank: after a profiled run, project the scaling "
     "efficiency on NODES,GBITS, e.g. 8-1024,10/25/100 (node counts or ranges A-B doubling, "
     "then link rates in Gbit/s, '/'-separated); docs/scaling.md", 0, NULL, 0},
    {"ranks-per-node", OPT_STRING, "1", "--project: ranks (GPUs) per node; a '/'-separated "
     "list gives a table each", 0, NULL, 0},
    {"project-bucket-mb", OPT_STRING, NULL, "--project: bucket sizes to project, MiB or auto, "
     "'/'-separated (default: --bucket-mb)", 0, NULL, 0},
    {"project-profile", OPT_STRING, "measured", "--project: the per-layer shape: measured (a "
     "profiled run) | flops (each layer's FLOPs, backward twice forward: no run; needs "
     "--step-ms)", 0, NULL, 0},
    {"project-batch", OPT_INT, "0", "--project: batch per rank the projected step is for, for "
     "images/s (0: --batch-size; with --step-ms the profile may come from a smaller batch)", 0,
     NULL, 0},
    {"alpha-us", OPT_FLOAT, "13.8", "--project: inter-node latency per message, us (fitted on "
     "the 10gbit namespace link, docs/scaling.md)", 0, NULL, 0},
    {"link-efficiency", OPT_FLOAT, "0.75", "--project: share of the line rate an all-reduce "
     "reaches (fitted on the 1gbit namespace link)", 0, NULL, 0},
    {"intra-alpha-us", OPT_FLOAT, "5", "--project: intra-node latency per message, us "
     "(assumed, PCIe-class)", 0, NULL, 0},
    {"intra-gbs", OPT_FLOAT, "10", "--project: intra-node bandwidth, GB/s (assumed, "
     "PCIe-class)", 0, NULL, 0},
    {"fp16-ns-per-value", OPT_FLOAT, "0", "--project: fp16 conversion and summing cost per "
     "gradient value, ns (a CPU's software fp16; 0 for a GPU)", 0, NULL, 0},
    {"compute-scale", OPT_FLOAT, "1", "--project: divide the measured compute time by this "
     "(an accelerator X times faster)", 0, NULL, 0},
    {"step-ms", OPT_FLOAT, NULL, "--project: instead, scale the profile to this compute time "
     "per step", 0, NULL, 0},
    {"help", OPT_FLAG, NULL, "show this help", 0, NULL, 0},
};

typedef struct {
    double images_per_sec, step_ms, gflops, peak_rss_mb;
    double exposed_comm;          /* share of step time waiting for gradients after backward */
    double sync_ms, mpi_ms;       /* one full-gradient all-reduce: dtnn's, plain MPI_Allreduce */
    double sync_best_ms, mpi_best_ms; /* the fastest of the repetitions (the least disturbed) */
} bench_result;

/* Replaces each of v[0..n) by its maximum over the ranks (the slowest rank sets the pace). */
static dtnn_status max_over_ranks(dtnn_comm *comm, double *v, int n, dtnn_error *err)
{
    int ranks = dtnn_comm_size(comm);
    double *all = malloc(sizeof(double) * (size_t)n * (size_t)ranks);
    if (!all)
        return dtnn_error_set(err, DTNN_ERR_NOMEM, "out of memory");
    dtnn_status st = dtnn_comm_allgather(comm, v, sizeof(double) * (size_t)n, all, err);
    for (int q = 0; q < ranks && !st; q++)
        for (int i = 0; i < n; i++)
            v[i] = all[q * n + i] > v[i] ? all[q * n + i] : v[i];
    free(all);
    return st;
}

/* Seconds for `reps` full-gradient all-reduces: through dtnn's gradient sync (buckets) and as
 * one plain MPI_Allreduce of the same buffer, interleaved so both see the same machine. */
static dtnn_status time_allreduce(dtnn_comm *comm, dtnn_model *m, dtnn_grad_sync *gs,
                                  bench_result *r, dtnn_error *err)
{
    const int reps = 10;
    double sync = 0, plain = 0, sync_best = 1e30, plain_best = 1e30;
    dtnn_model_zero_grad(m);
    /* the plain all-reduce's buffer: host memory of the gradient's size (zero, as the gradient) */
    float *plain_buf = calloc(dtnn_model_grads_length(m) + 1, sizeof(float));
    if (!plain_buf)
        return dtnn_error_set(err, DTNN_ERR_NOMEM, "out of memory");
    for (int i = 0; i < reps; i++) {
        double t0 = progress_now();
        dtnn_grad_sync_begin(gs);
        dtnn_status st = dtnn_grad_sync_finish(gs, err);
        double t1 = progress_now();
        if (st || (st = dtnn_comm_allreduce_sum(comm, plain_buf, dtnn_model_grads_length(m),
                                                err))) {
            free(plain_buf);
            return st;
        }
        double t2 = progress_now();
        sync += t1 - t0;
        plain += t2 - t1;
        sync_best = t1 - t0 < sync_best ? t1 - t0 : sync_best;
        plain_best = t2 - t1 < plain_best ? t2 - t1 : plain_best;
    }
    free(plain_buf);
    /* The best repetition's time is the max over ranks of each rank's best: a collective ends
     * on all ranks together, so the slowest rank's best is the least disturbed run. */
    double t[4] = {sync, plain, sync_best, plain_best};
    dtnn_status st = max_over_ranks(comm, t, 4, err);
    r->sync_ms = 1e3 * t[0] / reps;
    r->mpi_ms = 1e3 * t[1] / reps;
    r->sync_best_ms = 1e3 * t[2];
    r->mpi_best_ms = 1e3 * t[3];
    return st;
}

static void print_profile(dtnn_model *m, int64_t steps, dtnn_precision precision)
{
    double total = 0;
    for (int i = 0; i < dtnn_model_layer_count(m); i++) {
        dtnn_layer_info li;
        dtnn_model_layer_info(m, i, &li);
        total += li.seconds_fwd + li.seconds_bwd;
    }
    /* On the CPU, what was chosen for it and why: a profile read without it could not tell a
     * slow kernel from a set auto passed over (dtnn info prints the same). */
    const int on_cpu = !strncmp(dtnn_model_device(m), "cpu", 3);
    char gemm[128];
    if (on_cpu)
        printf("device %s, cpu kernels %s (%s), gemm %s\n", dtnn_model_device(m),
               dtnn_cpu_kernels_name(), dtnn_cpu_kernels_reason(),
               dtnn_cpu_gemm_name(gemm, sizeof gemm));
    else
        printf("device %s\n", dtnn_model_device(m));
    if (on_cpu && precision == DTNN_PRECISION_BF16)
        printf("bf16 on the CPU: %s\n", dtnn_cpu_bf16_products());
    printf("%-24s %-14s %-16s %10s %10s %7s\n", "layer", "type", "method", "fwd ms", "bwd ms",
           "share");
    for (int i = 0; i < dtnn_model_layer_count(m); i++) {
        dtnn_layer_info li;
        dtnn_model_layer_info(m, i, &li);
        printf("%-24s %-14s %-16s %10.3f %10.3f %6.1f%%\n", li.name, li.type,
               li.method[0] ? li.method : "-",
               1e3 * li.seconds_fwd / (double)steps, 1e3 * li.seconds_bwd / (double)steps,
               total > 0 ? 100.0 * (li.seconds_fwd + li.seconds_bwd) / total : 0.0);
    }
}

/* What one benchmark run is made of: its options read, then the model, optimizer and
 * gradient reduction it trains, then the synthetic batch. */
typedef struct {
    int rank, ranks, threads, batch;
    int64_t steps, warmup;
    int c, h, w;
    dtnn_conv_algo conv_algo;
    dtnn_allreduce_mode mode;
    dtnn_comm_dtype dtype;
    dtnn_collectives collectives;
    const char *device;
    dtnn_precision precision;
    dtnn_model *m;
    dtnn_optimizer *opt;
    dtnn_grad_sync *gs;
    dtnn_comm *nccl;            /* --collectives nccl: the gradients' communicator */
    dtnn_trace *trace;
    float *x;
    int32_t *y;
} bench_run;

/* The options that can be refused before anything is built: 0, or the exit code (the message
 * printed). */
static int bench_options(const cli_opt *o, int n, bench_run *b)
{
    const char *cmd = "bench";
    b->batch = (int)cli_int(o, n, "batch-size");
    b->steps = cli_int(o, n, "steps");
    b->warmup = cli_int(o, n, "warmup");
    if (cli_given(o, n, "input") && cli_parse_chw(cli_str(o, n, "input"), &b->c, &b->h, &b->w))
        return cli_usage_error(cmd, "--input must be CxHxW, not '%s'", cli_str(o, n, "input"));
    const char *algo = cli_str(o, n, "conv-algo");
    if (strcmp(algo, "auto") && strcmp(algo, "im2col") && strcmp(algo, "direct"))
        return cli_usage_error(cmd, "--conv-algo is auto, direct or im2col, not '%s'", algo);
    b->conv_algo = !strcmp(algo, "im2col")   ? DTNN_CONV_IM2COL
                   : !strcmp(algo, "direct") ? DTNN_CONV_DIRECT
                                             : DTNN_CONV_AUTO;
    dtnn_error err = {0};
    if (dtnn_allreduce_parse(cli_str(o, n, "allreduce"), &b->mode, &err) ||
        dtnn_comm_dtype_parse(cli_str(o, n, "comm-dtype"), &b->dtype, &err) ||
        dtnn_collectives_parse(cli_str(o, n, "collectives"), &b->collectives, &err))
        return fprintf(stderr, "dtnn %s: %s\n", cmd, err.message), 2;
    int device_rc = 2;
    if (!(b->device = cli_device(cmd, o, n, &device_rc)))
        return device_rc;
    b->precision = DTNN_PRECISION_FP32;
    return cli_precision(cmd, o, n, &b->precision) ? 2 : 0;
}

/* The model built for the batch, SGD with momentum over it, and under MPI the gradient
 * reduction (NCCL's communicator first where asked). */
static dtnn_status bench_build(const cli_opt *o, int n, dtnn_comm *comm, bench_run *b,
                               dtnn_error *err)
{
    b->m = dtnn_model_from_spec(cli_str(o, n, "model"), (int)cli_int(o, n, "classes"), b->c,
                                b->h, b->w, err);
    if (!b->m)
        return err->code;
    dtnn_build_params bp;
    dtnn_build_params_default(&bp);
    bp.max_batch = b->batch;
    bp.threads = b->threads;
    bp.device = b->device;
    bp.precision = b->precision;
    bp.workspace_limit = (size_t)(cli_float(o, n, "workspace-mb") * 1048576.0);
    bp.conv_algo = b->conv_algo;
    bp.unfused = cli_flag(o, n, "no-fusion");
    dtnn_opt_params op;
    dtnn_opt_params_default(&op, DTNN_OPT_SGD);
    op.momentum = 0.9f;
    bp.optimizer_slots = dtnn_opt_state_slots(&op);
    if (dtnn_model_build(b->m, &bp, err) || !(b->opt = dtnn_optimizer_create(b->m, &op, err)))
        return err->code;
    double bucket_mb = DTNN_BUCKET_AUTO;
    cli_bucket_mb(cli_str(o, n, "bucket-mb"), &bucket_mb);
    if (b->ranks > 1 && b->collectives == DTNN_COLLECTIVES_NCCL &&
        !(b->nccl = dtnn_comm_nccl_create(comm, b->m, err)))
        return err->code;
    if (b->ranks > 1 && !(b->gs = dtnn_grad_sync_create(b->nccl ? b->nccl : comm, b->m, b->mode,
                                                        bucket_mb, b->dtype, err)))
        return err->code;
    return DTNN_OK;
}

/* A batch of uniform [-1, 1) images (its own stream per rank) and labels cycling over the
 * classes. */
static dtnn_status bench_batch(bench_run *b, dtnn_error *err)
{
    int classes;
    dtnn_model_input_shape(b->m, &b->c, &b->h, &b->w);
    dtnn_model_output_shape(b->m, NULL, &classes);
    const size_t sample = (size_t)b->c * b->h * b->w;
    b->x = malloc(sizeof(float) * sample * b->batch);
    b->y = malloc(sizeof(int32_t) * b->batch);
    if (!b->x || !b->y)
        return dtnn_error_set(err, DTNN_ERR_NOMEM, "out of memory for the batch");
    uint64_t s = 12345 + (uint64_t)b->rank;
    for (size_t i = 0; i < sample * b->batch; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        b->x[i] = (float)((s >> 40) * (1.0 / 16777216.0) * 2.0 - 1.0);
    }
    for (int i = 0; i < b->batch; i++)
        b->y[i] = i % classes;
    return DTNN_OK;
}

/* warmup untimed steps, then steps timed (*seconds, the model synchronised at both ends;
 * *wait0: the gradient wait so far at the start); the timed ones go into the trace. */
static dtnn_status bench_steps(const cli_opt *o, int n, dtnn_comm *comm, bench_run *b,
                               double *seconds, double *wait0, dtnn_error *err)
{
    dtnn_loss_params lp;
    dtnn_loss_params_default(&lp);
    const int batch = b->batch;
    const int64_t total = b->warmup + b->steps;
    double t0 = 0;
    for (int64_t i = 0; i < total; i++) {
        if (i == b->warmup) {
            dtnn_model_set_profiling(b->m,
                                     cli_flag(o, n, "profile") || cli_given(o, n, "project"));
            dtnn_model_sync(b->m);  /* the warm-up's queued work is not the timed steps' */
            t0 = progress_now();
            *wait0 = b->gs ? dtnn_grad_sync_wait_seconds(b->gs) : 0.0;
            dtnn_model_set_trace(b->m, b->trace);
            dtnn_comm_set_trace(comm, b->trace);
        }
        double step0 = dtnn_trace_clock(b->trace);
        dtnn_model_zero_grad(b->m);
        if (b->gs)
            dtnn_grad_sync_begin(b->gs);
        /* as training does on a device: the step's batch was uploaded during the previous
         * step's backward (dtnn_model_prefetch; nothing on cpu) */
        if ((i == 0 && dtnn_model_prefetch(b->m, b->x, batch, err)) ||
            dtnn_model_forward(b->m, b->x, batch, 1, err) ||
            dtnn_model_loss(b->m, b->y, batch, &lp, 1.0f / (float)(batch * b->ranks), NULL,
                            err) ||
            dtnn_model_backward(b->m, err) ||
            (i + 1 < total && dtnn_model_prefetch(b->m, b->x, batch, err)) ||
            (b->gs && dtnn_grad_sync_finish(b->gs, err)) ||
            dtnn_optimizer_step(b->opt, 0.01f, err))
            return err->code;
        dtnn_trace_span(b->trace, "step", step0, dtnn_trace_clock(b->trace));
    }
    dtnn_model_sync(b->m);
    *seconds = progress_now() - t0;
    dtnn_model_set_trace(b->m, NULL);
    dtnn_comm_set_trace(comm, NULL);
    return DTNN_OK;
}

/* Rank 0's JSON line (and --profile's table). */
static void bench_print(const cli_opt *o, int n, dtnn_comm *comm, const bench_run *b,
                        const bench_result *r)
{
    if (cli_flag(o, n, "profile"))
        print_profile(b->m, b->steps, b->precision);
    char blas[128];
    printf("{\"model\": \"%s\", \"batch_size\": %d, \"ranks\": %d, \"threads\": %d, "
           "\"steps\": %lld, \"images_per_sec\": %.1f, \"step_ms\": %.3f, \"gflops\": %.2f, "
           "\"peak_rss_mb\": %.1f, \"blas\": \"%s\", \"cpu_kernels\": \"%s\"",
           cli_str(o, n, "model"), b->batch, b->ranks, b->threads, (long long)b->steps,
           r->images_per_sec, r->step_ms, r->gflops, r->peak_rss_mb,
           dtnn_blas_name(blas, sizeof blas), dtnn_cpu_kernels_name());
    if (b->ranks > 1) {
        /* Bus bandwidth as NCCL's tests define it: a ring all-reduce moves 2 (p-1)/p of the
         * buffer through every rank's link, so the figure is comparable across rank counts. */
        const int ranks = b->ranks;
        double bytes = 4.0 * (double)dtnn_model_grads_length(b->m);
        double bus = 2.0 * (ranks - 1) / ranks * bytes / 1e9;
        printf(", \"bucket_mb\": %g, \"bucket_auto\": \"%s\"", dtnn_grad_sync_bucket_mb(b->gs),
               dtnn_grad_sync_bucket_reason(b->gs));
        printf(", \"allreduce\": \"%s\", \"comm_dtype\": \"%s\", \"buckets\": %d, "
               "\"exposed_comm\": %.4f, \"gradient_mb\": %.2f, \"allreduce_ms\": %.3f, "
               "\"allreduce_busbw_gbs\": %.2f, \"mpi_allreduce_ms\": %.3f, "
               "\"mpi_allreduce_busbw_gbs\": %.2f, \"allreduce_best_ms\": %.3f, "
               "\"mpi_allreduce_best_ms\": %.3f, \"nodes\": %d", cli_str(o, n, "allreduce"),
               cli_str(o, n, "comm-dtype"), dtnn_grad_sync_bucket_count(b->gs), r->exposed_comm,
               bytes / 1048576.0, r->sync_ms, bus / (r->sync_ms / 1e3), r->mpi_ms,
               bus / (r->mpi_ms / 1e3), r->sync_best_ms, r->mpi_best_ms,
               dtnn_comm_node_count(comm));
    }
    printf("}\n");
}

/* One benchmark run in this process (one rank of it under MPI). */
static int run_bench(const cli_opt *o, int n, dtnn_comm *comm, int threads)
{
    const char *cmd = "bench";
    bench_run b = {.rank = dtnn_comm_rank(comm), .ranks = dtnn_comm_size(comm),
                   .threads = threads};
    int rc = bench_options(o, n, &b);
    if (rc)
        return rc;
    dtnn_error err = {0};
    rc = 1;
    const char *trace_path = cli_str(o, n, "trace");
    int early = cli_trace_start(cmd, trace_path, comm, &b.trace, &err);
    if (early >= 0)
        return early == 1 ? cli_fail(cmd, &err) : early;
    if (bench_build(o, n, comm, &b, &err))
        goto out;
    if (cli_given(o, n, "project") && !strcmp(cli_str(o, n, "project-profile"), "flops")) {
        rc = project_run(o, n, b.m, 0.0, 1, b.batch);
        goto out;
    }
    double seconds = 0, wait0 = 0;
    if (bench_batch(&b, &err) || bench_steps(o, n, comm, &b, &seconds, &wait0, &err))
        goto out;
    if (b.trace && cli_trace_finish(cmd, trace_path, comm, b.trace, 0, &err))
        goto out;
    bench_result r = {0};
    r.exposed_comm = b.gs ? (dtnn_grad_sync_wait_seconds(b.gs) - wait0) / seconds : 0.0;
    if (b.ranks > 1 && (max_over_ranks(comm, &seconds, 1, &err) ||
                        time_allreduce(comm, b.m, b.gs, &r, &err)))
        goto out;
    double flops = 0;
    for (int i = 0; i < dtnn_model_layer_count(b.m); i++) {
        dtnn_layer_info li;
        dtnn_model_layer_info(b.m, i, &li);
        flops += li.flops;
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    r.images_per_sec = (double)b.batch * b.ranks * (double)b.steps / seconds;
    r.step_ms = 1e3 * seconds / (double)b.steps;
    r.gflops = 3.0 * flops * r.images_per_sec / 1e9;
    r.peak_rss_mb = ru.ru_maxrss / 1024.0;
    if (b.rank == 0)
        bench_print(o, n, comm, &b, &r);
    rc = 0;
    if (cli_given(o, n, "project"))
        rc = project_run(o, n, b.m, seconds / (double)b.steps, b.steps, b.batch);
out:
    if (rc && b.ranks > 1) {
        char line[600];
        snprintf(line, sizeof line, "dtnn %s: %s", cmd, err.message);
        dtnn_comm_abort(comm, 1, line);
    }
    if (rc)
        cli_fail(cmd, &err);
    dtnn_comm_set_trace(comm, NULL);
    dtnn_trace_free(b.trace);
    free(b.x);
    free(b.y);
    dtnn_grad_sync_free(b.gs);
    dtnn_comm_free(b.nccl);
    dtnn_optimizer_free(b.opt);
    dtnn_model_free(b.m);
    return rc;
}

/* The best of `reps` N^3 SGEMMs after one warm-up: the machine's GEMM peak for T threads. */
static int time_sgemm(int size, int threads, int reps)
{
    dtnn_set_threads(threads);
    size_t elems = (size_t)size * size;
    float *a = malloc(sizeof(float) * elems), *b = malloc(sizeof(float) * elems);
    float *c = malloc(sizeof(float) * elems);
    if (!a || !b || !c) {
        free(a), free(b), free(c);
        fprintf(stderr, "dtnn bench: out of memory for a %d^3 SGEMM\n", size);
        return 1;
    }
    for (size_t i = 0; i < elems; i++) {
        a[i] = (float)(i % 7) * 0.1f;
        b[i] = (float)(i % 5) * 0.1f;
    }
    double best = 1e30;
    for (int r = 0; r <= reps; r++) {
        double t0 = progress_now();
        dtnn_sgemm(0, 0, size, size, size, 1.0f, a, size, b, size, 0.0f, c, size);
        double t = progress_now() - t0;
        if (r > 0 && t < best)
            best = t;
    }
    char gemm[128];
    printf("{\"sgemm\": %d, \"threads\": %d, \"gflops\": %.1f, \"gemm\": \"%s\", "
           "\"cpu_kernels\": \"%s\"}\n", size, threads,
           2.0 * size * (double)size * size / best / 1e9, dtnn_cpu_gemm_name(gemm, sizeof gemm),
           dtnn_cpu_kernels_name());
    free(a), free(b), free(c);
    return 0;
}

/* The register-only FMA peak (dtnn_fma_peak_gflops), ymm and zmm, best of 3 runs of 0.2 s. */
static int time_fma_peak(int threads)
{
    const double ymm = dtnn_fma_peak_gflops(0, threads, 3, 0.2);
    const double zmm = dtnn_fma_peak_gflops(1, threads, 3, 0.2);
    if (ymm <= 0.0 && dtnn_fma_has_ymm()) {
        fprintf(stderr, "dtnn bench: could not start %d threads for the FMA peak\n", threads);
        return 1;
    }
    char zmm_text[32] = "null";
    if (zmm > 0.0)
        snprintf(zmm_text, sizeof zmm_text, "%.1f", zmm);
    printf("{\"fma_peak\": 1, \"threads\": %d, \"ymm_gflops\": %.1f, \"zmm_gflops\": %s}\n",
           threads, ymm, zmm_text);
    return 0;
}

/* ---- --loader ------------------------------------------------------------------------------ */

/* Takes --warmup then --steps batches from the train split of an image folder, epoch after
 * epoch, doing nothing with them: the rate the input pipeline can sustain. */
static int time_loader(const cli_opt *o, int n)
{
    const char *cmd = "bench";
    if (!cli_str(o, n, "data-dir"))
        return cli_usage_error(cmd, "%s", "--loader needs --data-dir DIR (an image folder; "
                               "build/make-imagefolder DIR writes a synthetic one)");
    int64_t threads = cli_int(o, n, "loader-threads"), size = cli_int(o, n, "image-size");
    int64_t prefetch = cli_int(o, n, "prefetch");
    if (threads < 0 || threads > 64 || size < 8 || size > 4096 || prefetch < 0 || prefetch > 64)
        return cli_usage_error(cmd, "%s", "--loader-threads must be in [0, 64], --image-size in "
                               "[8, 4096], --prefetch in [0, 64]");
    dtnn_loader_params lp;
    dtnn_loader_params_default(&lp);
    lp.batch_size = (int)cli_int(o, n, "batch-size");
    lp.threads = (int)threads;
    lp.prefetch = (int)prefetch;
    lp.image_size = (int)size;
    lp.augment = DTNN_AUG_CROP | DTNN_AUG_FLIP;
    dtnn_error err = {0};
    const int shards = cli_flag(o, n, "shards");
    dtnn_loader *l = (shards ? dtnn_loader_create_shards : dtnn_loader_create_folder)(
        cli_str(o, n, "data-dir"), "train", &lp, &err);
    if (!l)
        return cli_fail(cmd, &err);
    dtnn_loader_info info;
    dtnn_loader_get_info(l, &info);
    const int64_t warmup = cli_int(o, n, "warmup"), steps = cli_int(o, n, "steps");
    int64_t images = 0, step = info.steps_per_epoch, epoch = -1;
    double t0 = progress_now();
    for (int64_t i = 0; i < warmup + steps; i++) {
        if (step == info.steps_per_epoch) {
            step = 0;
            if (dtnn_loader_start(l, ++epoch, 0, info.steps_per_epoch, &err))
                break;
        }
        const float *x;
        const int32_t *y;
        int got;
        if (dtnn_loader_next(l, &x, &y, &got, NULL, &err))
            break;
        step++;
        if (i + 1 == warmup) {
            t0 = progress_now();
            images = 0;
        } else {
            images += got;
        }
    }
    double seconds = progress_now() - t0;
    int rc = 0;
    if (err.code) {
        rc = cli_fail(cmd, &err);
    } else {
        printf("{\"loader\": \"%s\", \"threads\": %d, \"image_size\": %d, "
               "\"batch_size\": %d, \"augment\": \"random-resized-crop,flip\", \"images\": %lld, "
               "\"seconds\": %.3f, \"images_per_sec\": %.1f, \"skipped_images\": %lld, "
               "\"bytes_read\": %lld}\n",
               shards ? "shards" : "imagefolder", lp.threads, lp.image_size, lp.batch_size,
               (long long)images, seconds, seconds > 0 ? (double)images / seconds : 0.0,
               (long long)dtnn_loader_skipped(l, NULL, 0), (long long)dtnn_loader_bytes_read(l));
    }
    dtnn_loader_free(l);
    return rc;
}

/* ---- --sweep ----------------------------------------------------------------------------- */

/* Appends s to the command line in single quotes (so model paths with spaces survive). */
static int append_quoted(char *line, size_t size, const char *s)
{
    size_t len = strlen(line);
    if (len + 4 >= size)
        return -1;
    line[len++] = ' ';
    line[len++] = '\'';
    for (; *s; s++) {
        const char *piece = *s == '\'' ? "'\\''" : NULL;
        size_t add = piece ? 4 : 1;
        if (len + add + 2 >= size)
            return -1;
        if (piece)
            memcpy(line + len, piece, add);
        else
            line[len] = *s;
        len += add;
    }
    line[len++] = '\'';
    line[len] = '\0';
    return 0;
}

static double json_number(const char *line, const char *key)
{
    char pattern[64];
    snprintf(pattern, sizeof pattern, "\"%s\": ", key);
    const char *p = strstr(line, pattern);
    return p ? strtod(p + strlen(pattern), NULL) : -1.0;
}

/* Runs one configuration as a child process; fills ips and the exposed communication share. */
static int run_child(const cli_opt *o, int n, const char *self, int ranks, int threads,
                     double *ips, double *comm_share)
{
    char line[4096] = "";
    if (ranks > 1)
        snprintf(line, sizeof line, "%s -np %d", cli_str(o, n, "launcher"), ranks);
    static const char *const passed[] = {"model", "batch-size", "steps", "warmup", "input",
                                         "classes", "allreduce", "bucket-mb", "comm-dtype"};
    int bad = append_quoted(line, sizeof line, self) || append_quoted(line, sizeof line, "bench");
    for (size_t i = 0; i < sizeof passed / sizeof passed[0] && !bad; i++) {
        if (!cli_str(o, n, passed[i]))
            continue;
        char flag[64];
        snprintf(flag, sizeof flag, "--%s", passed[i]);
        bad = append_quoted(line, sizeof line, flag) ||
              append_quoted(line, sizeof line, cli_str(o, n, passed[i]));
    }
    char t[16];
    snprintf(t, sizeof t, "%d", threads);
    bad = bad || append_quoted(line, sizeof line, "--threads") ||
          append_quoted(line, sizeof line, t);
    if (bad || strlen(line) + 8 >= sizeof line) {
        fprintf(stderr, "dtnn bench: the command line of a sweep run is too long\n");
        return 1;
    }
    strcat(line, " 2>&1");
    fflush(stdout);
    FILE *p = popen(line, "r");
    if (!p) {
        fprintf(stderr, "dtnn bench: cannot run '%s'\n", line);
        return 1;
    }
    char out[2048], last_error[2048] = "";
    *ips = -1.0;
    while (fgets(out, sizeof out, p)) {
        if (strstr(out, "\"images_per_sec\"")) {
            *ips = json_number(out, "images_per_sec");
            *comm_share = json_number(out, "exposed_comm");
        } else {
            memcpy(last_error, out, sizeof out);
        }
    }
    int status = pclose(p);
    if (status != 0 || *ips <= 0) {
        fprintf(stderr, "dtnn bench: %d rank%s x %d thread%s failed: %s\n  command: %s\n", ranks,
                ranks == 1 ? "" : "s", threads, threads == 1 ? "" : "s",
                *last_error ? last_error : "no result\n", line);
        return 1;
    }
    return 0;
}

static int run_sweep(const cli_opt *o, int n, dtnn_comm *comm)
{
    if (dtnn_comm_size(comm) > 1)
        return cli_usage_error("bench", "%s", "--sweep starts its own ranks: run it as one "
                               "process, not under mpirun"), 2;
    char self[4096];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len <= 0) {
        fprintf(stderr, "dtnn bench: cannot find this program's path for --sweep\n");
        return 1;
    }
    self[len] = '\0';
    int cores = dtnn_comm_cores(comm);
    printf("dtnn bench --sweep: %s, batch %s per rank, %d core%s given; efficiency = images/s "
           "/ (cores used x images/s of 1 rank x 1 thread)\n", cli_str(o, n, "model"),
           cli_str(o, n, "batch-size"), cores, cores == 1 ? "" : "s");
    printf("%6s %8s %6s %11s %9s %11s %13s\n", "ranks", "threads", "cores", "images/s",
           "speedup", "efficiency", "exposed-comm");
    double base = 0, best = 0;
    int best_r = 0, best_t = 0, failures = 0;
    for (int ranks = 1; ranks <= cores; ranks++)
        for (int threads = 1; ranks * threads <= cores; threads++) {
            double ips = 0, share = -1;
            if (run_child(o, n, self, ranks, threads, &ips, &share)) {
                failures++;
                continue;
            }
            if (ranks == 1 && threads == 1)
                base = ips;
            char comm_text[16] = "-";
            if (ranks > 1)
                snprintf(comm_text, sizeof comm_text, "%.1f%%", 100.0 * share);
            printf("%6d %8d %6d %11.1f %9.2f %10.1f%% %13s\n", ranks, threads, ranks * threads,
                   ips, base > 0 ? ips / base : 0.0,
                   base > 0 ? 100.0 * ips / (base * ranks * threads) : 0.0, comm_text);
            fflush(stdout);
            if (ips > best) {
                best = ips;
                best_r = ranks;
                best_t = threads;
            }
        }
    if (best > 0)
        printf("fastest: %d rank%s x %d thread%s, %.1f images/s\n", best_r,
               best_r == 1 ? "" : "s", best_t, best_t == 1 ? "" : "s", best);
    return failures ? 1 : 0;
}

int cmd_bench(int argc, char **argv, dtnn_comm *comm)
{
    cli_opt *o = bench_opts;
    const int n = N_OPTS(bench_opts);
    const char *cmd = "bench";
    int early = cli_start(cmd, "Measures training throughput (SGD with momentum, synthetic "
                          "data); prints one JSON line. Under mpirun: data parallel, batch per "
                          "rank, with the all-reduce bandwidth.", o, n, argc, argv);
    if (early >= 0)
        return early;
    int64_t batch = cli_int(o, n, "batch-size");
    if (batch <= 0 || batch > 1 << 16 || cli_int(o, n, "steps") <= 0 ||
        cli_int(o, n, "warmup") < 0)
        return cli_usage_error(cmd, "%s", "--batch-size (1..65536) and --steps must be "
                               "positive, --warmup not negative");
    double bucket_mb;
    if (cli_bucket_mb(cli_str(o, n, "bucket-mb"), &bucket_mb))
        return cli_usage_error(cmd, "--bucket-mb must be auto or a positive size in MiB, not "
                               "'%s'", cli_str(o, n, "bucket-mb"));
    if (cli_flag(o, n, "loader"))
        return time_loader(o, n);
    int64_t sgemm = cli_int(o, n, "sgemm");
    if (sgemm < 0 || sgemm > 16384)
        return cli_usage_error(cmd, "--sgemm must be in [0, 16384], not %s",
                               cli_str(o, n, "sgemm"));
    const int fma = cli_flag(o, n, "fma-peak");
    if (!sgemm && !fma && !cli_str(o, n, "model"))
        return cli_usage_error(cmd, "%s", "--model is required (see dtnn bench --help)");
    if (cli_given(o, n, "project")) {
        if (dtnn_comm_size(comm) > 1 || cli_flag(o, n, "sweep"))
            return cli_usage_error(cmd, "%s", "--project profiles one rank: run it as one "
                                   "process, without --sweep"), 2;
        int bad = project_check_options(o, n);
        if (bad)
            return bad;
    }
    if (cli_flag(o, n, "sweep"))
        return run_sweep(o, n, comm);
    int threads = cli_threads(cmd, o, n, comm);
    if (!cli_all_ok(comm, threads > 0))
        return 2;
    if (fma)
        return time_fma_peak(threads);
    if (sgemm > 0)
        return time_sgemm((int)sgemm, threads, (int)cli_int(o, n, "steps"));
    return run_bench(o, n, comm, threads);
}
