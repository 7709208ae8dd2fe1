/*
 * trainer.c — the training loop: epochs of seeded permutations, global batches split across
 * the ranks of a communicator, forward / loss / backward / gradient all-reduce / optimizer step,
 * evaluation, a JSONL log and checkpoints at epoch ends.
 *
 * The position of a run is (epoch, step in epoch, global step); with the seed it determines the
 * data order (dtnn_epoch_permutation), the dropout stream (the model's step) and the learning
 * rate, so a checkpoint that stores it plus the weights, buffers and optimizer state resumes
 * bit for bit. --batch-size is the global batch: rank r of R takes a contiguous slice of each
 * global batch, so the same command means the same training on any number of ranks. The last
 * partial batch of an epoch is used (not dropped), with the mean taken over its real size.
 * Batches come from a dtnn_loader (loader.c), which does that slicing and may decode the next
 * batches in background threads; dtnn_train makes one over a dataset in memory. The data a
 * batch holds depends only on (seed, epoch, step), so resuming stays exact with any loader.
 * Everything a step needs is allocated before the first step.
 *
 * On several ranks: rank 0's parameters and buffers are broadcast first, and the ranks check
 * that they agree on the model, the training settings and the dataset (a mismatch is an error
 * at start, not a hang later). Each step's gradient is all-reduced by grad_sync (blocking,
 * overlapped with backward, or hierarchical). With --accumulate K a rank's slice of the global
 * batch is run as K micro-batches whose gradients add up; only the last one communicates.
 * Batch-norm running statistics are averaged over the ranks at every epoch end, so evaluation
 * and every checkpoint see one set of statistics.
 *
 * Progress is never lost: checkpoints at every epoch end and every --checkpoint-every steps
 * (atomic writes, optionally kept as step-numbered copies), and a stop request (a signal, via
 * p->stop) ends the run after the current step with a checkpoint, on every rank after the
 * same step.
 */
#include <errno.h>
#include <math.h>
#include <string.h>
#include <sys/stat.h>

#include "../core/atomic_file.h"
#include "../core/internal.h"
#include "../io/checkpoint_files.h"
#include "../comm/comm.h"
#include "../model/model.h"
#include "../core/trace.h"
#include "../io/checkpoint.h"
#include "ema.h"
#include "monitor.h"
#include "replicas.h"

void dtnn_train_params_default(dtnn_train_params *p)
{
    memset(p, 0, sizeof *p);
    p->epochs = 1;
    p->batch_size = 64;
    p->shuffle = 1;
    p->seed = 42;
    dtnn_loss_params_default(&p->loss);
    dtnn_sched_params_default(&p->sched);
    p->eval_each_epoch = 1;
    p->allreduce = DTNN_ALLREDUCE_OVERLAP;
    p->accumulate = 1;
    p->ema_steps = 32;
}

/* A loader over a split in memory, in its order, this rank's share of each global batch of
 * `batch` samples: in-memory data takes the loaders' path like any other source. `view` holds
 * the split for the loader and must outlive it. */
static dtnn_loader *split_loader(const dtnn_split *s, const char *name, dtnn_dataset *view,
                                 int64_t batch, int shuffle, uint64_t seed, dtnn_comm *comm,
                                 dtnn_error *err)
{
    memset(view, 0, sizeof *view);
    view->test = *s;
    snprintf(view->name, sizeof view->name, "%s", name);
    for (int c = 0; c < 4; c++)
        view->std[c] = 1.0f;
    dtnn_loader_params lp;
    dtnn_loader_params_default(&lp);
    lp.batch_size = (int)batch;
    lp.rank = comm ? dtnn_comm_rank(comm) : 0;
    lp.ranks = comm ? dtnn_comm_size(comm) : 1;
    lp.shuffle = shuffle;
    lp.seed = seed;
    return dtnn_loader_create(view, 1, &lp, err);
}

/* The batch-norm statistics of the weights' average, averaged over the ranks as the model's
 * own are (each rank's average follows its own statistics), through the model. */
static dtnn_status average_ema_buffers(dtnn_model *m, train_ema *ema, dtnn_comm *comm,
                                       dtnn_error *err)
{
    if (!ema || dtnn_comm_size(comm) < 2)
        return DTNN_OK;
    train_ema_swap(ema);
    dtnn_status st = train_average_buffers(m, comm, err);
    train_ema_swap(ema);
    return st;
}

/* rank 0's checkpoint, with the weights' average where there is one */
static dtnn_status write_checkpoint(dtnn_model *m, dtnn_optimizer *opt, const dtnn_dataset *d,
                                    train_ema *ema, const dtnn_train_params *p,
                                    const dtnn_train_state *ts, dtnn_error *err)
{
    if (!ema)
        return dtnn_checkpoint_save(p->save_path, m, opt, ts, d, err);
    ckpt_average avg = {NULL, NULL, train_ema_count(ema)};
    float *params;
    void *buffers;
    dtnn_status st = train_ema_to_host(ema, &params, &buffers, err);
    if (st)
        return st;
    avg.params = params;
    avg.buffers = buffers;
    st = ckpt_save_with_average(p->save_path, m, opt, ts, d, &avg, err);
    free(params);
    free(buffers);
    return st;
}

