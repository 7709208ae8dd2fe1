/*
 * cli_data.c — what `dtnn train`, `eval` and `bench --loader` read: a dataset loaded into
 * memory (the IDX, CIFAR, npy and synthetic ones), or an image folder streamed by loaders, and
 * the options that choose augmentation and background decoding. A dataset in memory without
 * augmentation or loader threads goes straight to dtnn_train / dtnn_evaluate, as it always
 * did; everything else runs through dtnn_loader.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli_data.h"

/* randaugment[:N[:M]] into RandAugment's operations and magnitude bin; -1 when malformed. */
static int parse_randaugment(const char *t, dtnn_loader_params *lp)
{
    int n = 2, m = 9, used = 0;
    if (!strcmp(t, "randaugment"))
        ;
    else if (!(sscanf(t, "randaugment:%d%n", &n, &used) == 1 && !t[used]) &&
             !(sscanf(t, "randaugment:%d:%d%n", &n, &m, &used) == 2 && !t[used]))
        return -1;
    if (n < 1 || n > 16 || m < 0 || m > 30)
        return -1;
    lp->randaugment_ops = n;
    lp->randaugment_magnitude = m;
    return 0;
}

static int parse_augment(const char *s, dtnn_loader_params *lp)
{
    unsigned *out = &lp->augment;
    *out = 0;
    if (!strcmp(s, "none"))
        return 0;
    char buf[64];
    if (strlen(s) >= sizeof buf)
        return -1;
    memcpy(buf, s, strlen(s) + 1);
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (!strcmp(t, "crop"))
            *out |= DTNN_AUG_CROP;
        else if (!strcmp(t, "flip"))
            *out |= DTNN_AUG_FLIP;
        else if (!strcmp(t, "trivialaugment") && !(*out & DTNN_AUG_RANDAUG))
            *out |= DTNN_AUG_TRIVIAL;
        else if (!strncmp(t, "randaugment", 11) && !(*out & DTNN_AUG_TRIVIAL) &&
                 !parse_randaugment(t, lp))
            *out |= DTNN_AUG_RANDAUG;
        else
            return -1;
    }
    return *out ? 0 : -1;
}

