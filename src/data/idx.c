/*
 * idx.c — reader for the IDX files of MNIST and Fashion-MNIST (format described at
 * yann.lecun.com/exdb/mnist): a big-endian magic 0x000008NN (unsigned bytes, NN dimensions),
 * NN big-endian uint32 sizes, then the bytes. Images (3 dims: n, h, w) become floats in [0, 1];
 * labels (1 dim) become int32. Both gzip and raw files go through zlib's gzread, which passes
 * raw files through unchanged.
 *
 * Strict on purpose: a wrong magic, zero or absurd sizes, a short payload or bytes after it are
 * errors naming the file, never a silently smaller dataset. Only unsigned-byte IDX is read; the
 * other IDX element types (int16, float, ...) are not used by these datasets.
 */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#ifdef DTNN_NO_ZLIB
/* Built without zlib (DTNN_ZLIB=OFF): the same calls on stdio, uncompressed files only. */
#include <stdio.h>
typedef FILE *gzFile;
enum { Z_OK = 0, Z_ERRNO = -1, Z_MEM_ERROR = -4, Z_BUF_ERROR = -5 };
static gzFile gzdopen(int fd, const char *mode) { return fdopen(fd, mode); }
static int gzbuffer(gzFile f, unsigned size) { return setvbuf(f, NULL, _IOFBF, size); }
static int gzread(gzFile f, void *buf, unsigned len)
{
    const size_t r = fread(buf, 1, len, f);
    return ferror(f) ? -1 : (int)r;
}
static const char *gzerror(gzFile f, int *code)
{
    *code = ferror(f) ? Z_ERRNO : Z_OK;
    return "";
}
static int gzclose_r(gzFile f) { return fclose(f); }
#else
#include <zlib.h>
#endif

#include "core/file_input.h"
#include "core/internal.h"
#include "data/data.h"

#define IDX_MAGIC_IMAGES 0x00000803u
#define IDX_MAGIC_LABELS 0x00000801u

/* gzread takes an unsigned int length; read in slices well below that. */
#define IDX_READ_SLICE (1u << 26)

/* A header cannot promise images larger than this (pixels per image). */
#define IDX_MAX_IMAGE_PIXELS (1 << 24)

static uint32_t be32(const unsigned char *b)
{
    return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | (uint32_t)b[3];
}

/* Describes the last gzread failure of f. */
static const char *gz_message(gzFile f)
{
    int code = Z_OK;
    const char *msg = gzerror(f, &code);
    if (code == Z_ERRNO)
        return strerror(errno);
    if (code == Z_MEM_ERROR)
        return "out of memory";
    return msg && *msg ? msg : "unknown zlib error";
}

/* Reads up to want bytes; returns the count read (short only at end of data) or -1 on error. */
static int64_t gz_read_full(gzFile f, unsigned char *buf, int64_t want)
{
    int64_t got = 0;
    while (got < want) {
        int64_t left = want - got;
        unsigned slice = left < IDX_READ_SLICE ? (unsigned)left : IDX_READ_SLICE;
        int r = gzread(f, buf + got, slice);
        if (r < 0)
            return -1;
        if (r == 0)
            break;
        got += r;
    }
    return got;
}

static const char *idx_kind(uint32_t magic)
{
    if (magic == IDX_MAGIC_IMAGES)
        return "IDX images (uint8, 3 dims)";
    if (magic == IDX_MAGIC_LABELS)
        return "IDX labels (uint8, 1 dim)";
    if ((magic & 0xffff0000u) == 0 && (magic & 0xff00u) != 0)
        return "an IDX file of another type or rank";
    if ((magic >> 16) == 0x1f8bu)
        return "gzip data inside gzip";
    return "not IDX";
}

/*
 * Opens path, checks the magic and ndims sizes, and reads the ndims-dimensional uint8 payload
 * into *bytes (malloc'ed, caller frees). what names the payload in messages ("pixels").
 */