/* Saves the run's position (rank 0 writes; every rank calls). Mid-epoch the batch-norm
 * running statistics are averaged over the ranks first (averaged is what the epoch end would
 * give too, as the running average is linear), so every checkpoint holds one agreed set. */
static dtnn_status save_checkpoint(dtnn_model *m, dtnn_optimizer *opt, const dtnn_dataset *d,
                                   train_ema *ema, dtnn_comm *comm, const dtnn_train_params *p,
                                   const dtnn_train_state *ts, int average, dtnn_error *err)
{
    dtnn_status st;
    if (!p->save_path)
        return DTNN_OK;
    double t0 = trace_clock(p->trace);
    if (average && dtnn_comm_size(comm) > 1 &&
        ((st = train_average_buffers(m, comm, err)) ||
         (st = average_ema_buffers(m, ema, comm, err))))
        return st;
    if (dtnn_comm_rank(comm) != 0)
        return DTNN_OK;
    dtnn_error e = {0};
    struct stat previous;
    const int had_one = stat(p->save_path, &previous) == 0;
    if (write_checkpoint(m, opt, d, ema, p, ts, &e))
        return dtnn_error_set(err, e.code, "the checkpoint at step %lld could not be written, "
                              "so training stops; %s. %s", (long long)ts->step,
                              had_one ? "the last good one is intact"
                                      : "there is no earlier one to resume from",
                              e.message);
    if (p->keep > 0 && (st = ckpt_keep_copy(p->save_path, ts->step, p->keep, err)))
        return st;
    trace_span(p->trace, TRACE_CHECKPOINT, "checkpoint", t0, ts->step);
    return DTNN_OK;
}

/* What the ranks decide together after each step's gradient: whether any rank was asked to
 * stop, and whether any rank's loss or gradient is non-finite, so that all stop, or skip,
 * after the same step. One tiny all-reduce per step. */
static dtnn_status step_agreement(const dtnn_train_params *p, dtnn_comm *comm, int bad_local,
                                  int *stop, int *bad, dtnn_error *err)
{
    double flags[2] = {p->stop && *p->stop ? 1.0 : 0.0, bad_local ? 1.0 : 0.0};
    if (dtnn_comm_size(comm) > 1) {
        comm_set_purpose(comm, "step agreement (signals, finiteness)", -1, 0);
        dtnn_status st = dtnn_comm_allreduce_sum_f64(comm, flags, 2, err);
        if (st)
            return st;
    }
    *stop = flags[0] > 0;
    *bad = flags[1] > 0;
    return DTNN_OK;
}

/* The fields of a progress report that change during an epoch. */
static void progress_set(dtnn_progress *pr, const dtnn_train_state *ts, double loss_sum,
                         double correct, double count, double seconds, int64_t images, float lr)
{
    pr->step = ts->step;
    pr->step_in_epoch = ts->step_in_epoch;
    pr->loss = count > 0 ? loss_sum / count : 0.0;
    pr->acc = count > 0 ? correct / count : 0.0;
    pr->elapsed = seconds;
    pr->images_per_sec = seconds > 0 ? (double)images / seconds : 0.0;
    pr->lr = lr;
    pr->skipped = ts->skipped;
}

static void log_epoch(FILE *log, const dtnn_progress *pr)
{
    fprintf(log, "{\"epoch\": %lld, \"step\": %lld, \"train_loss\": %.6f, \"train_acc\": %.6f",
            (long long)pr->epoch + 1, (long long)pr->step, pr->loss, pr->acc);
    if (pr->has_test)
        fprintf(log, ", \"test_loss\": %.6f, \"test_acc\": %.6f", pr->test_loss, pr->test_acc);
    else
        fprintf(log, ", \"test_loss\": null, \"test_acc\": null");
    if (pr->has_ema_test)
        fprintf(log, ", \"ema_test_loss\": %.6f, \"ema_test_acc\": %.6f", pr->ema_test_loss,
                pr->ema_test_acc);
    fprintf(log, ", \"images_per_sec\": %.1f, \"seconds\": %.3f, \"comm_wait_seconds\": %.3f, "
            "\"skipped_steps\": %lld", pr->images_per_sec, pr->elapsed, pr->comm_wait,
            (long long)pr->skipped);
    fprintf(log, ", \"skipped_images\": %lld, \"lr\": %.8g}\n", (long long)pr->skipped_images,
            pr->lr);
    fflush(log);
}

