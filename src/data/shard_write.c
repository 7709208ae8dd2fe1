/*
 * shard_write.c — `dtnn shard`: an image folder packed into WebDataset tar shards
 * (dtnn_shards_write, dtnn.h). Each image file goes in as it is (KEY.jpg or KEY.png by its
 * content, KEY.cls its class), the samples of a split in a seeded random order so that a
 * shard holds a mix of classes and a small shuffle buffer suffices, a new shard begun once the
 * current one would pass the size asked for. Every shard and the index are written
 * atomically; an output folder that already holds shards is refused, so nothing is lost or
 * mixed with an older set.
 */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/atomic_file.h"
#include "core/internal.h"
#include "data/data.h"
#include "data/image_folder.h"
#include "data/tar.h"
#include "data/transform.h"

#define SHARD_MAX_IMAGE (256u << 20)

typedef struct {
    const dtnn_shard_params *p;
    atomic_file out;
    int open, index;
    uint64_t bytes;
    int64_t samples;
    FILE *idx;              /* the index's split object, written as shards close */
    int listed;
    unsigned char *buf;
    size_t cap;
    dtnn_shard_report *report;
    dtnn_error *err;
} writer;

static dtnn_status close_shard(writer *w, const char *split)
{
    if (!w->open)
        return DTNN_OK;
    w->open = 0;
    if (dtnn__tar_end(w->out.fp)) {
        atomic_file_abort(&w->out);
        return dtnn_error_set(w->err, DTNN_ERR_IO, "cannot write shard %s", w->out.target);
    }
    dtnn_status st = atomic_file_commit(&w->out, w->err);
    if (st)
        return st;
    fprintf(w->idx, "%s\n    \"%s-%06d.tar\": %lld", w->listed++ ? "," : "", split, w->index,
            (long long)w->samples);
    w->report->shards++;
    w->report->bytes += (int64_t)w->bytes;
    w->index++;
    return DTNN_OK;
}

static dtnn_status open_shard(writer *w, const char *split)
{
    char path[4096];
    if (snprintf(path, sizeof path, "%s/%s-%06d.tar", w->p->output, split, w->index) >=
        (int)sizeof path)
        return dtnn_error_set(w->err, DTNN_ERR_ARG, "path too long: %s", w->p->output);
    dtnn_status st = atomic_file_begin(&w->out, path, "shard", w->err);
    if (st)
        return st;
    w->open = 1;
    w->bytes = 0;
    w->samples = 0;
    return DTNN_OK;
}

/* The image file's bytes into w->buf; its extension by content, NULL when it is neither
 * JPEG nor PNG (skipped and counted). */
static dtnn_status read_file(writer *w, const char *path, size_t *len, const char **ext)
{
    *ext = NULL;
    FILE *fp = fopen(path, "rb");
    if (!fp)
        return dtnn_error_set(w->err, DTNN_ERR_IO, "cannot read %s: %s", path, strerror(errno));
    size_t n = 0;
    for (;;) {
        if (n == w->cap) {
            const size_t cap = w->cap ? w->cap * 2 : 1 << 20;
            unsigned char *nb = cap <= SHARD_MAX_IMAGE ? realloc(w->buf, cap) : NULL;
            if (!nb) {
                fclose(fp);
                return dtnn_error_set(w->err, DTNN_ERR_FORMAT, "%s: over %u MiB, or out of "
                                      "memory", path, SHARD_MAX_IMAGE >> 20);
            }
            w->buf = nb;
            w->cap = cap;
        }
        const size_t got = fread(w->buf + n, 1, w->cap - n, fp);
        n += got;
        if (got == 0)
            break;
    }
    const int failed = ferror(fp);
    fclose(fp);
    if (failed)
        return dtnn_error_set(w->err, DTNN_ERR_IO, "read error in %s", path);
    *len = n;
    if (n >= 3 && w->buf[0] == 0xff && w->buf[1] == 0xd8 && w->buf[2] == 0xff)
        *ext = "jpg";
    else if (n >= 8 && !memcmp(w->buf, "\x89PNG\r\n\x1a\n", 8))
        *ext = "png";
    return DTNN_OK;
}

/* Where a split's samples come from: an image folder's files, or a dataset in memory encoded
 * as PNG. */