int cli_data_options(const char *cmd, const cli_opt *o, int n, int train, cli_data_opts *out)
{
    memset(out, 0, sizeof *out);
    out->shards = !strcmp(cli_str(o, n, "dataset"), "shards");
    out->folder = out->shards || !strcmp(cli_str(o, n, "dataset"), "imagefolder");
    dtnn_loader_params_default(&out->lp);
    int64_t size = cli_int(o, n, "image-size"), threads = cli_int(o, n, "loader-threads");
    if (size < 8 || size > 4096)
        return cli_usage_error(cmd, "--image-size must be in [8, 4096], not %s",
                               cli_str(o, n, "image-size"));
    if (threads < -1 || threads > 64)
        return cli_usage_error(cmd, "--loader-threads must be -1 (auto), 0 (decode in the "
                               "training thread) or up to 64, not %s",
                               cli_str(o, n, "loader-threads"));
    if (out->shards && !cli_str(o, n, "data-dir"))
        return cli_usage_error(cmd, "%s", "--dataset shards needs --data-dir DIR, the folder of "
                               "the .tar shards (`dtnn shard` writes one)");
    if (out->folder && !cli_str(o, n, "data-dir"))
        return cli_usage_error(cmd, "%s", "--dataset imagefolder needs --data-dir DIR, with "
                               "DIR/train/<class>/<image> and DIR/val/<class>/<image>");
    out->lp.image_size = (int)size;
    out->lp.threads = threads == -1 ? (out->folder ? 2 : 0) : (int)threads;
    out->lp.strict = cli_flag(o, n, "strict");
    if (!train)
        return 0;
    const char *aug = cli_str(o, n, "augment");
    if (!strcmp(aug, "auto"))
        out->lp.augment = out->folder ? DTNN_AUG_CROP | DTNN_AUG_FLIP : 0;
    else if (parse_augment(aug, &out->lp))
        return cli_usage_error(cmd, "--augment must be auto, none, or a comma-separated list of "
                               "crop, flip and one of trivialaugment and randaugment[:N[:M]] "
                               "(N in [1, 16] operations, M in [0, 30] the magnitude bin), not "
                               "'%s'", aug);
    int64_t pad = cli_int(o, n, "crop-padding"), prefetch = cli_int(o, n, "prefetch");
    if (pad < 0 || pad > 64 || prefetch < 0 || prefetch > 64)
        return cli_usage_error(cmd, "%s", "--crop-padding and --prefetch must be in [0, 64]");
    out->lp.crop_padding = (int)pad;
    out->lp.prefetch = (int)prefetch;
    const double erase = cli_float(o, n, "random-erase");
    if (!(erase >= 0.0 && erase <= 1.0))
        return cli_usage_error(cmd, "--random-erase must be a probability in [0, 1], not %s",
                               cli_str(o, n, "random-erase"));
    out->lp.random_erase = (float)erase;
    const double mixup = cli_float(o, n, "mixup"), cutmix = cli_float(o, n, "cutmix");
    if (!(mixup >= 0.0 && mixup <= 100.0))
        return cli_usage_error(cmd, "--mixup takes a Beta alpha in [0, 100] (0: off), not %s",
                               cli_str(o, n, "mixup"));
    if (!(cutmix >= 0.0 && cutmix <= 100.0))
        return cli_usage_error(cmd, "--cutmix takes a Beta alpha in [0, 100] (0: off), not %s",
                               cli_str(o, n, "cutmix"));
    out->lp.mixup_alpha = (float)mixup;
    out->lp.cutmix_alpha = (float)cutmix;
    const int64_t repeats = cli_int(o, n, "repeated-augment");
    if (repeats < 0 || repeats > 64)
        return cli_usage_error(cmd, "--repeated-augment must be in [0, 64] (0 or 1: off), not %s",
                               cli_str(o, n, "repeated-augment"));
    out->lp.repeated_augment = (int)repeats;
    const int64_t buffer = cli_int(o, n, "shuffle-buffer");
    if (buffer < 0 || buffer > 10000000)
        return cli_usage_error(cmd, "--shuffle-buffer must be in [0, 10000000], not %s",
                               cli_str(o, n, "shuffle-buffer"));
    out->lp.shuffle_buffer = (int)buffer;
    return 0;
}

static void shape_from(cli_data *cd, const dtnn_loader *l)
{
    dtnn_loader_info info;
    dtnn_loader_get_info(l, &info);
    cd->shape.n = info.n;
    cd->shape.c = info.c;
    cd->shape.h = info.h;
    cd->shape.w = info.w;
    cd->shape.classes = info.classes;
    snprintf(cd->name, sizeof cd->name, "%s", info.name);
}

static int is_dir(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
}

