/*
 * npy.c — reader and writer for NumPy's .npy files (format: numpy.lib.format, versions 1.0, 2.0
 * and 3.0): the magic "\x93NUMPY", a version, a little-endian header length, a Python dict
 * literal {'descr': ..., 'fortran_order': ..., 'shape': (...)}, then the raw array.
 *
 * What is read: float32 arrays ('<f4') of up to DTNN_NPY_MAX_DIMS dims, and 1-D integer label
 * vectors of any common integer dtype. What is not: Fortran order, structured or big-endian
 * dtypes, float64 (convert with x.astype(np.float32): silently halving precision hides mistakes),
 * pickled objects. The header dict is parsed, not evaluated, and the file size must match the
 * shape exactly. The writer produces version 1.0 with the header padded to 64 bytes, as numpy.
 */
#include <errno.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>

#include "core/atomic_file.h"
#include "core/file_input.h"
#include "core/internal.h"
#include "data/data.h"

#define NPY_MAGIC "\x93NUMPY"
#define NPY_MAGIC_LEN 6
/* numpy itself refuses headers over 10000 bytes unless told otherwise; allow more, not more
 * than this, so a corrupt length cannot ask for gigabytes. */
#define NPY_MAX_HEADER (1 << 20)
/* Dims kept by the parser; loaders narrow this to what they accept. */
#define NPY_PARSE_MAX_DIMS 32

typedef struct {
    char descr[32];
    int fortran_order;
    int ndim;
    int64_t dims[NPY_PARSE_MAX_DIMS];
    int64_t count;          /* product of dims (1 for a 0-d array) */
    int64_t data_bytes;     /* bytes in the file after the header */
} npy_header;

static int host_little_endian(void)
{
    const uint16_t one = 1;
    unsigned char b;
    memcpy(&b, &one, 1);
    return b == 1;
}

/* Writes "(2, 3)", "(5,)" or "()" into out, as numpy prints a shape. */
static void format_shape(char *out, size_t cap, const int64_t *dims, int ndim)
{
    size_t used = 0;
    out[0] = '\0';
    used += (size_t)snprintf(out, cap, "(");
    for (int i = 0; i < ndim && used < cap; i++)
        used += (size_t)snprintf(out + used, cap - used, i ? ", %lld" : "%lld",
                                 (long long)dims[i]);
    if (used < cap)
        snprintf(out + used, cap - used, ndim == 1 ? ",)" : ")");
}

/* ---- header dict parser ----------------------------------------------------------------- */

typedef struct {
    const char *s;
    size_t len, pos;
    const char *path;
    dtnn_error *err;
} npy_parser;

static void skip_ws(npy_parser *p)
{
    while (p->pos < p->len && (p->s[p->pos] == ' ' || p->s[p->pos] == '\t' ||
                               p->s[p->pos] == '\n' || p->s[p->pos] == '\r'))
        p->pos++;
}

static dtnn_status parse_fail(npy_parser *p, const char *what)
{
    /* Quote a little of the header around the failure point to make the message useful. */
    size_t from = p->pos, n = DTNN_MIN(p->len - from, (size_t)24);
    char near[25];
    for (size_t i = 0; i < n; i++) {
        char c = p->s[from + i];
        near[i] = (c >= 32 && c < 127) ? c : '?';
    }
    near[n] = '\0';
    return dtnn_error_set(p->err, DTNN_ERR_FORMAT, "%s: bad .npy header: %s at byte %zu "
                          "(near \"%s\")", p->path, what, p->pos, near);
}

static int peek(npy_parser *p) { return p->pos < p->len ? (unsigned char)p->s[p->pos] : -1; }

static dtnn_status expect_char(npy_parser *p, char c, const char *what)
{
    skip_ws(p);
    if (peek(p) != (unsigned char)c)
        return parse_fail(p, what);
    p->pos++;
    return DTNN_OK;
}