/* The header: the magic and ndims big-endian dimensions, checked; *total = their product. */
static dtnn_status idx_header(gzFile f, const char *path, uint32_t magic_want, int ndims,
                              const char *what, uint32_t *dims, int64_t *total, dtnn_error *err)
{
    unsigned char head[16];
    const int64_t head_len = 4 + 4 * (int64_t)ndims;
    const int64_t got = gz_read_full(f, head, head_len);
#ifdef DTNN_NO_ZLIB
    if (got >= 2 && head[0] == 0x1f && head[1] == 0x8b)
        return dtnn_error_set(err, DTNN_ERR_UNSUPPORTED, "%s: gzip-compressed, but this dtnn "
                              "was built without zlib (-DDTNN_ZLIB=OFF): gunzip it first", path);
#endif
    if (got < 0)
        return dtnn_error_set(err, DTNN_ERR_IO, "%s: read error: %s", path, gz_message(f));
    if (got < 4)
        return dtnn_error_set(err, DTNN_ERR_FORMAT, "%s: %s: %lld bytes, too short for an IDX "
                              "header", path, got == 0 ? "empty file" : "truncated",
                              (long long)got);
    const uint32_t magic = be32(head);
    if (magic != magic_want)
        return dtnn_error_set(err, DTNN_ERR_FORMAT, "%s: wrong magic 0x%08x (%s), expected "
                              "0x%08x (%s)", path, (unsigned)magic, idx_kind(magic),
                              (unsigned)magic_want, idx_kind(magic_want));
    if (got < head_len)
        return dtnn_error_set(err, DTNN_ERR_FORMAT, "%s: truncated: header needs %lld bytes, "
                              "got %lld", path, (long long)head_len, (long long)got);
    *total = 1;
    for (int i = 0; i < ndims; i++) {
        dims[i] = be32(head + 4 + 4 * i);
        if (dims[i] == 0)
            return dtnn_error_set(err, DTNN_ERR_FORMAT, "%s: dimension %d is 0: no %s", path, i,
                                  what);
        /* Checked before multiplying: 2^34 x a 32-bit dimension would overflow int64 (found by
         * fuzz/fuzz_idx; the input is kept in fuzz/regressions/fuzz_idx). */
        if ((int64_t)dims[i] > DTNN_DATA_MAX_ELEMENTS / *total)
            return dtnn_error_set(err, DTNN_ERR_FORMAT, "%s: absurd dimensions in the header "
                                  "(more than %lld %s)", path,
                                  (long long)DTNN_DATA_MAX_ELEMENTS, what);
        *total *= dims[i];
    }
    if (ndims == 3 && (int64_t)dims[1] * dims[2] > IDX_MAX_IMAGE_PIXELS)
        return dtnn_error_set(err, DTNN_ERR_FORMAT, "%s: absurd image size %ux%u in the header",
                              path, (unsigned)dims[1], (unsigned)dims[2]);
    return DTNN_OK;
}

/* The body: exactly total bytes, then the end of the stream. The buffer grows as data
 * arrives rather than trusting the header's size up front, so a corrupt header on a small
 * file cannot force a huge allocation. *bytes: malloc'd, the caller frees it. */
static dtnn_status idx_body(gzFile f, const char *path, const char *what, int64_t total,
                            unsigned char **bytes, dtnn_error *err)
{
    int64_t cap = DTNN_MIN(total, (int64_t)1 << 24), have = 0;
    unsigned char *buf = malloc((size_t)cap);
    if (!buf)
        return dtnn_error_set(err, DTNN_ERR_NOMEM, "%s: out of memory for %lld bytes", path,
                              (long long)cap);
    dtnn_status st = DTNN_OK;
    for (;;) {
        const int64_t r = gz_read_full(f, buf + have, cap - have);
        if (r < 0) {
            st = dtnn_error_set(err, DTNN_ERR_FORMAT, "%s: read error after %lld bytes of %s: "
                                "%s", path, (long long)have, what, gz_message(f));
            break;
        }
        have += r;
        if (have < cap || cap == total)
            break;
        const int64_t grown = DTNN_MIN(total, 2 * cap);
        unsigned char *nb = realloc(buf, (size_t)grown);
        if (!nb) {
            st = dtnn_error_set(err, DTNN_ERR_NOMEM, "%s: out of memory for %lld bytes", path,
                                (long long)grown);
            break;
        }
        buf = nb;
        cap = grown;
    }
    if (!st && have < total) {
        int code = Z_OK;
        gzerror(f, &code);
        st = dtnn_error_set(err, DTNN_ERR_FORMAT, "%s: truncated: expected %lld bytes of %s, got "
                            "%lld%s", path, (long long)total, what, (long long)have,
                            code == Z_BUF_ERROR ? " (the gzip stream ends early)" : "");
    }
    unsigned char extra;
    const int64_t more = st ? 0 : gz_read_full(f, &extra, 1);
    if (more < 0)
        st = dtnn_error_set(err, DTNN_ERR_FORMAT, "%s: read error after the %s: %s", path, what,
                            gz_message(f));
    else if (more > 0)
        st = dtnn_error_set(err, DTNN_ERR_FORMAT, "%s: trailing data after the %lld bytes of "
                            "%s the header announces", path, (long long)total, what);
    if (st)
        free(buf);
    else
        *bytes = buf;
    return st;
}