/* One training run: what it was given, what it derived, and what it holds open. */
typedef struct {
    dtnn_model *m;
    dtnn_optimizer *opt;
    dtnn_loader *train, *test;
    dtnn_comm *comm;
    const dtnn_train_params *p;
    dtnn_train_state *ts;
    dtnn_progress_fn progress;
    void *user;
    int rank, size, K;              /* K: accumulation steps */
    int64_t B, steps_per_epoch, total_steps, epochs;
    int local_max, micro_max;       /* samples a rank takes per step, per forward */
    size_t sample;                  /* floats per sample */
    dtnn_sched_params sched;
    dtnn_dataset norm;              /* what checkpoints record of the data */
    FILE *log;
    dtnn_grad_sync *gs;
    dtnn_comm *nccl;                /* --collectives nccl: the gradients' communicator */
    unsigned char *saved_buffers;   /* --skip-nonfinite: the buffers before the step */
    int64_t skipped_images;         /* over all ranks, up to the last epoch end */
    int finished;                   /* the monitor ended the run (monitor.c) */
    train_ema *ema;                 /* --ema: the weights' average, else NULL */
    char stopping[160];             /* why */
    double last_progress;           /* when the progress callback was last called in a step */
    /* The next step's batch, taken from the loader and prefetched to the device during this
     * step's backward (a device backend: dtnn_model_prefetches); valid while `ready`. */
    struct {
        const float *x;
        const int32_t *y;
        dtnn_batch_mix mix;
        int n, ready;
        int64_t len;
    } ahead;
} train_run_state;

/* Whether this step calls the progress callback (dtnn_train_params.progress_interval): an
 * epoch's last step always does, so a caller sees every epoch complete. */
static int progress_due(train_run_state *r, int last_of_epoch)
{
    const double interval = r->p->progress_interval;
    if (interval == 0.0 || last_of_epoch)
        return 1;
    if (interval < 0.0)
        return 0;
    const double now = dtnn__now();
    if (now - r->last_progress < interval)
        return 0;
    r->last_progress = now;
    return 1;
}

/* One epoch's running sums and progress record. */
typedef struct {
    dtnn_metrics met;
    double t0, wait0;
    int64_t images, skipped0;
    float lr;
    dtnn_progress pr;
} epoch_state;

/* The run's settings against the loader and the model, and what follows from them. */
static dtnn_status run_check(train_run_state *r, dtnn_error *err)
{
    const dtnn_train_params *p = r->p;
    dtnn_loader_info tr;
    dtnn_loader_get_info(r->train, &tr);
    r->rank = dtnn_comm_rank(r->comm);
    r->size = dtnn_comm_size(r->comm);
    const int rank = r->rank, size = r->size;
    const int64_t B = r->B = p->batch_size;
    if (B <= 0)
        return dtnn_error_set(err, DTNN_ERR_ARG, "batch size must be positive, got %lld",
                              (long long)B);
    const int K = r->K = p->accumulate > 0 ? p->accumulate : 1;
    if (B % ((int64_t)size * K))
        return dtnn_error_set(err, DTNN_ERR_ARG, "the global batch size %lld does not divide by "
                              "the %d ranks x %d accumulation steps", (long long)B, size, K);
    if (tr.params.batch_size != B || tr.params.ranks != size || tr.params.rank != rank ||
        tr.params.seed != p->seed || !tr.params.shuffle != !p->shuffle)
        return dtnn_error_set(err, DTNN_ERR_ARG, "the train loader was made for batch %d, rank "
                              "%d of %d, seed %llu, shuffle %d, but training runs batch %lld, "
                              "rank %d of %d, seed %llu, shuffle %d", tr.params.batch_size,
                              tr.params.rank, tr.params.ranks,
                              (unsigned long long)tr.params.seed, tr.params.shuffle,
                              (long long)B, rank, size, (unsigned long long)p->seed, p->shuffle);
    int c, h, w;
    dtnn_model_input_shape(r->m, &c, &h, &w);
    if (c != tr.c || h != tr.h || w != tr.w)
        return dtnn_error_set(err, DTNN_ERR_SHAPE, "the model takes %dx%dx%d inputs but dataset "
                              "'%s' has %dx%dx%d samples", c, h, w, tr.name, tr.c, tr.h, tr.w);
    int out_n, classes;
    dtnn_model_output_shape(r->m, &out_n, &classes);
    if (classes < tr.classes)
        return dtnn_error_set(err, DTNN_ERR_SHAPE, "the model has %d outputs but dataset '%s' "
                              "has %d classes", classes, tr.name, tr.classes);
    if (p->epochs <= 0 && p->steps <= 0)
        return dtnn_error_set(err, DTNN_ERR_ARG, "give a positive number of epochs or steps");
    r->steps_per_epoch = tr.steps_per_epoch;
    r->total_steps = p->steps > 0 ? p->steps : (int64_t)p->epochs * r->steps_per_epoch;
    r->epochs = (r->total_steps + r->steps_per_epoch - 1) / r->steps_per_epoch;
    r->sched = p->sched;
    if ((r->sched.kind == DTNN_SCHED_COSINE || r->sched.kind == DTNN_SCHED_POLY) &&
        r->sched.t_max <= 0)
        r->sched.t_max = (int)r->epochs;
    if (!(p->stop_at_accuracy >= 0.0f && p->stop_at_accuracy <= 1.0f))
        return dtnn_error_set(err, DTNN_ERR_ARG, "the target accuracy %g is not a fraction in "
                              "[0, 1] (MLPerf's ResNet-50 target is 0.759)",
                              (double)p->stop_at_accuracy);
    if (p->stop_at_accuracy > 0.0f && !(r->test && p->eval_each_epoch))
        return dtnn_error_set(err, DTNN_ERR_ARG, "stopping at a test accuracy needs the test "
                              "split evaluated at every epoch's end");
    if (p->early_stop < 0)
        return dtnn_error_set(err, DTNN_ERR_ARG, "early-stop patience %d: give a number of "
                              "epochs > 0, or 0 for none", p->early_stop);
    if (r->ts->step >= r->total_steps)
        return dtnn_error_set(err, DTNN_ERR_ARG, "the run is already at step %lld of %lld: "
                              "nothing to train (raise --epochs or --steps)",
                              (long long)r->ts->step, (long long)r->total_steps);
    r->ts->seed = p->seed;
    r->ts->global_batch = B;
    memcpy(r->norm.mean, tr.mean, sizeof r->norm.mean);
    memcpy(r->norm.std, tr.std, sizeof r->norm.std);
    snprintf(r->norm.name, sizeof r->norm.name, "%s", tr.name);
    r->local_max = (int)(B / size);
    r->micro_max = r->local_max / K;
    r->sample = (size_t)c * h * w;
    return DTNN_OK;
}