/* A Python string literal without escapes ('abc' or "abc"). */
static dtnn_status parse_string(npy_parser *p, char *out, size_t cap)
{
    skip_ws(p);
    int q = peek(p);
    if (q != '\'' && q != '"')
        return parse_fail(p, "expected a quoted string");
    size_t start = ++p->pos;
    while (p->pos < p->len && p->s[p->pos] != q) {
        if (p->s[p->pos] == '\\')
            return parse_fail(p, "escapes in strings are not supported");
        p->pos++;
    }
    if (p->pos >= p->len)
        return parse_fail(p, "unterminated string");
    size_t n = p->pos - start;
    p->pos++;
    if (n >= cap)
        return parse_fail(p, "string too long");
    memcpy(out, p->s + start, n);
    out[n] = '\0';
    return DTNN_OK;
}

static dtnn_status parse_bool(npy_parser *p, int *out)
{
    skip_ws(p);
    if (p->len - p->pos >= 4 && !memcmp(p->s + p->pos, "True", 4)) {
        p->pos += 4;
        *out = 1;
    } else if (p->len - p->pos >= 5 && !memcmp(p->s + p->pos, "False", 5)) {
        p->pos += 5;
        *out = 0;
    } else {
        return parse_fail(p, "expected True or False");
    }
    return DTNN_OK;
}

/* A non-negative integer; Python 2 era files may carry an 'L' suffix. */
static dtnn_status parse_dim(npy_parser *p, int64_t *out)
{
    skip_ws(p);
    if (peek(p) == '-')
        return parse_fail(p, "negative dimension");
    if (peek(p) < '0' || peek(p) > '9')
        return parse_fail(p, "expected a dimension");
    int64_t v = 0;
    while (peek(p) >= '0' && peek(p) <= '9') {
        int d = peek(p) - '0';
        if (v > (INT64_MAX - d) / 10)
            return parse_fail(p, "dimension overflows int64");
        v = v * 10 + d;
        p->pos++;
    }
    if (peek(p) == 'L')
        p->pos++;
    *out = v;
    return DTNN_OK;
}

/* "(a, b, c)", "(a,)", "()"; a trailing comma is allowed as in Python. */
static dtnn_status parse_shape(npy_parser *p, npy_header *h)
{
    dtnn_status st = expect_char(p, '(', "expected '(' to open the shape tuple");
    if (st != DTNN_OK)
        return st;
    h->ndim = 0;
    for (;;) {
        skip_ws(p);
        if (peek(p) == ')') {
            p->pos++;
            return DTNN_OK;
        }
        if (h->ndim == NPY_PARSE_MAX_DIMS)
            return parse_fail(p, "too many dimensions");
        if ((st = parse_dim(p, &h->dims[h->ndim])) != DTNN_OK)
            return st;
        h->ndim++;
        skip_ws(p);
        if (peek(p) == ',')
            p->pos++;
        else if (peek(p) != ')')
            return parse_fail(p, "expected ',' or ')' in the shape tuple");
    }
}

static dtnn_status parse_dict(npy_parser *p, npy_header *h)
{
    dtnn_status st = expect_char(p, '{', "expected '{'");
    if (st != DTNN_OK)
        return st;
    int seen_descr = 0, seen_fortran = 0, seen_shape = 0;
    for (;;) {
        skip_ws(p);
        if (peek(p) == '}') {
            p->pos++;
            break;
        }
        char key[32];
        size_t key_pos = p->pos;
        if ((st = parse_string(p, key, sizeof key)) != DTNN_OK)
            return st;
        if ((st = expect_char(p, ':', "expected ':' after a key")) != DTNN_OK)
            return st;
        int *seen;
        if (!strcmp(key, "descr")) {
            seen = &seen_descr;
            skip_ws(p);
            if (peek(p) == '[')
                return parse_fail(p, "structured dtypes are not supported");
            st = parse_string(p, h->descr, sizeof h->descr);
        } else if (!strcmp(key, "fortran_order")) {
            seen = &seen_fortran;
            st = parse_bool(p, &h->fortran_order);
        } else if (!strcmp(key, "shape")) {
            seen = &seen_shape;
            st = parse_shape(p, h);
        } else {
            p->pos = key_pos;
            return parse_fail(p, "unknown key (expected descr, fortran_order, shape)");
        }
        if (st != DTNN_OK)
            return st;
        if (*seen) {
            p->pos = key_pos;
            return parse_fail(p, "duplicate key");
        }
        *seen = 1;
        skip_ws(p);
        if (peek(p) == ',')
            p->pos++;
        else if (peek(p) != '}')
            return parse_fail(p, "expected ',' or '}' after a value");
    }
    skip_ws(p);
    if (p->pos != p->len)
        return parse_fail(p, "unexpected text after the dict");
    if (!seen_descr || !seen_fortran || !seen_shape)
        return dtnn_error_set(p->err, DTNN_ERR_FORMAT, "%s: bad .npy header: missing key '%s'",
                              p->path, !seen_descr ? "descr" : !seen_fortran ? "fortran_order"
                                                                             : "shape");
    return DTNN_OK;
}

