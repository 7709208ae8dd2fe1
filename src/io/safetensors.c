/*
 * safetensors.c — strict reader and atomic writer of the safetensors format
 * (https://github.com/huggingface/safetensors): an 8-byte little-endian header length N, N bytes
 * of JSON {"name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}, ...,
 * "__metadata__": {"key": "value", ...}}, then the data section, little-endian, offsets relative
 * to its start.
 *
 * The reader treats the file as hostile: it reads the whole file, checks the header length
 * against the file size, parses the header with json.c's strict reader of exactly this subset
 * (valid UTF-8, string escapes, non-negative integers; no floats, nulls or unknown keys), and
 * checks that dtypes are known, byte sizes equal product(shape) x dtype size, names are unique,
 * and that the tensors tile the data section exactly (no overlap, no gap, nothing out of bounds)
 * as the reference implementation demands. Only then is anything returned.
 *
 * The writer puts "__metadata__" first, keeps the tensors in the order given, pads the header
 * with spaces to a multiple of 8 bytes, and writes PATH.tmp.<pid>, fsyncs it and renames it over
 * PATH, so a crash or a failed write never destroys the previous file. Data are converted to
 * little-endian on big-endian hosts (and back when reading).
 *
 * Integrity: the writer adds the metadata entry "crc32c": the CRC-32C of the whole file as
 * written, computed with that entry's 8 hex digits read as "00000000". The reader recomputes it
 * whenever the entry is present and refuses a file that does not match, so any flipped,
 * truncated or edited byte (header or data) is caught; files from other writers (PyTorch's)
 * have no such entry and are read as they are.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../core/atomic_file.h"
#include "../core/file_input.h"
#include "../core/internal.h"
#include "../core/json.h"
#include "safetensors.h"

/* The reference implementation refuses headers above 100 MB. */
#define ST_CRC_FIELD "\"" ST_CRC_KEY "\":\""
#define ST_MAX_HEADER 100000000ull

static const struct {
    const char *name;
    size_t size;
} st_dtypes[] = {
    {"F64", 8}, {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"F8_E4M3", 1}, {"F8_E5M2", 1},
    {"I64", 8}, {"I32", 4}, {"I16", 2}, {"I8", 1},   {"U64", 8},     {"U32", 4},
    {"U16", 2}, {"U8", 1},  {"BOOL", 1},
};

static size_t dtype_size(const char *name)
{
    for (size_t i = 0; i < sizeof st_dtypes / sizeof st_dtypes[0]; i++)
        if (!strcmp(st_dtypes[i].name, name))
            return st_dtypes[i].size;
    return 0;
}

static int host_is_little_endian(void)
{
    const uint16_t one = 1;
    return *(const unsigned char *)&one == 1;
}

static void swap_elements(unsigned char *p, size_t bytes, size_t size)
{
    for (size_t i = 0; i + size <= bytes; i += size)
        for (size_t a = 0, b = size - 1; a < b; a++, b--) {
            unsigned char t = p[i + a];
            p[i + a] = p[i + b];
            p[i + b] = t;
        }
}

/* ---- header semantics ------------------------------------------------------------------------ */

typedef struct {
    st_file *f;
    int cap_tensors, cap_meta;
    int have_meta;
    st_tensor *cur;
    int have_dtype, have_shape, have_offsets;
    uint64_t begin, end;
} header_ctx;

static dtnn_status meta_member(json_reader *j, char *key, void *vctx)
{
    header_ctx *h = vctx;
    st_file *f = h->f;
    for (int i = 0; i < f->n_meta; i++)
        if (!strcmp(f->meta_keys[i], key))
            return json_fail(j, "metadata key '%s' appears twice", key);
    if (json_peek(j) != '"')
        return json_fail(j, "metadata value of '%s' is not a string", key);
    if (f->n_meta == h->cap_meta) {
        int cap = h->cap_meta ? 2 * h->cap_meta : 16;
        char **k = realloc(f->meta_keys, sizeof(char *) * cap);
        if (k)
            f->meta_keys = k;
        char **v = realloc(f->meta_values, sizeof(char *) * cap);
        if (v)
            f->meta_values = v;
        if (!k || !v)
            return dtnn_error_set(j->err, DTNN_ERR_NOMEM, "%s: out of memory", j->path);
        h->cap_meta = cap;
    }
    char *value;
    dtnn_status st = json_string_dup(j, &value);
    if (st)
        return st;
    char *k = dtnn__strdup(key);
    if (!k) {
        free(value);
        return dtnn_error_set(j->err, DTNN_ERR_NOMEM, "%s: out of memory", j->path);
    }
    f->meta_keys[f->n_meta] = k;
    f->meta_values[f->n_meta++] = value;
    return DTNN_OK;
}