/* What a checkpoint of the run takes on disk: the model and optimizer, and with --ema the
 * average's copy of the parameters and buffers. */
static size_t checkpoint_bytes(const train_run_state *r)
{
    const size_t avg = r->p->ema_decay > 0.0f
                           ? sizeof(float) * dtnn_model_params_padded(r->m) +
                                 dtnn_model_buffer_bytes(r->m)
                           : 0;
    return ckpt_estimate_bytes(r->m, r->opt) + avg;
}

/* --ema: the average, continued from the checkpoint a resumed run was loaded from (every rank
 * reads it: all hold the same). */
static dtnn_status open_ema(train_run_state *r, dtnn_error *err)
{
    const dtnn_train_params *p = r->p;
    if (!(p->ema_decay > 0.0f && p->ema_decay < 1.0f) || p->ema_steps < 1)
        return dtnn_error_set(err, DTNN_ERR_ARG, "the weights' average needs a decay in (0, 1) "
                              "and an update every >= 1 steps, got decay %g every %d",
                              (double)p->ema_decay, p->ema_steps);
    if (!(r->ema = train_ema_create(r->m, p->ema_decay, err)))
        return err->code;
    if (r->ts->step == 0 || !p->resume_from)
        return DTNN_OK;
    float *params = malloc(sizeof(float) * DTNN_MAX(dtnn_model_params_padded(r->m), 1));
    void *buffers = malloc(DTNN_MAX(dtnn_model_buffer_bytes(r->m), 1));
    int64_t count = 0;
    dtnn_status st = !params || !buffers
                         ? dtnn_error_set(err, DTNN_ERR_NOMEM, "out of memory reading the "
                                          "weights' average")
                         : ckpt_read_average(p->resume_from, r->m, params, buffers, &count, err);
    if (!st)
        train_ema_from_host(r->ema, params, buffers, count);
    else if (st == DTNN_ERR_FORMAT) {
        char why[sizeof err->message];
        snprintf(why, sizeof why, "%s", err->message);
        st = dtnn_error_set(err, st, "%s: resume without --ema, or from a checkpoint saved with "
                            "it", why);
    }
    free(params);
    free(buffers);
    return st;
}

/* Everything the loop needs open: the checkpoint folder checked, the log, the saved buffers,
 * and under MPI the ranks' agreement, rank 0's weights everywhere and the gradient sync. */