typedef struct {
    const dtnn_image_list *list;
    const dtnn_split *split;
    const dtnn_dataset *d;
    unsigned char *u8;
} sample_source;

static int64_t source_n(const sample_source *s)
{
    return s->list ? s->list->n : s->split->n;
}

/* Sample k's encoded bytes (*data, *len), extension (NULL: skip it) and label. */
static dtnn_status source_sample(writer *w, sample_source *src, int64_t k,
                                 const unsigned char **data, size_t *len, const char **ext,
                                 int32_t *label)
{
    if (src->list) {
        *label = src->list->labels[k];
        dtnn_status st = read_file(w, src->list->paths[k], len, ext);
        *data = w->buf;
        return st;
    }
    const dtnn_split *s = src->split;
    const size_t plane = (size_t)s->h * s->w;
    dtnn__denormalize_u8(s->x + (size_t)k * s->c * plane, s->c, plane, src->d->mean,
                         src->d->std, src->u8);
    unsigned char *png;
    dtnn_status st = dtnn__png_encode(src->u8, s->c, s->h, s->w, &png, len, w->err);
    if (st)
        return st;
    free(w->buf);
    w->buf = png;
    w->cap = *len;
    *data = png;
    *ext = "png";
    *label = s->y[k];
    return DTNN_OK;
}

static dtnn_status write_split(writer *w, const char *split, sample_source *src)
{
    const int64_t count = source_n(src);
    int64_t *perm = malloc(sizeof(int64_t) * (size_t)DTNN_MAX(count, 1));
    if (!perm)
        return dtnn_error_set(w->err, DTNN_ERR_NOMEM, "out of memory");
    dtnn_epoch_permutation(perm, count, w->p->seed, 0, 1);
    const uint64_t limit = (uint64_t)(w->p->shard_mb * 1048576.0);
    w->index = 0;
    w->listed = 0;
    fprintf(w->idx, ",\n  \"%s\": {", split);
    dtnn_status st = DTNN_OK;
    for (int64_t i = 0; i < count && !st; i++) {
        size_t len;
        const char *ext;
        const unsigned char *data;
        int32_t label;
        if ((st = source_sample(w, src, perm[i], &data, &len, &ext, &label)))
            break;
        if (!ext) {
            w->report->skipped++;
            continue;
        }
        const uint64_t size = 1536 + (len + 511) / 512 * 512;
        if (w->open && w->bytes + size > limit)
            st = close_shard(w, split);
        if (!st && !w->open)
            st = open_shard(w, split);
        if (st)
            break;
        char name[64], cls[16];
        snprintf(name, sizeof name, "%09lld.%s", (long long)i, ext);
        const int cl = snprintf(cls, sizeof cls, "%d", (int)label);
        if (dtnn__tar_member(w->out.fp, name, data, len)) {
            st = dtnn_error_set(w->err, DTNN_ERR_IO, "cannot write shard %s", w->out.target);
            break;
        }
        snprintf(name, sizeof name, "%09lld.cls", (long long)i);
        if (dtnn__tar_member(w->out.fp, name, cls, (size_t)cl)) {
            st = dtnn_error_set(w->err, DTNN_ERR_IO, "cannot write shard %s", w->out.target);
            break;
        }
        w->bytes += size;
        w->samples++;
        w->report->samples++;
    }
    if (!st)
        st = close_shard(w, split);
    if (st && w->open) {
        atomic_file_abort(&w->out);
        w->open = 0;
    }
    fprintf(w->idx, "\n  }");
    free(perm);
    return st;
}

/* The output folder: created, or empty of shards and index. */
static dtnn_status prepare_output(const char *dir, dtnn_error *err)
{
    if (mkdir(dir, 0777) && errno != EEXIST)
        return dtnn_error_set(err, DTNN_ERR_IO, "cannot create %s: %s", dir, strerror(errno));
    DIR *d = opendir(dir);
    if (!d)
        return dtnn_error_set(err, DTNN_ERR_IO, "cannot open %s: %s", dir, strerror(errno));
    dtnn_status st = DTNN_OK;
    for (struct dirent *e; !st && (e = readdir(d));) {
        const size_t n = strlen(e->d_name);
        if (!strcmp(e->d_name, "index.json") || (n > 4 && !strcmp(e->d_name + n - 4, ".tar")))
            st = dtnn_error_set(err, DTNN_ERR_ARG, "%s already holds shards (%s): give a new or "
                                "empty folder, so that no older shard is taken for this set",
                                dir, e->d_name);
    }
    closedir(d);
    return st;
}

