/*
 * shards.c — a sharded dataset's files, index and per-rank orders (shards.h).
 */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/internal.h"
#include "core/rng.h"
#include "data/shards.h"
#include "data/transform.h"
#include "core/json.h"

#define SHARDS_MAX_FILES 1000000
#define SHARDS_MAX_CLASSES (1 << 20)
#define INDEX_MAX_BYTES (64 << 20)
/* Keep the shard order's and the buffer's streams apart from the augmentation's. */
#define SHARD_ORDER_DOMAIN 0x7368617264736f72ull
#define SHARD_BUFFER_DOMAIN 0x7368756666626672ull

static int name_ok(const char *name)
{
    const size_t n = strlen(name);
    return n > 4 && n < 256 && !strchr(name, '/') && name[0] != '.' &&
           !strcmp(name + n - 4, ".tar");
}

static dtnn_status add_file(dtnn_shards *s, const char *dir, const char *name, int64_t n,
                            dtnn_error *err)
{
    if (s->nfiles >= SHARDS_MAX_FILES)
        return dtnn_error_set(err, DTNN_ERR_FORMAT, "%s: more than %d shards", dir,
                              SHARDS_MAX_FILES);
    shard_file *nf = realloc(s->files, sizeof *nf * (size_t)(s->nfiles + 1));
    if (!nf)
        return dtnn_error_set(err, DTNN_ERR_NOMEM, "out of memory for the list of shards");
    s->files = nf;
    const size_t len = strlen(dir) + strlen(name) + 2;
    shard_file *f = &s->files[s->nfiles];
    memset(f, 0, sizeof *f);
    if (!(f->path = malloc(len)))
        return dtnn_error_set(err, DTNN_ERR_NOMEM, "out of memory for the list of shards");
    snprintf(f->path, len, "%s/%s", dir, name);
    f->n = n;
    s->nfiles++;
    return DTNN_OK;
}

/* ---- the index --------------------------------------------------------------------------- */

typedef struct {
    dtnn_shards *s;
    const char *dir, *split;
    int have_format, have_split, classes_set;
    uint64_t classes;
} index_ctx;

static dtnn_status split_member(json_reader *j, char *key, void *p)
{
    index_ctx *c = p;
    uint64_t n;
    dtnn_status st = json_uint(j, &n);
    if (st)
        return st;
    if (!name_ok(key))
        return json_fail(j, "shard name '%s' is not a file name ending in .tar", key);
    if (n == 0 || n > ((uint64_t)1 << 40))
        return json_fail(j, "shard '%s' has %llu samples", key, (unsigned long long)n);
    return add_file(c->s, c->dir, key, (int64_t)n, j->err);
}

static dtnn_status skip_split(json_reader *j, char *key, void *p)
{
    (void)key, (void)p;
    uint64_t n;
    return json_uint(j, &n);
}

static dtnn_status index_member(json_reader *j, char *key, void *p)
{
    index_ctx *c = p;
    if (!strcmp(key, "format")) {
        char *v;
        dtnn_status st = json_string_dup(j, &v);
        if (st)
            return st;
        c->have_format = !strcmp(v, "dtnn-shards-1");
        free(v);
        return c->have_format
                   ? DTNN_OK
                   : json_fail(j, "format is not dtnn-shards-1 (a newer dtnn wrote it?)");
    }
    if (!strcmp(key, "classes")) {
        c->classes_set = 1;
        return json_uint(j, &c->classes);
    }
    if (!strcmp(key, c->split)) {
        if (c->have_split++)
            return json_fail(j, "split '%s' given twice", key);
        return json_members(j, split_member, c);
    }
    if (!strcmp(key, "train") || !strcmp(key, "val"))
        return json_members(j, skip_split, c);
    return json_fail(j, "unknown key '%s'", key);
}