/* ---- reading ---------------------------------------------------------------------------- */

/* Opens path and reads and parses everything up to the array data; *f is left there. */
static dtnn_status npy_open(const char *path, FILE **fp, npy_header *h, dtnn_error *err)
{
    *fp = NULL;
    memset(h, 0, sizeof *h);
    if (!path)
        return dtnn_error_set(err, DTNN_ERR_ARG, ".npy reader: path is NULL");
    int64_t file_size = 0;
    FILE *f;
    dtnn_status opened = file_open_input(path, ".npy file", &f, &file_size, err);
    if (opened)
        return opened;
    dtnn_status st = DTNN_OK;
    char *text = NULL;

    unsigned char pre[12];
    size_t got = fread(pre, 1, 10, f);
    if (got < NPY_MAGIC_LEN || memcmp(pre, NPY_MAGIC, NPY_MAGIC_LEN) != 0) {
        st = dtnn_error_set(err, DTNN_ERR_FORMAT, "%s: not a .npy file (no \\x93NUMPY magic)",
                            path);
        goto fail;
    }
    if (got < 10) {
        st = dtnn_error_set(err, DTNN_ERR_FORMAT, "%s: truncated .npy preamble", path);
        goto fail;
    }
    int major = pre[6], minor = pre[7];
    int64_t hlen, offset;
    if (major == 1 && minor == 0) {
        hlen = pre[8] | (int64_t)pre[9] << 8;
        offset = 10;
    } else if ((major == 2 || major == 3) && minor == 0) {
        if (fread(pre + 10, 1, 2, f) != 2) {
            st = dtnn_error_set(err, DTNN_ERR_FORMAT, "%s: truncated .npy preamble", path);
            goto fail;
        }
        hlen = pre[8] | (int64_t)pre[9] << 8 | (int64_t)pre[10] << 16 | (int64_t)pre[11] << 24;
        offset = 12;
    } else {
        st = dtnn_error_set(err, DTNN_ERR_UNSUPPORTED, "%s: .npy format version %d.%d is not "
                            "supported (1.0, 2.0, 3.0 are)", path, major, minor);
        goto fail;
    }
    if (hlen <= 0 || hlen > NPY_MAX_HEADER) {
        st = dtnn_error_set(err, DTNN_ERR_FORMAT, "%s: .npy header length %lld is out of range "
                            "(1..%d)", path, (long long)hlen, NPY_MAX_HEADER);
        goto fail;
    }
    if (offset + hlen > file_size) {
        st = dtnn_error_set(err, DTNN_ERR_FORMAT, "%s: truncated: the .npy header claims %lld "
                            "bytes but the file has %lld after the preamble", path,
                            (long long)hlen, (long long)(file_size - offset));
        goto fail;
    }
    text = malloc((size_t)hlen);
    if (!text) {
        st = dtnn_error_set(err, DTNN_ERR_NOMEM, "%s: out of memory for the header", path);
        goto fail;
    }
    if (fread(text, 1, (size_t)hlen, f) != (size_t)hlen) {
        st = dtnn_error_set(err, DTNN_ERR_IO, "%s: read error in the header: %s", path,
                            ferror(f) ? strerror(errno) : "unexpected end of file");
        goto fail;
    }
    npy_parser p = {text, (size_t)hlen, 0, path, err};
    if ((st = parse_dict(&p, h)) != DTNN_OK)
        goto fail;
    if (h->fortran_order) {
        st = dtnn_error_set(err, DTNN_ERR_UNSUPPORTED, "%s: fortran_order=True is not supported; "
                            "save a C-ordered array (np.ascontiguousarray)", path);
        goto fail;
    }
    h->count = 1;
    for (int i = 0; i < h->ndim; i++) {
        if (h->dims[i] > 0 && h->count > DTNN_DATA_MAX_ELEMENTS / h->dims[i]) {
            char shape[256];
            format_shape(shape, sizeof shape, h->dims, h->ndim);
            st = dtnn_error_set(err, DTNN_ERR_FORMAT, "%s: absurd shape %s (more than %lld "
                                "elements)", path, shape, (long long)DTNN_DATA_MAX_ELEMENTS);
            goto fail;
        }
        h->count *= h->dims[i];
    }
    h->data_bytes = file_size - offset - hlen;
    free(text);
    *fp = f;
    return DTNN_OK;
fail:
    free(text);
    fclose(f);
    return st;
}

