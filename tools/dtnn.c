/*
 * dtnn.c — the command-line tool: train, eval, predict, bench, models, info, export. It uses
 * only the public API (dtnn.h) and is the only place where errors become exit codes: 0
 * success, 1 a runtime error (bad file, non-finite loss, ...), 2 a usage error (bad flag or
 * value), 3 (train) a communication error, 128 + N stopped by signal N (cli_options.h).
 * launch (launch.c) is the supervisor that restarts a training run after a lost host.
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli_data.h"
#include "cli_options.h"
#include "dtnn.h"
#include "progress.h"


static dtnn_status data_params(const cli_opt *o, int n, dtnn_data_params *dp,
                               int with_synthetic_size, dtnn_error *err)
{
    dtnn_data_params_default(dp);
    dp->name = cli_str(o, n, "dataset");
    dp->dir = cli_str(o, n, "data-dir");
    if (with_synthetic_size) {
        dp->synthetic_n = cli_int(o, n, "synthetic-samples");
        if (cli_parse_chw(cli_str(o, n, "synthetic-shape"), &dp->c, &dp->h, &dp->w))
            return dtnn_error_set(err, DTNN_ERR_ARG, "--synthetic-shape must be CxHxW, not '%s'",
                                  cli_str(o, n, "synthetic-shape"));
    }
    return DTNN_OK;
}

#define DATASET_HELP                                                                          \
    "fashion-mnist | mnist | cifar10 | cifar100 | npy | synthetic | imagefolder | shards "    \
    "(WebDataset .tar shards in --data-dir; `dtnn shard` writes them)"
#define DATA_OPTIONS                                                                          \
    {"dataset", OPT_STRING, "fashion-mnist", DATASET_HELP, 0, NULL, 0},                       \
    {"data-dir", OPT_STRING, NULL, "dataset folder (default: the dataset's own; imagefolder: "  \
     "DIR/train/<class>/<image>, DIR/val/<class>/<image>)", 0, NULL, 0},                      \
    {"image-size", OPT_INT, "224", "imagefolder: height = width of the crops", 0, NULL, 0},     \
    {"loader-threads", OPT_INT, "-1", "threads decoding the next batches (-1: 2 for "         \
     "imagefolder, else 0 = in the training thread)", 0, NULL, 0},                            \
    {"strict", OPT_FLAG, NULL, "an unreadable image is an error (default: skipped, counted "   \
     "and replaced by the next readable one)", 0, NULL, 0}

/* Creates the model for a dataset: a zoo model adapts its input and classes to the data. */
static dtnn_model *make_model(const char *spec, const dtnn_split *s, int classes,
                              dtnn_error *err)
{
    return dtnn_model_from_spec(spec, classes > 0 ? classes : s->classes, s->c, s->h, s->w, err);
}

/* ---- train ----------------------------------------------------------------------------- */

/* The one piece of global state in dtnn: a signal handler can only talk through it. SIGINT or
 * SIGTERM sets it (to the signal number) and training stops after the current step with a
 * checkpoint; the handler then reverts to the default, so a second signal ends at once. */
static volatile sig_atomic_t stop_signal;

static void on_stop_signal(int sig) { stop_signal = sig; }

static void catch_stop_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop_signal;
    sa.sa_flags = SA_RESETHAND;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