static dtnn_status run_open(train_run_state *r, dtnn_error *err)
{
    const dtnn_train_params *p = r->p;
    dtnn_model *m = r->m;
    dtnn_status st;
    if (p->trace) {
        dtnn_model_set_trace(m, p->trace);
        dtnn_comm_set_trace(r->comm, p->trace);
    }
    if (r->rank == 0 && p->save_path &&
        (st = ckpt_check_writable(p->save_path, "checkpoint", checkpoint_bytes(r),
                                  err)))
        return st;
    /* The log is appended to as the run goes (core/atomic_file.h says why it alone is not
     * written atomically); it is checked as every output is. */
    if (r->rank == 0 && p->log_path && (st = atomic_file_check(p->log_path, "log", err)))
        return st;
    if (r->rank == 0 && p->log_path) {
        r->log = fopen(p->log_path, r->ts->step > 0 ? "ab" : "wb");
        if (!r->log)
            return dtnn_error_set(err, DTNN_ERR_IO, "cannot write the log '%s': %s",
                                  p->log_path, strerror(errno));
    }
    if (p->skip_nonfinite &&
        !(r->saved_buffers = malloc(DTNN_MAX(dtnn_model_buffer_bytes(m), 1))))
        return dtnn_error_set(err, DTNN_ERR_NOMEM, "out of memory for a batch of %d samples",
                              r->local_max);
    if (r->size > 1) {
        if ((st = train_check_agreement(m, r->opt, r->train, r->test, r->comm, p, r->ts, err)) ||
            (st = train_broadcast_region(m, r->comm, DTNN_REGION_PARAMS, err)) ||
            (st = train_broadcast_region(m, r->comm, DTNN_REGION_BUFFERS, err)))
            return st;
        if (p->collectives == DTNN_COLLECTIVES_NCCL &&
            !(r->nccl = dtnn_comm_nccl_create(r->comm, m, err)))
            return err->code;
        r->gs = dtnn_grad_sync_create(r->nccl ? r->nccl : r->comm, m, p->allreduce,
                                      p->bucket_mb, p->comm_dtype, err);
        if (!r->gs)
            return err->code;
    }
    dtnn_model_set_step(m, r->ts->step);
    dtnn_model_set_sync_bn(m, p->sync_bn && r->size > 1 ? r->comm : NULL);
    return p->ema_decay > 0.0f ? open_ema(r, err) : DTNN_OK;
}

static void run_close(train_run_state *r)
{
    if (r->p->trace) {
        dtnn_model_set_trace(r->m, NULL);
        dtnn_comm_set_trace(r->comm, NULL);
    }
    dtnn_model_set_sync_bn(r->m, NULL);
    dtnn_grad_sync_free(r->gs);
    dtnn_comm_free(r->nccl);
    if (r->log)
        fclose(r->log);
    free(r->saved_buffers);
    train_ema_free(r->ema);
}

/* The error of a run stopped by a signal after its checkpoint was saved. */
static dtnn_status stopped(const train_run_state *r, int64_t epoch, dtnn_error *err)
{
    if (r->p->save_path)
        return dtnn_error_set(err, DTNN_ERR_INTERRUPTED, "stopped by a signal after step %lld "
                              "(epoch %lld); checkpoint saved: resume with --resume %s",
                              (long long)r->ts->step, (long long)epoch + 1, r->p->save_path);
    return dtnn_error_set(err, DTNN_ERR_INTERRUPTED, "stopped by a signal after step %lld "
                          "(epoch %lld); no --save was given, so this run cannot be resumed",
                          (long long)r->ts->step, (long long)epoch + 1);
}

/* Forward, loss and backward of the K micro-batches of one step, the gradient all-reduce
 * started during the last one's backward and finished after it. */
static dtnn_status step_gradients(train_run_state *r, const float *xb, const int32_t *yb,
                                  const dtnn_batch_mix *mix, int n, int64_t len,
                                  dtnn_metrics *step_met, dtnn_error *err)
{
    dtnn_status st;
    for (int k = 0; k < r->K; k++) {
        int m0 = n * k / r->K, m1 = n * (k + 1) / r->K;
        if (k == r->K - 1 && r->gs)
            dtnn_grad_sync_begin(r->gs);
        if (m1 > m0 &&
            ((st = dtnn_model_forward(r->m, xb + (size_t)m0 * r->sample, m1 - m0, 1, err)) ||
             (st = dtnn_model_loss_mixed(r->m, yb + m0, mix->y2 ? mix->y2 + m0 : NULL,
                                         mix->lam, m1 - m0, &r->p->loss, 1.0f / (float)len,
                                         step_met, err)) ||
             (st = dtnn_model_backward(r->m, err))))
            return st;
    }
    return r->gs ? dtnn_grad_sync_finish(r->gs, err) : DTNN_OK;
}

/* Step s of an epoch: gradients, the ranks' verdict on finiteness and signals, the update (or
 * the skip), progress, and the checkpoint a signal or --checkpoint-every asks for. */