static dtnn_status tensor_member(json_reader *j, char *key, void *vctx)
{
    header_ctx *h = vctx;
    st_tensor *t = h->cur;
    if (!strcmp(key, "dtype")) {
        if (h->have_dtype)
            return json_fail(j, "tensor '%s': \"dtype\" appears twice", t->name);
        h->have_dtype = 1;
        char *d;
        dtnn_status st = json_string_dup(j, &d);
        if (st)
            return st;
        if (!dtype_size(d)) {
            st = json_fail(j, "tensor '%s': unknown dtype '%.32s'", t->name, d);
            free(d);
            return st;
        }
        snprintf(t->dtype, sizeof t->dtype, "%s", d);
        free(d);
        return DTNN_OK;
    }
    if (!strcmp(key, "shape")) {
        if (h->have_shape)
            return json_fail(j, "tensor '%s': \"shape\" appears twice", t->name);
        h->have_shape = 1;
        uint64_t dims[ST_MAX_DIMS];
        dtnn_status st = json_uint_array(j, dims, ST_MAX_DIMS, &t->ndim, "shape");
        if (st)
            return st;
        for (int d = 0; d < t->ndim; d++) {
            if (dims[d] > (uint64_t)INT64_MAX)
                return json_fail(j, "tensor '%s': dimension too large", t->name);
            t->dims[d] = (int64_t)dims[d];
        }
        return DTNN_OK;
    }
    if (!strcmp(key, "data_offsets")) {
        if (h->have_offsets)
            return json_fail(j, "tensor '%s': \"data_offsets\" appears twice", t->name);
        h->have_offsets = 1;
        uint64_t v[2];
        int n;
        dtnn_status st = json_uint_array(j, v, 2, &n, "data_offsets");
        if (st)
            return st;
        if (n != 2)
            return json_fail(j, "tensor '%s': data_offsets needs [begin, end]", t->name);
        h->begin = v[0];
        h->end = v[1];
        return DTNN_OK;
    }
    return json_fail(j, "tensor '%s': unknown key '%.64s' (expected dtype, shape, data_offsets)",
                     t->name, key);
}

/* Checks one tensor's offsets and size against the data section. */
static dtnn_status check_tensor(json_reader *j, header_ctx *h, size_t data_bytes)
{
    st_tensor *t = h->cur;
    if (!h->have_dtype || !h->have_shape || !h->have_offsets)
        return json_fail(j, "tensor '%s' lacks \"%s\"", t->name,
                         !h->have_dtype ? "dtype" : !h->have_shape ? "shape" : "data_offsets");
    if (h->end < h->begin)
        return json_fail(j, "tensor '%s': data_offsets [%llu, %llu] end before they begin",
                         t->name, (unsigned long long)h->begin, (unsigned long long)h->end);
    if (h->end > data_bytes)
        return json_fail(j, "tensor '%s': data_offsets [%llu, %llu] run past the data section "
                         "(%zu bytes): the file is truncated or corrupt", t->name,
                         (unsigned long long)h->begin, (unsigned long long)h->end, data_bytes);
    uint64_t count = 1;
    for (int d = 0; d < t->ndim; d++) {
        uint64_t dim = (uint64_t)t->dims[d];
        if (dim && count > UINT64_MAX / dim)
            return json_fail(j, "tensor '%s': shape too large", t->name);
        count *= dim;
    }
    size_t es = dtype_size(t->dtype);
    if (count > UINT64_MAX / es || count * es != h->end - h->begin)
        return json_fail(j, "tensor '%s': %s with %llu elements needs %llu bytes, but "
                         "data_offsets [%llu, %llu] hold %llu", t->name, t->dtype,
                         (unsigned long long)count,
                         (unsigned long long)(count > UINT64_MAX / es ? 0 : count * es),
                         (unsigned long long)h->begin, (unsigned long long)h->end,
                         (unsigned long long)(h->end - h->begin));
    t->offset = (size_t)h->begin;
    t->bytes = (size_t)(h->end - h->begin);
    return DTNN_OK;
}