static cli_opt train_opts[] = {
    {"model", OPT_STRING, NULL, "zoo model name, model file or .onnx file", 1, NULL, 0},
    DATA_OPTIONS,
    {"augment", OPT_STRING, "auto", "none, or any of crop, flip and one of trivialaugment, "
     "randaugment[:N[:M]] (torchvision's TrivialAugmentWide, RandAugment(N=2, M=9)), comma-"
     "separated (auto: crop,flip for imagefolder, RandomResizedCrop; else none; in memory crop "
     "is RandomCrop with padding)", 0, NULL, 0},
    {"random-erase", OPT_FLOAT, "0",
     "RandomErasing probability: a box of 2-33% of the image set to the mean (0: none)", 0,
     NULL, 0},
    {"mixup", OPT_FLOAT, "0", "MixUp alpha: each batch mixed with itself rolled by one, "
     "lam ~ Beta(alpha, alpha), as torchvision's v2.MixUp (0: none; the recipes use 0.2)", 0,
     NULL, 0},
    {"cutmix", OPT_FLOAT, "0", "CutMix alpha, as v2.CutMix (0: none; recipes 1.0); with --mixup "
     "a fair coin per batch picks one", 0, NULL, 0},
    {"repeated-augment", OPT_INT, "0", "each sample K times in a row, augmented anew each time, "
     "the epoch as long (torchvision's RASampler; 0 or 1: off; recipes 3)", 0, NULL, 0},
    {"crop-padding", OPT_INT, "4", "padding of the in-memory crop (the CIFAR recipe)", 0, NULL,
     0},
    {"prefetch", OPT_INT, "0", "batches decoded ahead (0: max(2, loader threads))", 0, NULL, 0},
    {"shuffle-buffer", OPT_INT, "1000", "shards: samples of the shuffle buffer each rank draws "
     "its stream through (0: none)", 0, NULL, 0},
    {"synthetic-samples", OPT_INT, "4096", "training samples of the synthetic dataset", 0, NULL, 0},
    {"synthetic-shape", OPT_STRING, "3x32x32", "CxHxW of the synthetic samples", 0, NULL, 0},
    {"epochs", OPT_INT, "2", "epochs to train", 0, NULL, 0},
    {"steps", OPT_INT, "0", "total steps (0: epochs x steps per epoch)", 0, NULL, 0},
    {"batch-size", OPT_INT, "64", "global batch size", 0, NULL, 0},
    {"optimizer", OPT_STRING, "sgd", "sgd | adam | adamw | rmsprop | nadam | lars | lamb", 0,
     NULL, 0},
    {"lr", OPT_FLOAT, "0.01", "learning rate", 0, NULL, 0},
    {"momentum", OPT_FLOAT, NULL, "momentum (sgd, rmsprop, lars) [0; lars 0.9]", 0, NULL, 0},
    {"nesterov", OPT_FLAG, NULL, "Nesterov momentum (sgd, lars)", 0, NULL, 0},
    {"weight-decay", OPT_FLOAT, NULL,
     "weight decay (L2; decoupled for adamw) [0; adamw, lamb 0.01]", 0, NULL, 0},
    {"no-decay", OPT_STRING, NULL,
     "parameter groups without weight decay (and lars/lamb adaptation): none | norm,bias "
     "[none; lars, lamb norm,bias]", 0, NULL, 0},
    {"beta1", OPT_FLOAT, "0.9", "Adam / NAdam / LAMB beta1", 0, NULL, 0},
    {"beta2", OPT_FLOAT, "0.999", "Adam / NAdam / LAMB beta2", 0, NULL, 0},
    {"eps", OPT_FLOAT, NULL, "epsilon [1e-8; lamb 1e-6, lars 0]", 0, NULL, 0},
    {"alpha", OPT_FLOAT, "0.99", "RMSProp smoothing", 0, NULL, 0},
    {"momentum-decay", OPT_FLOAT, "0.004", "NAdam momentum decay (psi)", 0, NULL, 0},
    {"trust-coefficient", OPT_FLOAT, "0.001", "LARS trust coefficient (eta)", 0, NULL, 0},
    {"clip-grad-norm", OPT_FLOAT, "0",
     "scale the (all-reduced) gradient to this L2 norm at most (0: off)", 0, NULL, 0},
    {"lr-schedule", OPT_STRING, "constant",
     "constant | step:SIZE[:GAMMA] | multistep:M1,M2[:GAMMA] | cosine[:TMAX[:ETAMIN]] | "
     "poly:POWER[:T] | plateau:PATIENCE[:FACTOR] (on the test loss, else the training loss)",
     0, NULL, 0},
    {"stop-at-accuracy", OPT_FLOAT, "0",
     "end after the first epoch whose test accuracy reaches this fraction (0: off)", 0, NULL, 0},
    {"early-stop", OPT_INT, "0",
     "end after this many epochs in a row without a lower test (else training) loss (0: off)",
     0, NULL, 0},
    {"warmup-epochs", OPT_FLOAT, "0", "linear learning-rate warm-up (epochs)", 0, NULL, 0},
    {"loss", OPT_STRING, "cross-entropy", "cross-entropy | bce | mse", 0, NULL, 0},
    {"label-smoothing", OPT_FLOAT, "0", "cross-entropy label smoothing", 0, NULL, 0},
    {"init-scheme", OPT_STRING, "default", "default (PyTorch's) | he | xavier", 0, NULL, 0},
    {"classes", OPT_INT, "0", "output classes of a zoo model (0: the dataset's)", 0, NULL, 0},
    {"seed", OPT_INT, "42", "seed of initialisation, shuffling and dropout", 0, NULL, 0},
    {"no-shuffle", OPT_FLAG, NULL, "keep the file order", 0, NULL, 0},
    {"threads", OPT_INT, "0", "kernel threads (0: the cores given to this process)", 0, NULL, 0},
    CLI_DEVICE_OPTION,
    CLI_PRECISION_OPTION,
    {"allow-nonfinite-weights", OPT_FLAG, NULL, "load weights that hold NaN or Inf (forensics "
     "on a diverged run; refused otherwise)", 0, NULL, 0},
    {"init", OPT_STRING, NULL, "checkpoint to take starting weights from (default for an .onnx "
     "--model: its own weights)", 0, NULL, 0},
    {"init-exclude", OPT_STRINGS, NULL, "--init: tensors (glob over names, e.g. 'fc.*') left at "
     "their fresh initialisation", 0, NULL, 0},
    {"freeze", OPT_STRINGS, NULL, "parameters (glob over names, e.g. 'layer1.*') kept fixed: "
     "no gradient, update, optimizer state or all-reduce", 0, NULL, 0},
    {"freeze-bn", OPT_FLAG, NULL, "batch norms whose weight and bias are frozen run in eval "
     "mode (running statistics, not updated); without it they normalise with the batch", 0,
     NULL, 0},
    {"save", OPT_STRING, NULL, "checkpoint written at every epoch end", 0, NULL, 0},
    {"checkpoint-every", OPT_INT, "0", "also save every N steps (0: epoch ends only)", 0, NULL,
     0},
    {"skip-nonfinite", OPT_FLAG, NULL, "skip (and count) a step whose loss or gradient is NaN "
     "or Inf instead of stopping", 0, NULL, 0},
    {"keep", OPT_INT, "0", "also keep the K newest checkpoints as <save>.step<N> copies", 0,
     NULL, 0},
    {"resume", OPT_STRING, NULL, "checkpoint to continue a run from", 0, NULL, 0},
    {"ema", OPT_FLOAT, "0",
     "keep an exponential moving average of the weights with this decay (torchvision's "
     "--model-ema-decay), evaluated and saved beside them (0: none)", 0, NULL, 0},
    {"ema-steps", OPT_INT, "32", "optimizer steps between updates of the average", 0, NULL, 0},
    {"log", OPT_STRING, NULL, "JSONL metrics log, one object per epoch", 0, NULL, 0},
    {"allreduce", OPT_STRING, "overlap", "MPI gradient all-reduce: overlap | blocking | "
     "hierarchical", 0, NULL, 0},
    {"bucket-mb", OPT_STRING, "auto", "all-reduce bucket size in MiB (overlap, hierarchical), "
     "or auto: chosen from the gradient size, the ranks and the link measured at start-up", 0,
     NULL, 0},
    {"comm-dtype", OPT_STRING, "fp32", "gradients travel as fp32 | fp16 | bf16", 0, NULL, 0},
    {"collectives", OPT_STRING, "mpi", "gradients all-reduced by mpi (through host memory on a "
     "device) | nccl (on the GPUs, --device cuda)", 0, NULL, 0},
    {"accumulate", OPT_INT, "1", "micro-batches per step (gradient accumulation)", 0, NULL, 0},
    {"sync-bn", OPT_FLAG, NULL, "batch-norm statistics over all ranks' samples", 0, NULL, 0},
    {"stall-timeout", OPT_FLOAT, "0", "seconds a rank may wait in a collective before it "
     "reports the missing ranks and ends the job (0: wait forever)", 0, NULL, 0},
    {"lr-scaling", OPT_STRING, "none", "none | linear: lr x global batch / --base-batch "
     "(Goyal et al. 2017)", 0, NULL, 0},
    {"base-batch", OPT_INT, "256", "the batch --lr is meant for, with --lr-scaling linear", 0,
     NULL, 0},
    {"quiet", OPT_FLAG, NULL, "only the per-epoch lines", 0, NULL, 0},
    {"trace", OPT_STRING, NULL, "timeline of every rank (steps, layers, buckets, collectives) "
     "as Chrome trace-event JSON (Perfetto; scripts/trace_plot draws it)", 0, NULL, 0},
    {"help", OPT_FLAG, NULL, "show this help", 0, NULL, 0},
};