/* 1 with the split's files listed from DIR/index.json, 0 when there is no index. */
static dtnn_status read_index(dtnn_shards *s, const char *dir, const char *split, int *found,
                              dtnn_error *err)
{
    char path[4096];
    *found = 0;
    if (snprintf(path, sizeof path, "%s/index.json", dir) >= (int)sizeof path)
        return dtnn_error_set(err, DTNN_ERR_ARG, "path too long: %s", dir);
    FILE *fp = fopen(path, "rb");
    if (!fp)
        return errno == ENOENT ? DTNN_OK
                               : dtnn_error_set(err, DTNN_ERR_IO, "cannot read %s: %s", path,
                                                strerror(errno));
    struct stat sb;
    const long size = fstat(fileno(fp), &sb) == 0 && S_ISREG(sb.st_mode) &&
                              sb.st_size < INDEX_MAX_BYTES
                          ? (long)sb.st_size
                          : -1;
    char *text = size >= 0 ? malloc((size_t)size + 1) : NULL;
    size_t n = text ? fread(text, 1, (size_t)size + 1, fp) : 0;
    const int io_error = ferror(fp);
    fclose(fp);
    dtnn_status st = DTNN_OK;
    if (size < 0 || io_error || n != (size_t)size)
        st = dtnn_error_set(err, DTNN_ERR_FORMAT, "%s: unreadable, changing, or over %d MiB",
                            path, INDEX_MAX_BYTES >> 20);
    else if (!text)
        st = dtnn_error_set(err, DTNN_ERR_NOMEM, "out of memory for %s", path);
    else if (!json_utf8_valid((const unsigned char *)text, n))
        st = dtnn_error_set(err, DTNN_ERR_FORMAT, "%s: not UTF-8 text", path);
    index_ctx c = {s, dir, split, 0, 0, 0, 0};
    if (!st) {
        json_reader j = {text, n, 0, path, "shard index", 0, err};
        st = json_members(&j, index_member, &c);
        if (!st && json_peek(&j) != -1)
            st = json_fail(&j, "text after the index");
        if (!st && (!c.have_format || !c.classes_set))
            st = json_fail(&j, "the index needs \"format\" and \"classes\"");
        if (!st && (c.classes < 1 || c.classes > SHARDS_MAX_CLASSES))
            st = json_fail(&j, "%llu classes", (unsigned long long)c.classes);
    }
    free(text);
    if (!st && !c.have_split)
        st = dtnn_error_set(err, DTNN_ERR_ARG, "%s lists no '%s' split", path, split);
    if (!st) {
        s->classes = (int)c.classes;
        *found = 1;
    }
    return st;
}

/* ---- files found by name ----------------------------------------------------------------- */

static int by_path(const void *a, const void *b)
{
    return strcmp(((const shard_file *)a)->path, ((const shard_file *)b)->path);
}

static int matches(const char *name, const char *split, int any)
{
    if (!name_ok(name))
        return 0;
    const size_t n = strlen(split);
    if (!strncmp(name, split, n))
        return 1;
    return any && strncmp(name, "val", 3) && strncmp(name, "test", 4);
}

static dtnn_status list_files(dtnn_shards *s, const char *dir, const char *split,
                              dtnn_error *err)
{
    for (int pass = 0; pass < 2 && s->nfiles == 0; pass++) {
        /* pass 0: <split>*.tar; pass 1 (train only): every .tar that is not val or test */
        if (pass == 1 && strcmp(split, "train"))
            break;
        DIR *d = opendir(dir);
        if (!d)
            return dtnn_error_set(err, DTNN_ERR_IO, "cannot open the shard folder %s: %s", dir,
                                  strerror(errno));
        dtnn_status st = DTNN_OK;
        for (struct dirent *e; !st && (e = readdir(d));)
            if (matches(e->d_name, split, pass))
                st = add_file(s, dir, e->d_name, 0, err);
        closedir(d);
        if (st)
            return st;
    }
    if (s->nfiles == 0)
        return dtnn_error_set(err, DTNN_ERR_ARG, "%s: no %s shards (%s-*.tar; or an index.json "
                              "as `dtnn shard` writes)", dir, split, split);
    qsort(s->files, (size_t)s->nfiles, sizeof *s->files, by_path);
    return DTNN_OK;
}