typedef struct {
    header_ctx *h;
    size_t data_bytes;
} top_ctx;

static dtnn_status top_member(json_reader *j, char *key, void *vctx)
{
    top_ctx *tc = vctx;
    header_ctx *h = tc->h;
    st_file *f = h->f;
    if (!strcmp(key, "__metadata__")) {
        if (h->have_meta)
            return json_fail(j, "\"__metadata__\" appears twice");
        h->have_meta = 1;
        return json_members(j, meta_member, h);
    }
    if (!*key)
        return json_fail(j, "a tensor has an empty name");
    if (f->n_tensors == h->cap_tensors) {
        int cap = h->cap_tensors ? 2 * h->cap_tensors : 64;
        st_tensor *nt = realloc(f->tensors, sizeof *nt * cap);
        if (!nt)
            return dtnn_error_set(j->err, DTNN_ERR_NOMEM, "%s: out of memory", j->path);
        f->tensors = nt;
        h->cap_tensors = cap;
    }
    st_tensor *t = &f->tensors[f->n_tensors];
    memset(t, 0, sizeof *t);
    t->name = dtnn__strdup(key);
    if (!t->name)
        return dtnn_error_set(j->err, DTNN_ERR_NOMEM, "%s: out of memory", j->path);
    f->n_tensors++;
    h->cur = t;
    h->have_dtype = h->have_shape = h->have_offsets = 0;
    dtnn_status st = json_members(j, tensor_member, h);
    if (st)
        return st;
    return check_tensor(j, h, tc->data_bytes);
}

static int cmp_name(const void *a, const void *b)
{
    const st_tensor *const *x = a, *const *y = b;
    return strcmp((*x)->name, (*y)->name);
}

static int cmp_offset(const void *a, const void *b)
{
    const st_tensor *const *x = a, *const *y = b;
    if ((*x)->offset != (*y)->offset)
        return (*x)->offset < (*y)->offset ? -1 : 1;
    return (*x)->bytes < (*y)->bytes ? -1 : (*x)->bytes > (*y)->bytes;
}

/* Unique names, and tensors that tile [0, data_bytes) without overlap or gap. */
static dtnn_status check_layout(const st_file *f, const char *path, dtnn_error *err)
{
    if (f->n_tensors == 0) {
        if (f->data_bytes)
            return dtnn_error_set(err, DTNN_ERR_FORMAT, "%s: %zu bytes of data but no tensors",
                                  path, f->data_bytes);
        return DTNN_OK;
    }
    const st_tensor **v = malloc(sizeof *v * f->n_tensors);
    if (!v)
        return dtnn_error_set(err, DTNN_ERR_NOMEM, "%s: out of memory", path);
    for (int i = 0; i < f->n_tensors; i++)
        v[i] = &f->tensors[i];
    dtnn_status st = DTNN_OK;
    qsort(v, f->n_tensors, sizeof *v, cmp_name);
    for (int i = 1; i < f->n_tensors && !st; i++)
        if (!strcmp(v[i - 1]->name, v[i]->name))
            st = dtnn_error_set(err, DTNN_ERR_FORMAT, "%s: tensor '%s' appears twice", path,
                                v[i]->name);
    qsort(v, f->n_tensors, sizeof *v, cmp_offset);
    size_t covered = 0;
    for (int i = 0; i < f->n_tensors && !st; i++) {
        if (v[i]->offset < covered)
            st = dtnn_error_set(err, DTNN_ERR_FORMAT, "%s: tensor '%s' (bytes [%zu, %zu)) "
                                "overlaps tensor '%s' (bytes [%zu, %zu))", path, v[i]->name,
                                v[i]->offset, v[i]->offset + v[i]->bytes, v[i - 1]->name,
                                v[i - 1]->offset, v[i - 1]->offset + v[i - 1]->bytes);
        else if (v[i]->offset > covered)
            st = dtnn_error_set(err, DTNN_ERR_FORMAT, "%s: bytes [%zu, %zu) of the data "
                                "section belong to no tensor", path, covered, v[i]->offset);
        covered = v[i]->offset + v[i]->bytes;
    }
    if (!st && covered != f->data_bytes)
        st = dtnn_error_set(err, DTNN_ERR_FORMAT, "%s: the data section has %zu bytes but the "
                            "tensors end at byte %zu", path, f->data_bytes, covered);
    free(v);
    return st;
}