dtnn_status cli_data_open(cli_data *cd, const cli_data_opts *opts, const dtnn_data_params *dp,
                          const char *split, int batch, int eval_batch, int rank, int ranks,
                          dtnn_error *err)
{
    memset(cd, 0, sizeof *cd);
    dtnn_loader_params lp = opts->lp, tp = opts->lp;
    lp.batch_size = batch;
    lp.rank = tp.rank = rank;
    lp.ranks = tp.ranks = ranks;
    /* Evaluation: file order, no augmentation. */
    tp.batch_size = eval_batch;
    tp.shuffle = 0;
    tp.augment = 0;
    tp.random_erase = 0.0f;
    tp.mixup_alpha = tp.cutmix_alpha = 0.0f;
    tp.repeated_augment = 0;
    tp.prefetch = 0;
    if (opts->folder) {
        dtnn_loader *(*create)(const char *, const char *, const dtnn_loader_params *,
                               dtnn_error *) =
            opts->shards ? dtnn_loader_create_shards : dtnn_loader_create_folder;
        if (split) {
            /* eval: "test" is the folder's val split. */
            const char *s = !strcmp(split, "train") ? "train" : "val";
            cd->test = create(dp->dir, s, &tp, err);
            if (!cd->test)
                return err->code;
            shape_from(cd, cd->test);
            return DTNN_OK;
        }
        cd->train = create(dp->dir, "train", &lp, err);
        if (!cd->train)
            return err->code;
        shape_from(cd, cd->train);
        char val[4096];
        snprintf(val, sizeof val, "%s/val", dp->dir);
        if (opts->shards ? dtnn_shards_has_split(dp->dir, "val") : is_dir(val)) {
            cd->test = create(dp->dir, "val", &tp, err);
            if (!cd->test)
                return err->code;
            dtnn_loader_info info;
            dtnn_loader_get_info(cd->test, &info);
            cd->test_n = info.n;
        }
        return DTNN_OK;
    }
    dtnn_status st = dtnn_dataset_load(&cd->d, dp, err);
    if (st)
        return st;
    cd->shape = cd->d.train;
    cd->test_n = cd->d.test.n;
    snprintf(cd->name, sizeof cd->name, "%s", cd->d.name);
    if (split || (!lp.augment && !lp.threads && lp.random_erase == 0.0f && lp.mixup_alpha == 0.0f &&
                  lp.cutmix_alpha == 0.0f && lp.repeated_augment <= 1))
        return DTNN_OK;
    if (!(cd->train = dtnn_loader_create(&cd->d, 0, &lp, err)))
        return err->code;
    if (cd->d.test.n > 0 && !(cd->test = dtnn_loader_create(&cd->d, 1, &tp, err)))
        return err->code;
    return DTNN_OK;
}

/* A field of /proc/self/io in MiB (-1 where there is none). */
static double proc_io_mib(const char *field)
{
    FILE *fp = fopen("/proc/self/io", "r");
    if (!fp)
        return -1.0;
    char line[128];
    double v = -1.0;
    const size_t n = strlen(field);
    while (fgets(line, sizeof line, fp))
        if (!strncmp(line, field, n) && line[n] == ':')
            v = strtod(line + n + 1, NULL) / 1048576.0;
    fclose(fp);
    return v;
}

void cli_data_report_reads(const cli_data *cd, const char *cmd, int rank, int ranks)
{
    const int64_t bytes = (cd->train ? dtnn_loader_bytes_read(cd->train) : 0) +
                          (cd->test ? dtnn_loader_bytes_read(cd->test) : 0);
    if (bytes <= 0)
        return;
    fprintf(stderr, "dtnn %s: rank %d of %d read %.2f MiB of shards (training %.2f); "
            "/proc/self/io: rchar %.2f MiB, read_bytes %.2f MiB\n", cmd, rank, ranks,
            (double)bytes / 1048576.0,
            cd->train ? (double)dtnn_loader_bytes_read(cd->train) / 1048576.0 : 0.0,
            proc_io_mib("rchar"), proc_io_mib("read_bytes"));
}

void cli_data_report_skipped(const cli_data *cd, const char *cmd, int rank, int ranks)
{
    const dtnn_loader *ls[2] = {cd->train, cd->test};
    static const char *const what[2] = {"training", "evaluation"};
    for (int k = 0; k < 2; k++) {
        char paths[1600];
        int64_t count = ls[k] ? dtnn_loader_skipped(ls[k], paths, sizeof paths) : 0;
        if (count <= 0)
            continue;
        char who[32] = "";
        if (ranks > 1)
            snprintf(who, sizeof who, " rank %d", rank);
        fprintf(stderr, "dtnn %s:%s skipped %lld unreadable image%s in %s, each replaced by the "
                "next readable one (--strict makes them errors); the first: %s\n", cmd, who,
                (long long)count, count == 1 ? "" : "s", what[k], paths);
    }
}

void cli_data_close(cli_data *cd)
{
    dtnn_loader_free(cd->train);
    dtnn_loader_free(cd->test);
    dtnn_dataset_free(&cd->d);
    memset(cd, 0, sizeof *cd);
}