static dtnn_status idx_read(const char *path, uint32_t magic_want, int ndims, const char *what,
                            uint32_t *dims, unsigned char **bytes, int64_t *count,
                            dtnn_error *err)
{
    *bytes = NULL;
    *count = 0;
    if (!path)
        return dtnn_error_set(err, DTNN_ERR_ARG, "IDX reader: path is NULL");
    int fd;
    dtnn_status opened = file_open_input_fd(path, "IDX file", &fd, NULL, err);
    if (opened)
        return opened;
    errno = 0;
    gzFile f = gzdopen(fd, "rb");
    if (!f) {
        close(fd);
        return dtnn_error_set(err, DTNN_ERR_IO, "%s: cannot open: %s", path,
                              errno ? strerror(errno) : "out of memory");
    }
    /* A larger buffer than zlib's 8 KiB default: these files are read once, start to end. */
    gzbuffer(f, 1u << 18);
    int64_t total = 0;
    dtnn_status st = idx_header(f, path, magic_want, ndims, what, dims, &total, err);
    if (!st)
        st = idx_body(f, path, what, total, bytes, err);
    if (!st)
        *count = total;
    gzclose_r(f);
    return st;
}

dtnn_status dtnn_idx_load_images(const char *path, float **x, int64_t *n, int *h, int *w,
                                 dtnn_error *err)
{
    if (!x || !n || !h || !w)
        return dtnn_error_set(err, DTNN_ERR_ARG, "dtnn_idx_load_images: NULL output pointer");
    *x = NULL;
    *n = 0;
    *h = *w = 0;
    uint32_t dims[3];
    unsigned char *bytes;
    int64_t count;
    dtnn_status st = idx_read(path, IDX_MAGIC_IMAGES, 3, "pixels", dims, &bytes, &count, err);
    if (st != DTNN_OK)
        return st;
    float *out = dtnn__alloc_aligned((size_t)count * sizeof(float));
    if (!out) {
        free(bytes);
        return dtnn_error_set(err, DTNN_ERR_NOMEM, "%s: out of memory for %lld floats", path,
                              (long long)count);
    }
    /* Division, not multiplication by 1/255: the same floats as torchvision's ToTensor. */
    for (int64_t i = 0; i < count; i++)
        out[i] = (float)bytes[i] / 255.0f;
    free(bytes);
    *x = out;
    *n = dims[0];
    *h = (int)dims[1];
    *w = (int)dims[2];
    return DTNN_OK;
}

dtnn_status dtnn_idx_load_labels(const char *path, int32_t **y, int64_t *n, dtnn_error *err)
{
    if (!y || !n)
        return dtnn_error_set(err, DTNN_ERR_ARG, "dtnn_idx_load_labels: NULL output pointer");
    *y = NULL;
    *n = 0;
    uint32_t dims[1];
    unsigned char *bytes;
    int64_t count;
    dtnn_status st = idx_read(path, IDX_MAGIC_LABELS, 1, "labels", dims, &bytes, &count, err);
    if (st != DTNN_OK)
        return st;
    int32_t *out = dtnn__alloc_aligned((size_t)count * sizeof(int32_t));
    if (!out) {
        free(bytes);
        return dtnn_error_set(err, DTNN_ERR_NOMEM, "%s: out of memory for %lld labels", path,
                              (long long)count);
    }
    for (int64_t i = 0; i < count; i++)
        out[i] = bytes[i];
    free(bytes);
    *y = out;
    *n = count;
    return DTNN_OK;
}