/* ---- reading --------------------------------------------------------------------------------- */

/* CRC-32C of n bytes of elements of size es as they are on disk (little-endian). */
static uint32_t crc_le(uint32_t crc, const unsigned char *p, size_t n, size_t es)
{
    if (host_is_little_endian() || es == 1)
        return dtnn__crc32c(crc, p, n);
    unsigned char stage[1 << 16];
    while (n) {
        size_t k = DTNN_MIN(n, sizeof stage);
        memcpy(stage, p, k);
        swap_elements(stage, k, es);
        crc = dtnn__crc32c(crc, stage, k);
        p += k;
        n -= k;
    }
    return crc;
}

/* The checksum of a file: length, header with the crc32c value zeroed, data. `digits` points
 * at the 8 hex digits inside header. */
static uint32_t file_crc(const unsigned char len8[8], char *header, size_t hlen, char *digits,
                         const unsigned char *data, size_t data_bytes)
{
    char saved[8];
    memcpy(saved, digits, 8);
    memset(digits, '0', 8);
    uint32_t crc = dtnn__crc32c(0, len8, 8);
    crc = dtnn__crc32c(crc, header, hlen);
    memcpy(digits, saved, 8);
    return dtnn__crc32c(crc, data, data_bytes);
}

/* Checks the "crc32c" metadata entry when there is one (data still as on disk). */
static dtnn_status verify_checksum(st_file *f, const char *path, const unsigned char len8[8],
                                   char *header, size_t hlen, dtnn_error *err)
{
    const char *stored = st_meta(f, ST_CRC_KEY);
    if (!stored)
        return DTNN_OK;
    char *digits = strstr(header, ST_CRC_FIELD);
    if (strlen(stored) != 8 || strspn(stored, "0123456789abcdef") != 8 || !digits)
        return dtnn_error_set(err, DTNN_ERR_FORMAT, "%s: checksum entry '%.16s' is not 8 hex "
                              "digits: the file is corrupt", path, stored);
    digits += strlen(ST_CRC_FIELD);
    uint32_t crc = file_crc(len8, header, hlen, digits, f->data, f->data_bytes);
    char computed[9];
    snprintf(computed, sizeof computed, "%08x", (unsigned)crc);
    if (strcmp(computed, stored) != 0)
        return dtnn_error_set(err, DTNN_ERR_FORMAT, "%s: checksum mismatch (stored %s, computed "
                              "%s): the file is corrupt or was altered, so it is not loaded",
                              path, stored, computed);
    f->checksummed = 1;
    return DTNN_OK;
}

static dtnn_status read_exact(FILE *fp, void *buf, size_t n, const char *path, const char *what,
                              dtnn_error *err)
{
    if (n && fread(buf, 1, n, fp) != n)
        return dtnn_error_set(err, ferror(fp) ? DTNN_ERR_IO : DTNN_ERR_FORMAT,
                              "%s: cannot read the %s: %s", path, what,
                              ferror(fp) ? strerror(errno) : "file is shorter than its size");
    return DTNN_OK;
}