/* The data must be exactly count * itemsize bytes: shorter is truncation, longer is a shape
 * that does not describe the file. */
static dtnn_status check_size(const char *path, const npy_header *h, int64_t itemsize,
                              dtnn_error *err)
{
    int64_t want = h->count * itemsize;
    if (want == h->data_bytes)
        return DTNN_OK;
    char shape[256];
    format_shape(shape, sizeof shape, h->dims, h->ndim);
    if (h->data_bytes < want)
        return dtnn_error_set(err, DTNN_ERR_FORMAT, "%s: truncated: shape %s of '%s' needs %lld "
                              "data bytes, the file has %lld", path, shape, h->descr,
                              (long long)want, (long long)h->data_bytes);
    return dtnn_error_set(err, DTNN_ERR_FORMAT, "%s: %lld bytes of trailing data after the "
                          "%lld bytes that shape %s of '%s' needs", path,
                          (long long)(h->data_bytes - want), (long long)want, shape, h->descr);
}

static dtnn_status read_exact(FILE *f, const char *path, void *buf, int64_t bytes,
                              dtnn_error *err)
{
    if (bytes > 0 && fread(buf, 1, (size_t)bytes, f) != (size_t)bytes)
        return dtnn_error_set(err, DTNN_ERR_IO, "%s: read error in the array data: %s", path,
                              ferror(f) ? strerror(errno) : "unexpected end of file");
    return DTNN_OK;
}

static void swap_bytes(unsigned char *b, int64_t count, int size)
{
    for (int64_t i = 0; i < count; i++, b += size)
        for (int j = 0; j < size / 2; j++) {
            unsigned char t = b[j];
            b[j] = b[size - 1 - j];
            b[size - 1 - j] = t;
        }
}