void dtnn_shard_params_default(dtnn_shard_params *p)
{
    memset(p, 0, sizeof *p);
    p->shard_mb = 256.0;
    p->seed = 42;
}

/* The two splits' sources: the folder's train and val (if any), or the dataset's train and
 * test (written as val, if any). */
static dtnn_status open_sources(const dtnn_shard_params *p, dtnn_image_list lists[2],
                                sample_source src[2], int *nsplits, int *classes,
                                dtnn_error *err)
{
    memset(src, 0, 2 * sizeof *src);
    if (p->dataset) {
        const dtnn_dataset *d = p->dataset;
        *nsplits = d->test.n > 0 ? 2 : 1;
        *classes = d->train.classes;
        if (d->train.c != 1 && d->train.c != 3)
            return dtnn_error_set(err, DTNN_ERR_UNSUPPORTED, "%s: images of %d channels cannot "
                                  "be PNG files (1 or 3)", d->name, d->train.c);
        for (int k = 0; k < *nsplits; k++) {
            src[k].split = k ? &d->test : &d->train;
            src[k].d = d;
            if (!(src[k].u8 = malloc((size_t)d->train.c * d->train.h * d->train.w)))
                return dtnn_error_set(err, DTNN_ERR_NOMEM, "out of memory");
        }
        return DTNN_OK;
    }
    char train[4096], val[4096];
    if (snprintf(train, sizeof train, "%s/train", p->data_dir) >= (int)sizeof train ||
        snprintf(val, sizeof val, "%s/val", p->data_dir) >= (int)sizeof val)
        return dtnn_error_set(err, DTNN_ERR_ARG, "path too long: %s", p->data_dir);
    struct stat sb;
    *nsplits = stat(val, &sb) == 0 && S_ISDIR(sb.st_mode) ? 2 : 1;
    dtnn_status st = dtnn__image_list_scan(&lists[0], train, NULL, err);
    if (!st && *nsplits == 2)
        st = dtnn__image_list_scan(&lists[1], val, &lists[0], err);
    src[0].list = &lists[0];
    src[1].list = &lists[1];
    *classes = lists[0].classes;
    return st;
}

dtnn_status dtnn_shards_write(const dtnn_shard_params *p, dtnn_shard_report *report,
                              dtnn_error *err)
{
    memset(report, 0, sizeof *report);
    if ((!p->data_dir && !p->dataset) || !p->output)
        return dtnn_error_set(err, DTNN_ERR_ARG, "shards: give the image folder (or a dataset) "
                              "and the output folder");
    if (!(p->shard_mb >= 0.01 && p->shard_mb <= 65536.0))
        return dtnn_error_set(err, DTNN_ERR_ARG, "shard size %g MiB must be in [0.01, 65536]",
                              p->shard_mb);
    dtnn_image_list lists[2];
    memset(lists, 0, sizeof lists);
    sample_source src[2];
    int nsplits = 0, classes = 0;
    dtnn_status st = open_sources(p, lists, src, &nsplits, &classes, err);
    if (!st)
        st = prepare_output(p->output, err);
    char *text = NULL;
    size_t text_len = 0;
    writer w = {p, {0}, 0, 0, 0, 0, NULL, 0, NULL, 0, report, err};
    if (!st && !(w.idx = open_memstream(&text, &text_len)))
        st = dtnn_error_set(err, DTNN_ERR_NOMEM, "out of memory");
    if (!st)
        fprintf(w.idx, "{\n  \"format\": \"dtnn-shards-1\",\n  \"classes\": %d", classes);
    for (int k = 0; k < nsplits && !st; k++)
        st = write_split(&w, k ? "val" : "train", &src[k]);
    if (w.idx) {
        fprintf(w.idx, "\n}\n");
        fclose(w.idx);
    }
    char index[4096];
    snprintf(index, sizeof index, "%s/index.json", p->output);
    if (!st)
        st = atomic_file_write(index, "shard index", text, text_len, err);
    free(text);
    free(w.buf);
    free(src[0].u8);
    free(src[1].u8);
    dtnn__image_list_free(&lists[0]);
    dtnn__image_list_free(&lists[1]);
    return st;
}