static dtnn_status run_step(train_run_state *r, int64_t epoch, int64_t s, epoch_state *es,
                            dtnn_error *err)
{
    const dtnn_train_params *p = r->p;
    dtnn_model *m = r->m;
    dtnn_train_state *ts = r->ts;
    const float *xb;
    const int32_t *yb;
    dtnn_batch_mix mix;
    int n;
    int64_t len;
    dtnn_status st;
    double t_step = trace_clock(p->trace);
    comm_set_step(r->comm, ts->step + 1);
    if (r->ahead.ready) {
        xb = r->ahead.x, yb = r->ahead.y, n = r->ahead.n, len = r->ahead.len;
        mix = r->ahead.mix;
        r->ahead.ready = 0;
    } else if ((st = dtnn_loader_next(r->train, &xb, &yb, &n, &len, err))) {
        return st;
    } else {
        dtnn_loader_mix(r->train, &mix);
    }
    trace_span(p->trace, TRACE_DATA, "waiting for data", t_step, ts->step + 1);
    dtnn_model_zero_grad(m);
    if (r->saved_buffers &&
        (st = dtnn_model_read(m, DTNN_REGION_BUFFERS, 0, r->saved_buffers,
                              dtnn_model_buffer_bytes(m), err)))
        return st;
    dtnn_metrics step_met = {0};
    if ((st = step_gradients(r, xb, yb, &mix, n, len, &step_met, err)))
        return st;
    /* The next batch of this epoch goes to the device while backward still runs there. This
     * batch's host copy is not read again: its labels and images are on the device. Not with
     * accumulation: the model's input holds a micro-batch, not a step's batch. */
    if (dtnn_model_prefetches(m) && r->K == 1 && s + 1 < r->steps_per_epoch &&
        ts->step + 1 < r->total_steps) {
        if ((st = dtnn_loader_next(r->train, &r->ahead.x, &r->ahead.y, &r->ahead.n,
                                   &r->ahead.len, err)) ||
            (st = dtnn_model_prefetch(m, r->ahead.x, r->ahead.n, err)))
            return st;
        dtnn_loader_mix(r->train, &r->ahead.mix);
        r->ahead.ready = 1;
    }
    int stop, bad;
    if ((st = step_agreement(p, r->comm, !isfinite(step_met.loss_sum) ||
                             !dtnn_model_grads_finite(m), &stop, &bad, err)))
        return st;
    if (bad && !p->skip_nonfinite) {
        char where[200] = "another rank's loss or gradient";
        if (!isfinite(step_met.loss_sum) || !dtnn_model_grads_finite(m))
            dtnn_model_find_nonfinite(m, where, sizeof where);
        return dtnn_error_set(err, DTNN_ERR_NONFINITE, "non-finite values at step %lld (epoch "
                              "%lld), first in %s; the loss is %g: lower the learning rate or "
                              "check the data (--skip-nonfinite skips such steps)",
                              (long long)ts->step + 1, (long long)epoch + 1, where,
                              step_met.loss_sum);
    }
    es->lr = (float)(dtnn_sched_lr(&r->sched, ts->step, r->steps_per_epoch) *
                     train_monitor_lr_factor(r->p, ts));
    if (bad) {
        /* Skipped: no update, and the running statistics from before the step. */
        if ((st = dtnn_model_write(m, DTNN_REGION_BUFFERS, 0, r->saved_buffers,
                                   dtnn_model_buffer_bytes(m), err)))
            return st;
        ts->skipped++;
    } else {
        double t0 = trace_clock(p->trace);
        if ((st = dtnn_optimizer_step(r->opt, es->lr, err)))
            return st;
        trace_span(p->trace, TRACE_OPTIMIZER, "optimizer", t0, ts->step + 1);
        es->met.loss_sum += step_met.loss_sum;
        es->met.top1 += step_met.top1;
        es->met.top5 += step_met.top5;
        es->met.count += step_met.count;
    }
    es->images += len;
    ts->step++;
    ts->step_in_epoch = s + 1;
    /* torchvision restarts the average (n_averaged = 0) in each warm-up epoch's updates. */
    if (r->ema && !bad && ts->step % p->ema_steps == 0)
        train_ema_update(r->ema, (double)epoch < (double)p->sched.warmup_epochs);
    trace_span(p->trace, TRACE_STEP, "step", t_step, ts->step);
    const int last_of_epoch = s + 1 == r->steps_per_epoch || ts->step == r->total_steps;
    if (r->progress && progress_due(r, last_of_epoch)) {
        progress_set(&es->pr, ts, es->met.loss_sum, (double)es->met.top1,
                     (double)es->met.count, dtnn__now() - es->t0, es->images, es->lr);
        es->pr.skipped_images = r->skipped_images + dtnn_loader_skipped(r->train, NULL, 0) -
                                es->skipped0;
        r->progress(&es->pr, r->user);
    }
    if ((stop || (!last_of_epoch && p->checkpoint_every > 0 && ts->step % p->checkpoint_every == 0)) &&
        (st = save_checkpoint(m, r->opt, &r->norm, r->ema, r->comm, p, ts, 1, err)))
        return st;
    return stop ? stopped(r, epoch, err) : DTNN_OK;
}

/* An epoch's end: its metrics over all ranks, the replicas averaged and checked, the test
 * set, the log line, the checkpoint, the progress callback. */