/* --optimizer and its hyperparameters. Returns -1, or the exit code of a usage error. */
static int optimizer_options(const cli_opt *o, int n, const char *cmd, dtnn_opt_params *op,
                             dtnn_opt_kind *kind)
{
    dtnn_error err = {0};
    if (dtnn_opt_parse(cli_str(o, n, "optimizer"), kind, &err))
        return fprintf(stderr, "dtnn %s: %s\n", cmd, err.message), 2;
    dtnn_opt_params_default(op, *kind);
    if (cli_given(o, n, "momentum"))
        op->momentum = (float)cli_float(o, n, "momentum");
    op->nesterov = cli_flag(o, n, "nesterov");
    if (cli_given(o, n, "weight-decay"))
        op->weight_decay = (float)cli_float(o, n, "weight-decay");
    if (cli_given(o, n, "no-decay") &&
        dtnn_opt_parse_groups(cli_str(o, n, "no-decay"), &op->no_decay, &err))
        return fprintf(stderr, "dtnn %s: --no-decay: %s\n", cmd, err.message), 2;
    op->beta1 = (float)cli_float(o, n, "beta1");
    op->beta2 = (float)cli_float(o, n, "beta2");
    if (cli_given(o, n, "eps"))
        op->eps = (float)cli_float(o, n, "eps");
    op->alpha = (float)cli_float(o, n, "alpha");
    op->momentum_decay = (float)cli_float(o, n, "momentum-decay");
    op->trust_coefficient = (float)cli_float(o, n, "trust-coefficient");
    op->clip_grad_norm = (float)cli_float(o, n, "clip-grad-norm");
    return -1;
}

/* The run: epochs, batch, checkpoints, loss, schedule, all-reduce. Returns -1, or the exit
 * code of a usage error. */