static dtnn_status read_file(const char *path, st_file *f, dtnn_error *err)
{
    int64_t file_size = 0;
    FILE *fp;
    dtnn_status opened = file_open_input(path, "safetensors file", &fp, &file_size, err);
    if (opened)
        return opened;
    const uint64_t size = (uint64_t)file_size;
    unsigned char len8[8];
    char *header = NULL;
    dtnn_status st = DTNN_OK;
    if (size < 8) {
        st = dtnn_error_set(err, DTNN_ERR_FORMAT, "%s: %llu bytes is too short for a "
                            "safetensors file (truncated?)", path, (unsigned long long)size);
        goto done;
    }
    if ((st = read_exact(fp, len8, 8, path, "header length", err)) != DTNN_OK)
        goto done;
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--)
        hlen = (hlen << 8) | len8[i];
    if (hlen < 2 || hlen > ST_MAX_HEADER || hlen > size - 8) {
        st = dtnn_error_set(err, DTNN_ERR_FORMAT, "%s: header length %llu is impossible for a "
                            "file of %llu bytes (not a safetensors file, or truncated)", path,
                            (unsigned long long)hlen, (unsigned long long)size);
        goto done;
    }
    header = malloc((size_t)hlen + 1);
    f->data_bytes = (size_t)(size - 8 - hlen);
    f->data = dtnn__alloc_aligned(f->data_bytes);
    if (!header || !f->data) {
        st = dtnn_error_set(err, DTNN_ERR_NOMEM, "%s: out of memory reading %llu bytes", path,
                            (unsigned long long)size);
        goto done;
    }
    if ((st = read_exact(fp, header, (size_t)hlen, path, "header", err)) != DTNN_OK ||
        (st = read_exact(fp, f->data, f->data_bytes, path, "data", err)) != DTNN_OK)
        goto done;
    header[hlen] = '\0';
    if (!json_utf8_valid((const unsigned char *)header, (size_t)hlen)) {
        st = dtnn_error_set(err, DTNN_ERR_FORMAT, "%s: the header is not valid UTF-8", path);
        goto done;
    }
    /* The header starts after the 8-byte length: messages give offsets in the file. */
    json_reader j = {.s = header, .n = (size_t)hlen, .path = path, .format = "safetensors",
                     .base = 8, .err = err};
    header_ctx h;
    memset(&h, 0, sizeof h);
    h.f = f;
    top_ctx tc = {&h, f->data_bytes};
    if (json_peek(&j) != '{') {
        st = json_fail(&j, "expected a JSON object");
        goto done;
    }
    if ((st = json_members(&j, top_member, &tc)) != DTNN_OK)
        goto done;
    if (json_peek(&j) >= 0) {
        st = json_fail(&j, "unexpected data after the header object");
        goto done;
    }
    if ((st = check_layout(f, path, err)) == DTNN_OK)
        st = verify_checksum(f, path, len8, header, (size_t)hlen, err);
done:
    free(header);
    fclose(fp);
    return st;
}

dtnn_status st_read(const char *path, st_file *f, dtnn_error *err)
{
    memset(f, 0, sizeof *f);
    dtnn_status st = read_file(path, f, err);
    if (st != DTNN_OK) {
        st_free(f);
        return st;
    }
    if (!host_is_little_endian())
        for (int i = 0; i < f->n_tensors; i++)
            swap_elements(f->data + f->tensors[i].offset, f->tensors[i].bytes,
                          dtype_size(f->tensors[i].dtype));
    return DTNN_OK;
}

void st_free(st_file *f)
{
    if (!f)
        return;
    for (int i = 0; i < f->n_tensors; i++)
        free(f->tensors[i].name);
    free(f->tensors);
    for (int i = 0; i < f->n_meta; i++) {
        free(f->meta_keys[i]);
        free(f->meta_values[i]);
    }
    free(f->meta_keys);
    free(f->meta_values);
    dtnn__free_aligned(f->data);
    memset(f, 0, sizeof *f);
}

const st_tensor *st_find(const st_file *f, const char *name)
{
    for (int i = 0; i < f->n_tensors; i++)
        if (!strcmp(f->tensors[i].name, name))
            return &f->tensors[i];
    return NULL;
}

const char *st_meta(const st_file *f, const char *key)
{
    for (int i = 0; i < f->n_meta; i++)
        if (!strcmp(f->meta_keys[i], key))
            return f->meta_values[i];
    return NULL;
}