dtnn_status dtnn_npy_load_f32(const char *path, float **x, int64_t *dims, int *ndim,
                              dtnn_error *err)
{
    if (!x || !dims || !ndim)
        return dtnn_error_set(err, DTNN_ERR_ARG, "dtnn_npy_load_f32: NULL output pointer");
    *x = NULL;
    *ndim = 0;
    FILE *f;
    npy_header h;
    dtnn_status st = npy_open(path, &f, &h, err);
    if (st != DTNN_OK)
        return st;
    float *out = NULL;
    if (strcmp(h.descr, "<f4") != 0) {
        st = dtnn_error_set(err, DTNN_ERR_UNSUPPORTED, "%s: dtype '%s' is not supported: expected "
                            "float32 ('<f4'); convert with x.astype(np.float32)", path, h.descr);
        goto done;
    }
    if (h.ndim > DTNN_NPY_MAX_DIMS) {
        char shape[256];
        format_shape(shape, sizeof shape, h.dims, h.ndim);
        st = dtnn_error_set(err, DTNN_ERR_UNSUPPORTED, "%s: shape %s has %d dims; at most %d are "
                            "supported", path, shape, h.ndim, DTNN_NPY_MAX_DIMS);
        goto done;
    }
    if ((st = check_size(path, &h, 4, err)) != DTNN_OK)
        goto done;
    out = dtnn__alloc_aligned((size_t)h.count * sizeof(float));
    if (!out) {
        st = dtnn_error_set(err, DTNN_ERR_NOMEM, "%s: out of memory for %lld floats", path,
                            (long long)h.count);
        goto done;
    }
    if ((st = read_exact(f, path, out, h.count * 4, err)) != DTNN_OK)
        goto done;
    if (!host_little_endian())
        swap_bytes((unsigned char *)out, h.count, 4);
    for (int i = 0; i < h.ndim; i++)
        dims[i] = h.dims[i];
    *ndim = h.ndim;
    *x = out;
    out = NULL;
done:
    dtnn__free_aligned(out);
    fclose(f);
    return st;
}

typedef struct {
    const char *descr;
    int size;
    int is_signed;
} label_dtype;

static const label_dtype label_dtypes[] = {
    {"<i8", 8, 1}, {"<i4", 4, 1}, {"<i2", 2, 1}, {"|i1", 1, 1},
    {"<u8", 8, 0}, {"<u4", 4, 0}, {"<u2", 2, 0}, {"|u1", 1, 0},
};

/* Decodes one little-endian integer of the given size into an int64 (uint64 values past
 * INT64_MAX report as out of range through *too_big). */
static int64_t decode_label(const unsigned char *b, const label_dtype *t, int *too_big)
{
    uint64_t u = 0;
    for (int j = 0; j < t->size; j++)
        u |= (uint64_t)b[j] << (8 * j);
    *too_big = 0;
    if (!t->is_signed) {
        if (u > (uint64_t)INT64_MAX)
            *too_big = 1;
        return (int64_t)(u & (uint64_t)INT64_MAX);
    }
    int bits = 8 * t->size;
    if (bits < 64 && (u >> (bits - 1)) & 1)
        u |= ~(uint64_t)0 << bits;  /* sign-extend */
    int64_t v;
    memcpy(&v, &u, sizeof v);
    return v;
}

dtnn_status dtnn_npy_load_labels(const char *path, int32_t **y, int64_t *n, dtnn_error *err)
{
    if (!y || !n)
        return dtnn_error_set(err, DTNN_ERR_ARG, "dtnn_npy_load_labels: NULL output pointer");
    *y = NULL;
    *n = 0;
    FILE *f;
    npy_header h;
    dtnn_status st = npy_open(path, &f, &h, err);
    if (st != DTNN_OK)
        return st;
    unsigned char *raw = NULL;
    int32_t *out = NULL;
    const label_dtype *t = NULL;
    for (size_t i = 0; i < sizeof label_dtypes / sizeof label_dtypes[0]; i++)
        if (!strcmp(h.descr, label_dtypes[i].descr))
            t = &label_dtypes[i];
    if (!t) {
        st = dtnn_error_set(err, DTNN_ERR_UNSUPPORTED, "%s: dtype '%s' is not supported for "
                            "labels: expected an integer dtype (<i8 <i4 <i2 |i1 <u8 <u4 <u2 |u1)",
                            path, h.descr);
        goto done;
    }
    if (h.ndim != 1) {
        char shape[256];
        format_shape(shape, sizeof shape, h.dims, h.ndim);
        st = dtnn_error_set(err, DTNN_ERR_SHAPE, "%s: labels must be a 1-D array, shape is %s",
                            path, shape);
        goto done;
    }
    if ((st = check_size(path, &h, t->size, err)) != DTNN_OK)
        goto done;
    raw = malloc((size_t)(h.count * t->size) + 1);
    out = dtnn__alloc_aligned((size_t)h.count * sizeof(int32_t));
    if (!raw || !out) {
        st = dtnn_error_set(err, DTNN_ERR_NOMEM, "%s: out of memory for %lld labels", path,
                            (long long)h.count);
        goto done;
    }
    if ((st = read_exact(f, path, raw, h.count * t->size, err)) != DTNN_OK)
        goto done;
    for (int64_t i = 0; i < h.count; i++) {
        int too_big;
        int64_t v = decode_label(raw + i * t->size, t, &too_big);
        if (v < 0) {
            st = dtnn_error_set(err, DTNN_ERR_FORMAT, "%s: label %lld at index %lld is negative",
                                path, (long long)v, (long long)i);
            goto done;
        }
        if (too_big || v > INT32_MAX) {
            st = dtnn_error_set(err, DTNN_ERR_FORMAT, "%s: label at index %lld does not fit "
                                "int32", path, (long long)i);
            goto done;
        }
        out[i] = (int32_t)v;
    }
    *y = out;
    *n = h.count;
    out = NULL;
done:
    free(raw);
    dtnn__free_aligned(out);
    fclose(f);
    return st;
}