static int run_options(const cli_opt *o, int n, const char *cmd, dtnn_train_params *tp)
{
    dtnn_error err = {0};
    dtnn_train_params_default(tp);
    tp->epochs = (int)cli_int(o, n, "epochs");
    tp->steps = cli_int(o, n, "steps");
    tp->batch_size = (int)cli_int(o, n, "batch-size");
    tp->seed = (uint64_t)cli_int(o, n, "seed");
    tp->shuffle = !cli_flag(o, n, "no-shuffle");
    tp->log_path = cli_str(o, n, "log");
    tp->save_path = cli_str(o, n, "save");
    tp->checkpoint_every = cli_int(o, n, "checkpoint-every");
    int64_t keep = cli_int(o, n, "keep");
    if (tp->checkpoint_every < 0 || keep < 0 || keep > 1000)
        return cli_usage_error(cmd, "%s", "--checkpoint-every must be 0 or more steps, --keep "
                               "0 to 1000");
    if ((tp->checkpoint_every > 0 || keep > 0) && !tp->save_path)
        return cli_usage_error(cmd, "%s", "--checkpoint-every and --keep need --save PATH");
    tp->keep = (int)keep;
    tp->skip_nonfinite = cli_flag(o, n, "skip-nonfinite");
    tp->stop_at_accuracy = (float)cli_float(o, n, "stop-at-accuracy");
    const int64_t early = cli_int(o, n, "early-stop");
    if (early < 0 || early > 1000000 || !(tp->stop_at_accuracy >= 0.0f && tp->stop_at_accuracy <= 1.0f))
        return cli_usage_error(cmd, "%s", "--early-stop must be 0 or more epochs, "
                               "--stop-at-accuracy a fraction in [0, 1] (e.g. 0.759)");
    tp->early_stop = (int)early;
    tp->ema_decay = (float)cli_float(o, n, "ema");
    const int64_t ema_steps = cli_int(o, n, "ema-steps");
    if (!(tp->ema_decay >= 0.0f && tp->ema_decay < 1.0f) || ema_steps < 1 || ema_steps > 1 << 30)
        return cli_usage_error(cmd, "%s", "--ema must be a decay in [0, 1) (0: none), "
                               "--ema-steps at least 1");
    tp->ema_steps = (int)ema_steps;
    tp->resume_from = cli_str(o, n, "resume");
    tp->stop = &stop_signal;
    if (tp->batch_size <= 0 || tp->batch_size > 1 << 20)
        return cli_usage_error(cmd, "--batch-size must be in [1, 1048576], got %s",
                           cli_str(o, n, "batch-size"));
    if (tp->epochs < 0 || tp->steps < 0 || (tp->epochs == 0 && tp->steps == 0))
        return cli_usage_error(cmd, "%s", "give a positive --epochs or --steps");
    if (dtnn_loss_parse(cli_str(o, n, "loss"), &tp->loss.kind, &err))
        return fprintf(stderr, "dtnn %s: %s\n", cmd, err.message), 2;
    tp->loss.label_smoothing = (float)cli_float(o, n, "label-smoothing");
    if (tp->loss.label_smoothing < 0 || tp->loss.label_smoothing > 1)
        return cli_usage_error(cmd, "--label-smoothing must be in [0, 1], got %s",
                           cli_str(o, n, "label-smoothing"));
    if (dtnn_sched_parse(cli_str(o, n, "lr-schedule"), &tp->sched, &err))
        return fprintf(stderr, "dtnn %s: %s\n", cmd, err.message), 2;
    tp->sched.base_lr = (float)cli_float(o, n, "lr");
    tp->sched.warmup_epochs = (float)cli_float(o, n, "warmup-epochs");
    if (!(tp->sched.base_lr > 0) || tp->sched.warmup_epochs < 0)
        return cli_usage_error(cmd, "%s", "--lr must be positive and --warmup-epochs >= 0");
    if (cli_given(o, n, "init") && cli_given(o, n, "resume"))
        return cli_usage_error(cmd, "%s", "--init and --resume exclude each other");
    if (cli_given(o, n, "init-exclude") && !cli_given(o, n, "init"))
        return cli_usage_error(cmd, "%s", "--init-exclude needs --init CHECKPOINT");
    if (dtnn_allreduce_parse(cli_str(o, n, "allreduce"), &tp->allreduce, &err) ||
        dtnn_comm_dtype_parse(cli_str(o, n, "comm-dtype"), &tp->comm_dtype, &err) ||
        dtnn_collectives_parse(cli_str(o, n, "collectives"), &tp->collectives, &err))
        return fprintf(stderr, "dtnn %s: %s\n", cmd, err.message), 2;
    if (cli_bucket_mb(cli_str(o, n, "bucket-mb"), &tp->bucket_mb))
        return cli_usage_error(cmd, "--bucket-mb must be auto or a positive size in MiB, not "
                               "'%s'", cli_str(o, n, "bucket-mb"));
    tp->accumulate = (int)cli_int(o, n, "accumulate");
    tp->sync_bn = cli_flag(o, n, "sync-bn");
    if (cli_float(o, n, "stall-timeout") < 0)
        return cli_usage_error(cmd, "--stall-timeout must be 0 (off) or positive seconds, not "
                               "%s", cli_str(o, n, "stall-timeout"));
    if (tp->accumulate < 1 || tp->accumulate > tp->batch_size)
        return cli_usage_error(cmd, "%s", "--accumulate must be in [1, batch size]");
    const char *scaling = cli_str(o, n, "lr-scaling");
    if (!strcmp(scaling, "linear")) {
        int64_t base = cli_int(o, n, "base-batch");
        if (base <= 0)
            return cli_usage_error(cmd, "--base-batch must be positive, got %s",
                               cli_str(o, n, "base-batch"));
        tp->sched.base_lr *= (float)tp->batch_size / (float)base;
    } else if (strcmp(scaling, "none")) {
        return cli_usage_error(cmd, "--lr-scaling must be none or linear, not '%s'", scaling);
    }
    return -1;
}

/* --init-scheme. Returns -1, or the exit code of a usage error. */
static int build_options(const cli_opt *o, int n, const char *cmd, dtnn_build_params *bp)
{
    dtnn_build_params_default(bp);
    const char *scheme = cli_str(o, n, "init-scheme");
    if (!strcmp(scheme, "he"))
        bp->init = DTNN_INIT_HE;
    else if (!strcmp(scheme, "xavier"))
        bp->init = DTNN_INIT_XAVIER;
    else if (strcmp(scheme, "default"))
        return cli_usage_error(cmd, "--init-scheme must be default, he or xavier, not '%s'",
                               scheme);
    return -1;
}

/* --init's weights or --resume's whole state. Returns -1, or an exit code (1: the error is in
 * err). */
static int start_state(const cli_opt *o, int n, int argc, char **argv, const char *cmd,
                       dtnn_model *m, dtnn_optimizer *opt, const dtnn_train_params *tp,
                       int rank, dtnn_train_state *ts, dtnn_error *err)
{
    memset(ts, 0, sizeof *ts);
    const char *exclude[CLI_MAX_VALUES];
    const int n_exclude = cli_strs("init-exclude", argc, argv, 2, exclude);
    if (cli_given(o, n, "init") &&
        dtnn_checkpoint_load_weights(cli_str(o, n, "init"), m, exclude, n_exclude, err))
        return 1;
    if (!cli_given(o, n, "init") && !cli_given(o, n, "resume") &&
        cli_is_onnx(cli_str(o, n, "model")) &&
        dtnn_onnx_load_weights(cli_str(o, n, "model"), m, err))
        return 1;
    if (!cli_given(o, n, "resume"))
        return -1;
    if (dtnn_checkpoint_load(cli_str(o, n, "resume"), m, opt, ts, NULL, err))
        return 1;
    if (ts->global_batch != tp->batch_size || ts->seed != tp->seed) {
        fprintf(stderr, "dtnn %s: the checkpoint was trained with --batch-size %lld --seed "
                "%llu; resume with the same values\n", cmd, (long long)ts->global_batch,
                (unsigned long long)ts->seed);
        return 2;
    }
    if (rank == 0)
        printf("resuming from %s at epoch %lld, step %lld\n", cli_str(o, n, "resume"),
               (long long)ts->epoch + 1, (long long)ts->step);
    return -1;
}