size_t st_count(const st_tensor *t)
{
    size_t n = 1;
    for (int d = 0; d < t->ndim; d++)
        n *= (size_t)t->dims[d];
    return n;
}

/* ---- writing --------------------------------------------------------------------------------- */

typedef struct {
    char *p;
    size_t n, cap;
    int oom;
} sbuf;

static void sb_put(sbuf *b, const char *s, size_t n)
{
    if (b->oom)
        return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (b->n + n + 1 > cap)
            cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = 1;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
}

static void sb_str(sbuf *b, const char *s) { sb_put(b, s, strlen(s)); }

/* A JSON string literal; bytes >= 0x80 pass through (the input is taken to be UTF-8). */
static void sb_quoted(sbuf *b, const char *s)
{
    sb_put(b, "\"", 1);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        char esc[8];
        if (c == '"' || c == '\\') {
            esc[0] = '\\';
            esc[1] = (char)c;
            sb_put(b, esc, 2);
        } else if (c < 0x20) {
            snprintf(esc, sizeof esc, "\\u%04x", c);
            sb_put(b, esc, 6);
        } else {
            sb_put(b, (const char *)&c, 1);
        }
    }
    sb_put(b, "\"", 1);
}

static void sb_u64(sbuf *b, uint64_t v)
{
    char num[24];
    snprintf(num, sizeof num, "%llu", (unsigned long long)v);
    sb_str(b, num);
}

static dtnn_status check_entries(const char *path, const st_entry *e, int n,
                                 const char *const *mk, const char *const *mv, int n_meta,
                                 dtnn_error *err)
{
    for (int i = 0; i < n; i++) {
        if (!e[i].name || !*e[i].name || !strcmp(e[i].name, "__metadata__"))
            return dtnn_error_set(err, DTNN_ERR_ARG, "%s: tensor %d has an invalid name", path,
                                  i);
        size_t es = e[i].dtype ? dtype_size(e[i].dtype) : 0;
        if (!es)
            return dtnn_error_set(err, DTNN_ERR_ARG, "%s: tensor '%s': unknown dtype '%s'",
                                  path, e[i].name, e[i].dtype ? e[i].dtype : "(null)");
        if (e[i].ndim < 0 || e[i].ndim > ST_MAX_DIMS || (e[i].ndim > 0 && !e[i].dims))
            return dtnn_error_set(err, DTNN_ERR_ARG, "%s: tensor '%s': %d dimensions", path,
                                  e[i].name, e[i].ndim);
        size_t count = 1;
        for (int d = 0; d < e[i].ndim; d++) {
            if (e[i].dims[d] < 0)
                return dtnn_error_set(err, DTNN_ERR_ARG, "%s: tensor '%s': negative dimension",
                                      path, e[i].name);
            count *= (size_t)e[i].dims[d];
        }
        if (count * es != e[i].bytes || (e[i].bytes && !e[i].data))
            return dtnn_error_set(err, DTNN_ERR_ARG, "%s: tensor '%s': %zu bytes given, the "
                                  "shape needs %zu", path, e[i].name, e[i].bytes, count * es);
        for (int k = 0; k < i; k++)
            if (!strcmp(e[k].name, e[i].name))
                return dtnn_error_set(err, DTNN_ERR_ARG, "%s: tensor '%s' given twice", path,
                                      e[i].name);
    }
    for (int i = 0; i < n_meta; i++) {
        if (!mk[i] || !mv[i])
            return dtnn_error_set(err, DTNN_ERR_ARG, "%s: metadata entry %d is NULL", path, i);
        if (!strcmp(mk[i], ST_CRC_KEY))
            return dtnn_error_set(err, DTNN_ERR_ARG, "%s: metadata key '" ST_CRC_KEY "' is the "
                                  "writer's own checksum", path);
        for (int k = 0; k < i; k++)
            if (!strcmp(mk[k], mk[i]))
                return dtnn_error_set(err, DTNN_ERR_ARG, "%s: metadata key '%s' given twice",
                                      path, mk[i]);
    }
    return DTNN_OK;
}