/* ---- writing ---------------------------------------------------------------------------- */

dtnn_status dtnn_npy_save_f32(const char *path, const float *x, const int64_t *dims, int ndim,
                              dtnn_error *err)
{
    if (!path || ndim < 0 || ndim > DTNN_NPY_MAX_DIMS || (ndim > 0 && !dims))
        return dtnn_error_set(err, DTNN_ERR_ARG, "dtnn_npy_save_f32(%s): need a path and 0..%d "
                              "dims, got ndim %d", path ? path : "NULL", DTNN_NPY_MAX_DIMS, ndim);
    int64_t count = 1;
    for (int i = 0; i < ndim; i++) {
        if (dims[i] < 0 || (dims[i] > 0 && count > DTNN_DATA_MAX_ELEMENTS / dims[i]))
            return dtnn_error_set(err, DTNN_ERR_ARG, "dtnn_npy_save_f32(%s): dimension %d is "
                                  "%lld", path, i, (long long)dims[i]);
        count *= dims[i];
    }
    if (count > 0 && !x)
        return dtnn_error_set(err, DTNN_ERR_ARG, "dtnn_npy_save_f32(%s): data is NULL", path);

    char shape[256], header[512];
    format_shape(shape, sizeof shape, dims, ndim);
    int len = snprintf(header, sizeof header, "{'descr': '<f4', 'fortran_order': False, "
                       "'shape': %s, }", shape);
    /* Pad with spaces and end with '\n' so the data starts at a multiple of 64 bytes: numpy's
     * layout, which lets readers memory-map the array aligned. */
    int total = 10 + len + 1;
    int padded = (total + 63) / 64 * 64;
    memset(header + len, ' ', (size_t)(padded - total));
    len += padded - total;
    header[len++] = '\n';

    atomic_file out;
    dtnn_status st = atomic_file_begin(&out, path, ".npy file", err);
    if (st)
        return st;
    FILE *f = out.fp;
    unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)(len & 0xff),
                             (unsigned char)(len >> 8)};
    int ok = fwrite(pre, 1, sizeof pre, f) == sizeof pre &&
             fwrite(header, 1, (size_t)len, f) == (size_t)len;
    if (ok && host_little_endian()) {
        ok = count == 0 || fwrite(x, sizeof(float), (size_t)count, f) == (size_t)count;
    } else if (ok) {
        for (int64_t i = 0; ok && i < count; i++) {
            unsigned char b[4];
            memcpy(b, &x[i], 4);
            swap_bytes(b, 1, 4);
            ok = fwrite(b, 1, 4, f) == 4;
        }
    }
    if (!ok) {
        int saved_errno = errno;
        atomic_file_abort(&out);
        return dtnn_error_set(err, DTNN_ERR_IO, "cannot write the .npy file '%s': %s (nothing "
                              "was replaced)", path, strerror(saved_errno));
    }
    return atomic_file_commit(&out, err);
}