/* Rank 0's start-up lines: model, data, settings, device, the ranks, the buckets (auto's
 * choice and its reason, or NULL for a size given) and what --freeze froze. */
static void print_start(const cli_opt *o, int n, const cli_data *cd, const dtnn_model *m,
                        const dtnn_train_params *tp, dtnn_opt_kind kind, int threads,
                        dtnn_comm *comm, const char *bucket_reason, const dtnn_build_params *bp)
{
    char gemm[128];
    const int ranks = dtnn_comm_size(comm);
    printf("dtnn: training %s on %s (%lld train / %lld test samples of %dx%dx%d, %d "
           "classes), %zu parameters, batch %d, %s lr %g, device %s, %d thread%s, gemm %s, %s "
           "kernels\n",
           cli_str(o, n, "model"), cd->name, (long long)cd->shape.n, (long long)cd->test_n,
           cd->shape.c, cd->shape.h, cd->shape.w, cd->shape.classes, dtnn_model_param_count(m),
           tp->batch_size, dtnn_opt_name(kind), tp->sched.base_lr, dtnn_model_device(m),
           threads, threads == 1 ? "" : "s", dtnn_cpu_gemm_name(gemm, sizeof gemm),
           dtnn_cpu_kernels_name());
    if (bp->precision == DTNN_PRECISION_BF16 && !strncmp(dtnn_model_device(m), "cpu", 3))
        printf("dtnn: bf16 on the CPU: %s\n", dtnn_cpu_bf16_products());
    /* The launcher and the hosts: in a batch job's log, what ran where. */
    const char *launcher = dtnn_comm_launcher(comm);
    if (ranks > 1)
        printf("dtnn: data parallel on %d MPI ranks (%d node%s: %s, %s%s%s), %d samples per "
               "rank per step, all-reduce %s, gradients as %s\n", ranks,
               dtnn_comm_node_count(comm), dtnn_comm_node_count(comm) == 1 ? "" : "s",
               dtnn_comm_hosts(comm), dtnn_comm_name(comm), launcher[0] ? ", started by " : "",
               launcher, tp->batch_size / ranks, cli_str(o, n, "allreduce"),
               cli_str(o, n, "comm-dtype"));
    if (ranks > 1 && bucket_reason)
        printf("dtnn: buckets: %s\n", bucket_reason);
    else if (ranks > 1 && tp->allreduce != DTNN_ALLREDUCE_BLOCKING)
        printf("dtnn: buckets: %g MiB (--bucket-mb)\n", tp->bucket_mb);
    if (bp->n_freeze)
        printf("dtnn: frozen: %zu of %zu parameters (%zu train), batch norms of frozen layers "
               "in %s mode\n", dtnn_model_param_count(m) - dtnn_model_trainable_count(m),
               dtnn_model_param_count(m), dtnn_model_trainable_count(m),
               bp->freeze_bn ? "eval" : "training");
    fflush(stdout);
}

/* Training, then the test set. Returns 0, or an exit code (1: the error is in err). */
static int train_and_test(const cli_opt *o, int n, const char *cmd, cli_data *cd,
                          dtnn_model *m, dtnn_optimizer *opt, dtnn_comm *comm,
                          const dtnn_train_params *tp, dtnn_train_state *ts, int max_batch,
                          dtnn_error *err)
{
    const int rank = dtnn_comm_rank(comm), ranks = dtnn_comm_size(comm);
    progress_state ps;
    progress_init(&ps, stdout, cli_flag(o, n, "quiet"));
    /* Open MPI gives its ranks a pseudo-terminal for stdout whether or not mpirun's own output
     * is one, so a redrawn bar would fill a redirected log with escape codes: plain lines. */
    if (ranks > 1)
        ps.tty = 0;
    catch_stop_signals();
    dtnn_status st = cd->train ? dtnn_train_loader(m, opt, cd->train, cd->test, comm, tp, ts,
                                                   rank == 0 ? progress_update : NULL, &ps, err)
                               : dtnn_train(m, opt, &cd->d, comm, tp, ts,
                                            rank == 0 ? progress_update : NULL, &ps, err);
    if (st) {
        if (err->code != DTNN_ERR_INTERRUPTED)
            return 1;
        /* Every rank stopped after the same step: no abort, exit as the signal asks. */
        if (rank == 0)
            fprintf(stderr, "dtnn %s: %s\n", cmd, err->message);
        /* A rank stopped because another one was signalled exits as if it had been. */
        return 128 + (stop_signal ? (int)stop_signal : SIGTERM);
    }
    if (cd->test_n > 0) {
        dtnn_metrics tm;
        if (cd->test ? dtnn_evaluate_loader(m, cd->test, max_batch, &tp->loss, comm, &tm, err)
                     : dtnn_evaluate(m, &cd->d.test, max_batch, &tp->loss, comm, &tm, err))
            return 1;
        if (rank == 0)
            printf("test accuracy: %.2f%% (top-5 %.2f%%, loss %.4f) on %lld samples\n",
                   100.0 * (double)tm.top1 / (double)tm.count,
                   100.0 * (double)tm.top5 / (double)tm.count, tm.loss_sum / (double)tm.count,
                   (long long)tm.count);
    }
    if (tp->save_path)
        printf("saved %s\n", tp->save_path);
    return 0;
}