static dtnn_status build_header(sbuf *b, const st_entry *e, int n, const char *const *mk,
                                const char *const *mv, int n_meta)
{
    /* The checksum entry goes first, its digits zero until the file's CRC is known. */
    sb_str(b, "{\"__metadata__\":{" ST_CRC_FIELD "00000000\"");
    for (int i = 0; i < n_meta; i++) {
        sb_str(b, ",");
        sb_quoted(b, mk[i]);
        sb_str(b, ":");
        sb_quoted(b, mv[i]);
    }
    sb_str(b, "}");
    uint64_t off = 0;
    for (int i = 0; i < n; i++) {
        sb_str(b, ",");
        sb_quoted(b, e[i].name);
        sb_str(b, ":{\"dtype\":");
        sb_quoted(b, e[i].dtype);
        sb_str(b, ",\"shape\":[");
        for (int d = 0; d < e[i].ndim; d++) {
            if (d)
                sb_str(b, ",");
            sb_u64(b, (uint64_t)e[i].dims[d]);
        }
        sb_str(b, "],\"data_offsets\":[");
        sb_u64(b, off);
        sb_str(b, ",");
        off += e[i].bytes;
        sb_u64(b, off);
        sb_str(b, "]}");
    }
    sb_str(b, "}");
    while (b->n % 8)
        sb_str(b, " ");
    return b->oom ? DTNN_ERR_NOMEM : DTNN_OK;
}

/* Writes n bytes of elements of size es, little-endian on disk. */
static int write_le(FILE *fp, const unsigned char *p, size_t n, size_t es)
{
    if (host_is_little_endian() || es == 1)
        return fwrite(p, 1, n, fp) == n ? 0 : -1;
    unsigned char stage[1 << 16];
    while (n) {
        size_t k = DTNN_MIN(n, sizeof stage);
        memcpy(stage, p, k);
        swap_elements(stage, k, es);
        if (fwrite(stage, 1, k, fp) != k)
            return -1;
        p += k;
        n -= k;
    }
    return 0;
}

dtnn_status st_write(const char *path, const st_entry *entries, int n,
                     const char *const *meta_keys, const char *const *meta_values, int n_meta,
                     dtnn_error *err)
{
    dtnn_status st = check_entries(path, entries, n, meta_keys, meta_values, n_meta, err);
    if (st)
        return st;
    sbuf hb = {0};
    if (build_header(&hb, entries, n, meta_keys, meta_values, n_meta) != DTNN_OK) {
        free(hb.p);
        return dtnn_error_set(err, DTNN_ERR_NOMEM, "%s: out of memory building the header",
                              path);
    }
    unsigned char len8[8];
    for (int i = 0; i < 8; i++)
        len8[i] = (unsigned char)((uint64_t)hb.n >> (8 * i));
    char *digits = hb.p + strlen("{\"__metadata__\":{" ST_CRC_FIELD);
    uint32_t crc = dtnn__crc32c(0, len8, 8);
    crc = dtnn__crc32c(crc, hb.p, hb.n);
    for (int i = 0; i < n; i++)
        crc = crc_le(crc, entries[i].data, entries[i].bytes, dtype_size(entries[i].dtype));
    char hex[9];
    snprintf(hex, sizeof hex, "%08x", (unsigned)crc);
    memcpy(digits, hex, 8);
    atomic_file out;
    if ((st = atomic_file_begin(&out, path, "safetensors file", err))) {
        free(hb.p);
        return st;
    }
    FILE *fp = out.fp;
    int bad = fwrite(len8, 1, 8, fp) != 8 || fwrite(hb.p, 1, hb.n, fp) != hb.n;
    for (int i = 0; i < n && !bad; i++)
        bad = write_le(fp, entries[i].data, entries[i].bytes, dtype_size(entries[i].dtype));
    if (bad) {
        int saved = errno;
        atomic_file_abort(&out);
        st = dtnn_error_set(err, DTNN_ERR_IO, "cannot write '%s': %s (the previous file, if "
                            "any, is unchanged)", path, strerror(saved));
    } else {
        st = atomic_file_commit(&out, err);
    }
    free(hb.p);
    return st;
}