static dtnn_status run_epoch_end(train_run_state *r, int64_t epoch, epoch_state *es,
                                 dtnn_error *err)
{
    dtnn_train_state *ts = r->ts;
    dtnn_progress *pr = &es->pr;
    dtnn_status st;
    int finished_epoch = ts->step_in_epoch == r->steps_per_epoch;
    double seconds = dtnn__now() - es->t0;
    /* Epoch metrics over all ranks (rank sums in double are exact for counts). */
    double sums[4] = {es->met.loss_sum, (double)es->met.top1, (double)es->met.count,
                      (double)(dtnn_loader_skipped(r->train, NULL, 0) - es->skipped0)};
    comm_set_purpose(r->comm, "epoch metrics", -1, 0);
    if ((st = dtnn_comm_allreduce_sum_f64(r->comm, sums, 4, err)))
        return st;
    progress_set(pr, ts, sums[0], sums[1], sums[2], seconds, es->images, es->lr);
    r->skipped_images += (int64_t)sums[3];
    pr->skipped_images = r->skipped_images;
    pr->epoch_end = 1;
    pr->comm_wait = r->gs ? dtnn_grad_sync_wait_seconds(r->gs) - es->wait0 : 0.0;
    if (r->size > 1 && ((st = train_average_buffers(r->m, r->comm, err)) ||
                        (st = average_ema_buffers(r->m, r->ema, r->comm, err)) ||
                        (st = train_check_replicas(r->m, r->comm, epoch, err))))
        return st;
    if (r->p->eval_each_epoch && r->test) {
        dtnn_metrics tm;
        double t0 = trace_clock(r->p->trace);
        if ((st = dtnn_evaluate_loader(r->m, r->test, r->micro_max, &r->p->loss, r->comm, &tm,
                                       err)))
            return st;
        trace_span(r->p->trace, TRACE_EVAL, "test-set evaluation", t0, ts->step);
        pr->has_test = 1;
        pr->test_loss = tm.loss_sum / (double)tm.count;
        pr->test_acc = (double)tm.top1 / (double)tm.count;
        if (r->ema) {
            train_ema_swap(r->ema);
            st = dtnn_evaluate_loader(r->m, r->test, r->micro_max, &r->p->loss, r->comm, &tm,
                                      err);
            train_ema_swap(r->ema);
            if (st)
                return st;
            pr->has_ema_test = 1;
            pr->ema_test_loss = tm.loss_sum / (double)tm.count;
            pr->ema_test_acc = (double)tm.top1 / (double)tm.count;
        }
    }
    if (finished_epoch) {
        ts->epoch = epoch + 1;
        ts->step_in_epoch = 0;
        /* Full epochs only: a run cut short by --steps ends anyway. */
        r->finished = train_monitor_epoch(r->p, ts, pr->has_test ? pr->test_loss : pr->loss,
                                          pr->has_test, pr->test_acc, r->stopping,
                                          sizeof r->stopping);
        pr->stopping = r->finished ? r->stopping : NULL;
    }
    if (r->log)
        log_epoch(r->log, pr);
    if ((st = save_checkpoint(r->m, r->opt, &r->norm, r->ema, r->comm, r->p, ts, 0, err)))
        return st;
    if (r->progress)
        r->progress(pr, r->user);
    /* A stop asked for by the epoch's end (a signal, or the caller's progress callback) ends
     * the run here, after the checkpoint just saved, rather than after the next epoch's first
     * step: one tiny all-reduce per epoch. */
    if (r->p->stop && !r->finished && ts->step < r->total_steps) {
        int stop = 0, bad = 0;
        if ((st = step_agreement(r->p, r->comm, 0, &stop, &bad, err)))
            return st;
        if (stop)
            return stopped(r, epoch, err);
    }
    return DTNN_OK;
}

/* The loop over a train loader; the test set is a loader or none. */
static dtnn_status train_run(dtnn_model *m, dtnn_optimizer *opt, dtnn_loader *train,
                             dtnn_loader *test, dtnn_comm *comm,
                             const dtnn_train_params *p, dtnn_train_state *ts,
                             dtnn_progress_fn progress, void *user, dtnn_error *err)
{
    train_run_state r = {.m = m, .opt = opt, .train = train, .test = test, .comm = comm,
                         .p = p, .ts = ts, .progress = progress, .user = user};
    dtnn_status st = run_check(&r, err);
    if (st)
        return st;
    if (!(st = run_open(&r, err))) {
        for (int64_t epoch = ts->epoch;
             epoch < r.epochs && ts->step < r.total_steps && !st && !r.finished; epoch++) {
            const int64_t end = DTNN_MIN(r.steps_per_epoch,
                                         ts->step_in_epoch + (r.total_steps - ts->step));
            if ((st = dtnn_loader_start(train, epoch, ts->step_in_epoch, end, err)))
                break;
            epoch_state es;
            memset(&es, 0, sizeof es);
            es.skipped0 = dtnn_loader_skipped(train, NULL, 0);
            es.t0 = dtnn__now();
            es.wait0 = r.gs ? dtnn_grad_sync_wait_seconds(r.gs) : 0.0;
            es.pr.epoch = epoch;
            es.pr.epochs = r.epochs;
            es.pr.total_steps = r.total_steps;
            es.pr.steps_per_epoch = r.steps_per_epoch;
            for (int64_t s = ts->step_in_epoch;
                 s < r.steps_per_epoch && ts->step < r.total_steps && !st; s++)
                st = run_step(&r, epoch, s, &es, err);
            if (!st)
                st = run_epoch_end(&r, epoch, &es, err);
        }
    }
    run_close(&r);
    return st;
}