/* The files train reads and writes, distinct ones where they must be (-1: they are; else the
 * exit code, the message printed). --resume and --save are one file by design (a run
 * continues its own checkpoint). */
static int train_check_paths(const cli_opt *o, int n, const char *cmd)
{
    const cli_path files[] = {
        {"--model", cli_str(o, n, "model"), 0}, {"--init", cli_str(o, n, "init"), 0},
        {"--save", cli_str(o, n, "save"), 1},   {"--log", cli_str(o, n, "log"), 1},
        {"--trace", cli_str(o, n, "trace"), 1},
    };
    const cli_path resumed[] = {
        {"--resume", cli_str(o, n, "resume"), 0}, {"--model", cli_str(o, n, "model"), 0},
        {"--log", cli_str(o, n, "log"), 1}, {"--trace", cli_str(o, n, "trace"), 1},
    };
    int early = cli_distinct_paths(cmd, files, N_OPTS(files));
    return early >= 0 ? early : cli_distinct_paths(cmd, resumed, N_OPTS(resumed));
}

/* The model built for micro-batches of bp->max_batch (the options' freezing and weight checks
 * applied) and its optimizer: -1, or the exit code (1: err says why). */
static int train_build(const cli_opt *o, int n, int argc, char **argv, const char *cmd,
                       dtnn_build_params *bp, const dtnn_opt_params *op, dtnn_model *m,
                       dtnn_optimizer **opt, dtnn_error *err)
{
    bp->optimizer_slots = dtnn_opt_state_slots(op);
    bp->allow_nonfinite_weights = cli_flag(o, n, "allow-nonfinite-weights");
    const char *freeze[CLI_MAX_VALUES];
    bp->n_freeze = cli_strs("freeze", argc, argv, 2, freeze);
    bp->freeze = freeze;    /* the model keeps its own copies */
    bp->freeze_bn = cli_flag(o, n, "freeze-bn");
    if (bp->freeze_bn && !bp->n_freeze)
        return cli_usage_error(cmd, "%s", "--freeze-bn needs --freeze PATTERN");
    const int failed = dtnn_model_build(m, bp, err) || !(*opt = dtnn_optimizer_create(m, op, err));
    bp->freeze = NULL;
    return failed ? 1 : -1;
}

/* --bucket-mb auto is chosen here rather than inside training so that the start-up line can
 * say what and why (*reason, or NULL for a size given); the trainer then gets the size (the
 * same on every rank: rank 0's). The trace notes the size and the choice. */
static dtnn_status train_buckets(dtnn_comm *comm, dtnn_model *m, dtnn_train_params *tp,
                                 dtnn_bucket_auto_info *bucket, const char **reason,
                                 dtnn_error *err)
{
    *reason = NULL;
    if (dtnn_comm_size(comm) <= 1)
        return DTNN_OK;
    if (tp->bucket_mb > 0) {
        dtnn_trace_note(tp->trace, "bucket_mb", "%g", tp->bucket_mb);
        return DTNN_OK;
    }
    if (dtnn_bucket_auto(comm, m, tp->allreduce, tp->comm_dtype, bucket, err))
        return err->code;
    tp->bucket_mb = bucket->bucket_mb;
    *reason = bucket->reason;
    dtnn_trace_note(tp->trace, "bucket_mb", "%g", bucket->bucket_mb);
    dtnn_trace_note(tp->trace, "bucket_choice", "%s", bucket->reason);
    return DTNN_OK;
}

/* The exit code for rc (1: err's code). One rank's failure ends them all, with its message
 * and its exit code, instead of a hang; the launcher exits with that code, which is what
 * dtnn launch classifies. */
static int train_exit(const char *cmd, dtnn_comm *comm, int rc, dtnn_error *err)
{
    if (rc == 1)
        rc = cli_exit_code(err);
    if ((rc == CLI_EXIT_ERROR || rc == CLI_EXIT_COMM) && dtnn_comm_size(comm) > 1) {
        char line[600];
        snprintf(line, sizeof line, "dtnn %s: %s", cmd, err->message);
        dtnn_comm_abort(comm, rc, line);
    }
    if (rc == CLI_EXIT_ERROR || rc == CLI_EXIT_COMM)
        cli_fail(cmd, err);
    return rc;
}