int dtnn_shards_has_split(const char *dir, const char *split)
{
    dtnn_error err;
    dtnn_shards s;
    memset(&s, 0, sizeof s);
    int indexed = 0;
    const int has = !read_index(&s, dir, split, &indexed, &err) &&
                    (indexed || !list_files(&s, dir, split, &err));
    dtnn__shards_free(&s);
    return has;
}

/* ---- tables ------------------------------------------------------------------------------ */

static dtnn_status load_table(dtnn_shards *s, int f, dtnn_error *err)
{
    shard_file *sf = &s->files[f];
    if (sf->table)
        return DTNN_OK;
    int64_t n, bytes = 0;
    dtnn_status st = dtnn__tar_scan(sf->path, &sf->table, &n, &bytes, err);
    atomic_fetch_add(&s->bytes_read, bytes);
    if (st)
        return st;
    if (n == 0 || (sf->n && n != sf->n)) {
        free(sf->table);
        sf->table = NULL;
        return dtnn_error_set(err, DTNN_ERR_FORMAT, "shard %s holds %lld samples, but %s",
                              sf->path, (long long)n, n ? "the index says otherwise" : "needs one");
    }
    for (int64_t i = 0; s->classes && i < n; i++)
        if (sf->table[i].label >= s->classes) {
            const int32_t label = sf->table[i].label;
            free(sf->table);
            sf->table = NULL;
            return dtnn_error_set(err, DTNN_ERR_FORMAT, "shard %s: class %d of sample %lld is "
                                  "not below the index's %d classes", sf->path, label,
                                  (long long)i, s->classes);
        }
    sf->n = n;
    return DTNN_OK;
}

dtnn_status dtnn__shards_scan_all(dtnn_shards *s, dtnn_error *err)
{
    for (int f = 0; f < s->nfiles; f++) {
        dtnn_status st = load_table(s, f, err);
        if (st)
            return st;
    }
    return DTNN_OK;
}

dtnn_status dtnn__shards_open(dtnn_shards *s, const char *dir, const char *split,
                              dtnn_error *err)
{
    memset(s, 0, sizeof *s);
    atomic_init(&s->bytes_read, 0);
    int indexed;
    dtnn_status st = read_index(s, dir, split, &indexed, err);
    if (!st && !indexed)
        st = list_files(s, dir, split, err);
    /* Without an index, the counts and the classes come from reading every header. */
    if (!st && !indexed && !(st = dtnn__shards_scan_all(s, err))) {
        int32_t top = -1;
        for (int f = 0; f < s->nfiles; f++)
            for (int64_t i = 0; i < s->files[f].n; i++)
                top = DTNN_MAX(top, s->files[f].table[i].label);
        s->classes = top + 1;
    }
    if (!st && !(s->first = malloc(sizeof(int64_t) * (size_t)(s->nfiles + 1))))
        st = dtnn_error_set(err, DTNN_ERR_NOMEM, "out of memory for the list of shards");
    if (!st) {
        s->first[0] = 0;
        for (int f = 0; f < s->nfiles; f++)
            s->first[f + 1] = s->first[f] + s->files[f].n;
        s->n = s->first[s->nfiles];
    }
    if (st)
        dtnn__shards_free(s);
    return st;
}

void dtnn__shards_free(dtnn_shards *s)
{
    for (int f = 0; s->files && f < s->nfiles; f++) {
        free(s->files[f].path);
        free(s->files[f].table);
    }
    free(s->files);
    free(s->first);
    s->files = NULL;
    s->first = NULL;
    s->nfiles = 0;
}

/* ---- orders -------------------------------------------------------------------------------- */

void dtnn__shards_ref(const dtnn_shards *s, int64_t k, shard_ref *ref)
{
    int lo = 0, hi = s->nfiles - 1;
    while (lo < hi) {
        const int mid = (lo + hi + 1) / 2;
        if (s->first[mid] <= k)
            lo = mid;
        else
            hi = mid - 1;
    }
    ref->file = lo;
    ref->index = (int32_t)(k - s->first[lo]);
}

