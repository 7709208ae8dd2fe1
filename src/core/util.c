/*
 * util.c — error strings and messages, aligned allocation, number parsing, clocks.
 */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE /* madvise's MADV_HUGEPAGE */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "internal.h"

const char *dtnn_strerror(dtnn_status code)
{
    switch (code) {
#define DTNN_X_CASE(name, text) \
    case name:                  \
        return text;
        DTNN_STATUS_LIST(DTNN_X_CASE)
#undef DTNN_X_CASE
    }
    return "unknown error";
}

dtnn_status dtnn_error_set(dtnn_error *err, dtnn_status code, const char *fmt, ...)
{
    if (err) {
        err->code = code;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->message, sizeof err->message, fmt, ap);
        va_end(ap);
    }
    return code;
}

/* Buffers of 4 MiB and more (a model's activations, gradients, workspace) are 2 MiB aligned
 * and asked to be backed by transparent huge pages (Debian's kernel gives them only where
 * madvise asks). The kernels walk a channel across the images of a batch, one 4 KiB page per
 * image and per stream for CIFAR planes: with 4 KiB pages that is a TLB miss on most rows.
 * Huge pages make training faster for about a megabyte more peak memory (measurements:
 * docs/perf-notes.md). */
void *dtnn__alloc_aligned(size_t bytes)
{
    if (bytes == 0)
        bytes = DTNN_ALIGN;
    const size_t huge = (size_t)2 << 20;
    const size_t align = bytes >= 2 * huge ? huge : DTNN_ALIGN;
    const size_t size = dtnn__round_up(bytes, align);
    void *p = NULL;
    if (posix_memalign(&p, align, size) != 0)
        return NULL;
#ifdef MADV_HUGEPAGE
    if (align == huge)
        madvise(p, size, MADV_HUGEPAGE);
#endif
    memset(p, 0, bytes);
    return p;
}

void dtnn__free_aligned(void *p) { free(p); }

size_t dtnn__round_up(size_t x, size_t to) { return (x + to - 1) / to * to; }

char *dtnn__strdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d)
        memcpy(d, s, n);
    return d;
}

int dtnn__parse_int(const char *s, long long *out)
{
    if (!s || !*s)
        return -1;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || *end)
        return -1;
    *out = v;
    return 0;
}

int dtnn__parse_float(const char *s, double *out)
{
    if (!s || !*s)
        return -1;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || *end || !isfinite(v))
        return -1;
    *out = v;
    return 0;
}

double dtnn__now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

uint64_t dtnn__fnv1a(uint64_t h, const void *data, size_t n)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

int64_t first_nonfinite_f32(const void *bytes, size_t n)
{
    const unsigned char *b = bytes;
    for (size_t i = 0; i < n; i++) {
        /* An exponent of all ones is Inf or NaN, read on the bits of little-endian storage (the
         * files' order, and the order of the x86 hosts dtnn runs on). */
        if ((b[4 * i + 3] & 0x7f) == 0x7f && (b[4 * i + 2] & 0x80))
            return (int64_t)i;
    }
    return -1;
}