static int cmd_train(int argc, char **argv, dtnn_comm *comm)
{
    cli_opt *o = train_opts;
    const int n = N_OPTS(train_opts);
    const char *cmd = "train";
    int early = cli_start(cmd, "Trains a model; prints one line per epoch and the test accuracy.",
                          o, n, argc, argv);
    if (early >= 0)
        return early;
    dtnn_error err = {0};
    dtnn_opt_params op;
    dtnn_opt_kind kind;
    dtnn_train_params tp;
    dtnn_build_params bp;
    if ((early = train_check_paths(o, n, cmd)) >= 0)
        return early;
    if ((early = optimizer_options(o, n, cmd, &op, &kind)) >= 0 ||
        (early = run_options(o, n, cmd, &tp)) >= 0 || (early = build_options(o, n, cmd, &bp)) >= 0)
        return early;
    const int rank = dtnn_comm_rank(comm), ranks = dtnn_comm_size(comm);
    if (tp.batch_size % (ranks * tp.accumulate)) {
        fprintf(stderr, "dtnn %s: --batch-size %d does not divide by %d ranks x --accumulate "
                "%d\n", cmd, tp.batch_size, ranks, tp.accumulate);
        return 2;
    }
    if (rank != 0) {
        tp.log_path = NULL;
        tp.save_path = NULL;
    }
    cli_data_opts dopts;
    int threads = cli_threads(cmd, o, n, comm), device_rc = 0;
    const char *device = threads > 0 ? cli_device(cmd, o, n, &device_rc) : NULL;
    dtnn_precision precision = DTNN_PRECISION_FP32;
    if (!cli_all_ok(comm, device && !cli_precision(cmd, o, n, &precision) &&
                              !cli_data_options(cmd, o, n, 1, &dopts)))
        return device_rc ? device_rc : 2;
    dtnn_comm_set_stall_timeout(comm, cli_float(o, n, "stall-timeout"));
    dopts.lp.seed = tp.seed;
    dopts.lp.shuffle = tp.shuffle;
    cli_data cd;
    memset(&cd, 0, sizeof cd);
    dtnn_data_params dp;
    dtnn_model *m = NULL;
    dtnn_optimizer *opt = NULL;
    int rc = 1;
    const int micro = tp.batch_size / ranks / tp.accumulate;
    if (data_params(o, n, &dp, 1, &err) ||
        cli_data_open(&cd, &dopts, &dp, NULL, tp.batch_size, micro * ranks, rank, ranks, &err))
        goto out;
    m = make_model(cli_str(o, n, "model"), &cd.shape, (int)cli_int(o, n, "classes"), &err);
    if (!m)
        goto out;
    bp.max_batch = micro;
    bp.seed = tp.seed;
    bp.threads = threads;
    bp.device = device;
    bp.precision = precision;
    if ((early = train_build(o, n, argc, argv, cmd, &bp, &op, m, &opt, &err)) >= 0) {
        rc = early;
        goto out;
    }
    dtnn_train_state ts;
    if ((early = start_state(o, n, argc, argv, cmd, m, opt, &tp, rank, &ts, &err)) >= 0) {
        rc = early;
        goto out;
    }
    if ((rc = cli_trace_start(cmd, cli_str(o, n, "trace"), comm, &tp.trace, &err)) >= 0)
        goto out;
    rc = 1;
    dtnn_bucket_auto_info bucket = {0};
    const char *bucket_reason;
    if (train_buckets(comm, m, &tp, &bucket, &bucket_reason, &err))
        goto out;
    if (rank == 0)
        print_start(o, n, &cd, m, &tp, kind, threads, comm, bucket_reason, &bp);
    rc = train_and_test(o, n, cmd, &cd, m, opt, comm, &tp, &ts, bp.max_batch, &err);
    rc = cli_trace_finish(cmd, cli_str(o, n, "trace"), comm, tp.trace, rc, &err);
out:
    rc = train_exit(cmd, comm, rc, &err);
    cli_data_report_skipped(&cd, cmd, rank, ranks);
    if (rc == 0)
        cli_data_report_reads(&cd, cmd, rank, ranks);
    dtnn_trace_free(tp.trace);
    dtnn_optimizer_free(opt);
    dtnn_model_free(m);
    cli_data_close(&cd);
    return rc;
}

/* ---- eval ------------------------------------------------------------------------------ */

static cli_opt eval_opts[] = {
    {"model", OPT_STRING, NULL, "zoo model name, model file or .onnx file", 1, NULL, 0},
    {"load", OPT_STRING, NULL, "checkpoint with the weights (required but for an .onnx "
     "--model: its own weights)", 0, NULL, 0},
    {"ema", OPT_FLAG, NULL, "the weights' average a run with --ema saved, not its trained "
     "weights", 0, NULL, 0},
    DATA_OPTIONS,
    {"split", OPT_STRING, "test", "test | train", 0, NULL, 0},
    {"batch-size", OPT_INT, "256", "evaluation batch size", 0, NULL, 0},
    {"loss", OPT_STRING, "cross-entropy", "cross-entropy | bce | mse", 0, NULL, 0},
    {"classes", OPT_INT, "0", "output classes of a zoo model (0: the dataset's)", 0, NULL, 0},
    {"threads", OPT_INT, "0", "kernel threads (0: the cores given to this process)", 0, NULL, 0},
    CLI_DEVICE_OPTION,
    CLI_PRECISION_OPTION,
    {"allow-nonfinite-weights", OPT_FLAG, NULL, "load weights that hold NaN or Inf (forensics "
     "on a diverged run; refused otherwise)", 0, NULL, 0},
    {"help", OPT_FLAG, NULL, "show this help", 0, NULL, 0},
};