dtnn_status dtnn__shards_order(dtnn_shards *s, uint64_t seed, int64_t epoch, int rank,
                               int ranks, int64_t quota, int buffer, int64_t *order,
                               dtnn_error *err)
{
    int64_t *perm = malloc(sizeof(int64_t) * (size_t)s->nfiles);
    int64_t *window = buffer > 1 ? malloc(sizeof *window * (size_t)buffer) : NULL;
    if (!perm || (buffer > 1 && !window)) {
        free(perm);
        return dtnn_error_set(err, DTNN_ERR_NOMEM, "out of memory for the shard order");
    }
    dtnn_epoch_permutation(perm, s->nfiles, seed ^ SHARD_ORDER_DOMAIN, epoch, 1);
    dtnn_rng resample, pick;
    dtnn__augment_rng(&resample, seed ^ SHARD_ORDER_DOMAIN, epoch, rank);
    dtnn__augment_rng(&pick, seed ^ SHARD_BUFFER_DOMAIN, epoch, rank);
    /* The stream: this rank's shards, then resampled ones, sample by sample, quota of them,
     * through the window: once it is full, each output is a random one of the window's,
     * replaced by the stream's next; at the stream's end the window drains in random order. */
    int64_t out = 0, held = 0, pulled = 0, next_own = rank;
    int file = -1;
    int64_t at = 0;
    dtnn_status st = DTNN_OK;
    while (pulled < quota && !st) {
        if (file < 0 || at == s->files[file].n) {
            if (next_own < s->nfiles) {
                file = (int)perm[next_own];
                next_own += ranks;
            } else {
                file = (int)dtnn__rng_below(&resample, (uint64_t)s->nfiles);
            }
            at = 0;
            if ((st = load_table(s, file, err)))
                break;
        }
        const int64_t r = s->first[file] + at++;
        pulled++;
        if (!window) {
            order[out++] = r;
        } else if (held < buffer) {
            window[held++] = r;
        } else {
            const int64_t j = (int64_t)dtnn__rng_below(&pick, (uint64_t)held);
            order[out++] = window[j];
            window[j] = r;
        }
    }
    while (window && held > 0 && !st) {
        const int64_t j = (int64_t)dtnn__rng_below(&pick, (uint64_t)held);
        order[out++] = window[j];
        window[j] = window[--held];
    }
    free(perm);
    free(window);
    return st;
}

void dtnn__shards_close(shard_handle *h)
{
    if (h->fd >= 0)
        close(h->fd);
    h->fd = h->file = -1;
}

dtnn_status dtnn__shards_read(dtnn_shards *s, shard_handle *h, int64_t k, unsigned char **buf,
                              size_t *cap, size_t *len, int32_t *label, dtnn_error *err)
{
    shard_ref r;
    dtnn__shards_ref(s, k, &r);
    const shard_file *f = &s->files[r.file];
    const tar_sample *t = &f->table[r.index];
    if (t->size > *cap) {
        unsigned char *nb = realloc(*buf, t->size);
        if (!nb)
            return dtnn_error_set(err, DTNN_ERR_NOMEM, "out of memory for an image of %u bytes",
                                  t->size);
        *buf = nb;
        *cap = t->size;
    }
    if (h->file != r.file) {
        dtnn__shards_close(h);
        if ((h->fd = open(f->path, O_RDONLY | O_CLOEXEC)) < 0)
            return dtnn_error_set(err, DTNN_ERR_IO, "cannot open shard %s: %s", f->path,
                                  strerror(errno));
        h->file = r.file;
    }
    size_t done = 0;
    while (done < t->size) {
        ssize_t got = pread(h->fd, *buf + done, t->size - done, (off_t)(t->offset + done));
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            break;
        done += (size_t)got;
    }
    atomic_fetch_add(&s->bytes_read, (int64_t)done);
    if (done < t->size)
        return dtnn_error_set(err, DTNN_ERR_IO, "shard %s: cannot read the image of sample %d "
                              "(%u bytes at %llu): the file changed or failed", f->path, r.index,
                              t->size, (unsigned long long)t->offset);
    *len = t->size;
    *label = t->label;
    return DTNN_OK;
}