dtnn_status dtnn_train_loader(dtnn_model *m, dtnn_optimizer *opt, dtnn_loader *train,
                              dtnn_loader *test, dtnn_comm *comm, const dtnn_train_params *p,
                              dtnn_train_state *ts, dtnn_progress_fn progress, void *user,
                              dtnn_error *err)
{
    return train_run(m, opt, train, test, comm, p, ts, progress, user, err);
}

/* In memory: loaders over the splits, which copy batch by batch in this thread. */
dtnn_status dtnn_train(dtnn_model *m, dtnn_optimizer *opt, const dtnn_dataset *d,
                       dtnn_comm *comm, const dtnn_train_params *p, dtnn_train_state *ts,
                       dtnn_progress_fn progress, void *user, dtnn_error *err)
{
    if (p->batch_size <= 0)
        return dtnn_error_set(err, DTNN_ERR_ARG, "batch size must be positive, got %d",
                              p->batch_size);
    if (d->train.n <= 0)
        return dtnn_error_set(err, DTNN_ERR_ARG, "the training split of '%s' is empty", d->name);
    dtnn_loader_params lp;
    dtnn_loader_params_default(&lp);
    lp.batch_size = p->batch_size;
    lp.rank = dtnn_comm_rank(comm);
    lp.ranks = dtnn_comm_size(comm);
    lp.shuffle = p->shuffle;
    lp.seed = p->seed;
    dtnn_loader *train = dtnn_loader_create(d, 0, &lp, err);
    if (!train)
        return err->code;
    dtnn_dataset view;
    dtnn_loader *test = d->test.n > 0 ? split_loader(&d->test, d->name, &view, p->batch_size, 0,
                                                     p->seed, comm, err)
                                      : NULL;
    dtnn_status st = d->test.n > 0 && !test
                         ? err->code
                         : train_run(m, opt, train, test, comm, p, ts, progress, user, err);
    dtnn_loader_free(test);
    dtnn_loader_free(train);
    return st;
}

dtnn_status dtnn_evaluate_loader(dtnn_model *m, dtnn_loader *l, int max_batch,
                                 const dtnn_loss_params *lp, dtnn_comm *comm, dtnn_metrics *out,
                                 dtnn_error *err)
{
    memset(out, 0, sizeof *out);
    dtnn_loader_info info;
    dtnn_loader_get_info(l, &info);
    if (max_batch < 1)
        return dtnn_error_set(err, DTNN_ERR_ARG, "evaluation batch must be positive, got %d",
                              max_batch);
    const size_t sample = (size_t)info.c * info.h * info.w;
    dtnn_status st = dtnn_loader_start(l, 0, 0, info.steps_per_epoch, err);
    for (int64_t s = 0; s < info.steps_per_epoch && !st; s++) {
        const float *x;
        const int32_t *y;
        int n;
        if ((st = dtnn_loader_next(l, &x, &y, &n, NULL, err)))
            break;
        for (int i = 0; i < n && !st; i += max_batch) {
            int k = DTNN_MIN(max_batch, n - i);
            st = dtnn_model_forward(m, x + (size_t)i * sample, k, 0, err);
            if (!st)
                st = dtnn_model_loss(m, y + i, k, lp, 1.0f, out, err);
        }
    }
    if (st)
        return st;
    if (comm && dtnn_comm_size(comm) > 1) {
        double sums[4] = {out->loss_sum, (double)out->top1, (double)out->top5,
                          (double)out->count};
        comm_set_purpose(comm, "evaluation sums", -1, 0);
        if ((st = dtnn_comm_allreduce_sum_f64(comm, sums, 4, err)))
            return st;
        out->loss_sum = sums[0];
        out->top1 = (int64_t)sums[1];
        out->top5 = (int64_t)sums[2];
        out->count = (int64_t)sums[3];
    }
    return DTNN_OK;
}

/* A split in memory is evaluated as a loader of it: one path for every source. */
dtnn_status dtnn_evaluate(dtnn_model *m, const dtnn_split *s, int batch_size,
                          const dtnn_loss_params *lp, dtnn_comm *comm, dtnn_metrics *out,
                          dtnn_error *err)
{
    memset(out, 0, sizeof *out);
    if (batch_size < 1)
        return dtnn_error_set(err, DTNN_ERR_ARG, "evaluation batch must be positive, got %d",
                              batch_size);
    if (s->n <= 0)
        return DTNN_OK;
    const int ranks = comm ? dtnn_comm_size(comm) : 1;
    dtnn_dataset view;
    dtnn_loader *l = split_loader(s, "evaluation split", &view, (int64_t)batch_size * ranks, 0, 0,
                                  comm, err);
    if (!l)
        return err->code;
    dtnn_status st = dtnn_evaluate_loader(m, l, batch_size, lp, comm, out, err);
    dtnn_loader_free(l);
    return st;
}