static int cmd_eval(int argc, char **argv)
{
    cli_opt *o = eval_opts;
    const int n = N_OPTS(eval_opts);
    const char *cmd = "eval";
    int early = cli_start(cmd, "Evaluates a checkpoint: prints loss, top-1 and top-5 accuracy.",
                          o, n, argc, argv);
    if (early >= 0 || (early = cli_need_load(o, n, cmd)) >= 0)
        return early;
    const char *split_name = cli_str(o, n, "split");
    if (strcmp(split_name, "test") && strcmp(split_name, "train"))
        return cli_usage_error(cmd, "--split must be test or train, not '%s'", split_name);
    int batch = (int)cli_int(o, n, "batch-size");
    if (batch <= 0 || batch > 1 << 20)
        return cli_usage_error(cmd, "--batch-size must be in [1, 1048576], got %s",
                           cli_str(o, n, "batch-size"));
    dtnn_error err = {0};
    dtnn_loss_params lp;
    dtnn_loss_params_default(&lp);
    if (dtnn_loss_parse(cli_str(o, n, "loss"), &lp.kind, &err))
        return fprintf(stderr, "dtnn %s: %s\n", cmd, err.message), 2;
    cli_data_opts dopts;
    int threads = cli_threads(cmd, o, n, NULL), device_rc = 2;
    const char *device = threads > 0 ? cli_device(cmd, o, n, &device_rc) : NULL;
    dtnn_precision precision = DTNN_PRECISION_FP32;
    if (!device || cli_precision(cmd, o, n, &precision) || cli_data_options(cmd, o, n, 0, &dopts))
        return device ? 2 : device_rc;
    cli_data cd;
    memset(&cd, 0, sizeof cd);
    dtnn_data_params dp;
    dtnn_model *m = NULL;
    int rc = 1;
    if (data_params(o, n, &dp, 0, &err) ||
        cli_data_open(&cd, &dopts, &dp, split_name, batch, batch, 0, 1, &err))
        goto out;
    const dtnn_split *s = !strcmp(split_name, "test") ? &cd.d.test : &cd.d.train;
    if (!cd.test && s->n == 0) {
        dtnn_error_set(&err, DTNN_ERR_ARG, "dataset '%s' has no %s split", cd.name, split_name);
        goto out;
    }
    m = make_model(cli_str(o, n, "model"), &cd.shape, (int)cli_int(o, n, "classes"), &err);
    if (!m)
        goto out;
    dtnn_build_params bp;
    dtnn_build_params_default(&bp);
    bp.max_batch = batch;
    bp.training = 0;
    bp.threads = threads;
    bp.device = device;
    bp.precision = precision;
    bp.allow_nonfinite_weights = cli_flag(o, n, "allow-nonfinite-weights");
    if (dtnn_model_build(m, &bp, &err) || cli_load_weights(o, n, m, NULL, &err))
        goto out;
    dtnn_metrics met;
    if (cd.test ? dtnn_evaluate_loader(m, cd.test, batch, &lp, NULL, &met, &err)
                : dtnn_evaluate(m, s, batch, &lp, NULL, &met, &err))
        goto out;
    printf("%s %s: loss %.4f, accuracy %.2f%%, top-5 %.2f%% on %lld samples\n", cd.name,
           split_name, met.loss_sum / (double)met.count, 100.0 * (double)met.top1 / met.count,
           100.0 * (double)met.top5 / met.count, (long long)met.count);
    rc = 0;
out:
    if (rc == 1)
        cli_fail(cmd, &err);
    cli_data_report_skipped(&cd, cmd, 0, 1);
    dtnn_model_free(m);
    cli_data_close(&cd);
    return rc;
}

static void main_usage(void)
{
    printf("usage: dtnn COMMAND [options]   (dtnn COMMAND --help for its options)\n\n"
           "commands:\n"
           "  train    train a model (zoo name or model file) on a dataset\n"
           "  eval     evaluate a checkpoint on a dataset\n"
           "  predict  run inference on an .npy array\n"
           "  bench    measure training throughput on synthetic data\n"
           "  models   list the model zoo (--layers: the layer types)\n"
           "  info     show a model's layers, shapes, parameters and FLOPs\n"
           "  export   write a model with a checkpoint's weights as an ONNX file\n"
           "  import   convert an ONNX file into a model file and safetensors weights\n"
           "  shard    pack an image folder into WebDataset tar shards (--dataset shards)\n"
           "  devices  list the backends (--device) this build has and whether each runs here\n"
           "  launch   run train under mpirun and restart it from its checkpoint after a lost "
           "host\n");
}

/* Runs a command that may be data parallel: under an MPI launcher it gets the MPI
 * communicator, otherwise a single process. */
static int with_comm(int (*command)(int, char **, dtnn_comm *), int argc, char **argv)
{
    dtnn_error err = {0};
    dtnn_comm *comm = dtnn_comm_create_auto(&argc, &argv, &err);
    if (!comm)
        return cli_fail(argv[1], &err);
    int rc = command(argc, argv, comm);
    dtnn_comm_free(comm);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") ||
        !strcmp(argv[1], "help")) {
        main_usage();
        return argc < 2 ? 2 : 0;
    }
    const char *c = argv[1];
    /* Before any command: a DTNN_CPU the kernels cannot honour is the user's to fix, and an
     * MPI run then stops on every rank alike. */
    dtnn_error err = {0};
    if (dtnn_cpu_kernels_check(&err) != DTNN_OK) {
        fprintf(stderr, "dtnn: %s\n", err.message);
        return 2;
    }
    if (!strcmp(c, "train"))
        return with_comm(cmd_train, argc, argv);
    if (!strcmp(c, "eval"))
        return cmd_eval(argc, argv);
    if (!strcmp(c, "predict"))
        return cmd_predict(argc, argv);
    if (!strcmp(c, "bench"))
        return with_comm(cmd_bench, argc, argv);
    if (!strcmp(c, "models"))
        return cmd_models(argc, argv);
    if (!strcmp(c, "info"))
        return cmd_info(argc, argv);
    if (!strcmp(c, "devices"))
        return cmd_devices(argc, argv);
    if (!strcmp(c, "launch"))
        return cmd_launch(argc, argv);
    if (!strcmp(c, "export"))
        return cmd_export(argc, argv);
    if (!strcmp(c, "import"))
        return cmd_import(argc, argv);
    if (!strcmp(c, "shard"))
        return cmd_shard(argc, argv);
    fprintf(stderr, "dtnn: unknown command '%s' (train, eval, predict, bench, models, info, "
            "export, import, shard, devices, launch)\n", c);
    return 2;
}
