/*
 * checkpoint_meta.c — a checkpoint's metadata strings: written as key/value pairs, read back
 * strictly (checkpoint.c).
 */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/internal.h"
#include "checkpoint_meta.h"

void ckpt_meta_add(meta_list *ml, const char *key, const char *fmt, ...)
{
    DTNN_ASSERT(ml->n < (int)(sizeof ml->keys / sizeof ml->keys[0]));
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ml->store[ml->n], sizeof ml->store[ml->n], fmt, ap);
    va_end(ap);
    ml->keys[ml->n] = key;
    ml->values[ml->n] = ml->store[ml->n];
    ml->n++;
}

void ckpt_floats_csv(char *buf, size_t len, const float *v, int n)
{
    size_t k = 0;
    buf[0] = '\0';
    for (int i = 0; i < n && k < len; i++)
        k += (size_t)snprintf(buf + k, len - k, "%s%.9g", i ? "," : "", (double)v[i]);
}

/* Strict decimal: digits only, no sign or spaces. */
static int ckpt_parse_u64(const char *s, uint64_t *out)
{
    if (!s || !*s)
        return -1;
    uint64_t v = 0;
    for (; *s; s++) {
        if (*s < '0' || *s > '9')
            return -1;
        unsigned d = (unsigned)(*s - '0');
        if (v > (UINT64_MAX - d) / 10)
            return -1;
        v = v * 10 + d;
    }
    *out = v;
    return 0;
}

dtnn_status ckpt_meta_u64(const char *path, const st_file *f, const char *key, uint64_t max,
                            uint64_t *out, dtnn_error *err)
{
    const char *v = st_meta(f, key);
    if (!v)
        return dtnn_error_set(err, DTNN_ERR_FORMAT, "checkpoint %s: metadata '%s' is missing",
                              path, key);
    if (ckpt_parse_u64(v, out) != 0 || *out > max)
        return dtnn_error_set(err, DTNN_ERR_FORMAT, "checkpoint %s: metadata '%s' is '%.64s', "
                              "not a non-negative integer", path, key, v);
    return DTNN_OK;
}

dtnn_status ckpt_meta_i64(const char *path, const st_file *f, const char *key, int64_t *out,
                            dtnn_error *err)
{
    uint64_t v;
    dtnn_status st = ckpt_meta_u64(path, f, key, (uint64_t)INT64_MAX, &v, err);
    if (st == DTNN_OK)
        *out = (int64_t)v;
    return st;
}

/* The epoch-end monitor's state ("monitor": monitored,plateau_best,early_best,plateau_bad,
 * early_bad,plateau_cuts); checkpoints from before it have none, which is a fresh monitor. */
dtnn_status ckpt_meta_monitor(const char *path, const st_file *f, dtnn_train_state *ts,
                                dtnn_error *err)
{
    const char *s = st_meta(f, "monitor");
    ts->monitored = ts->plateau_bad = ts->early_bad = ts->plateau_cuts = 0;
    ts->plateau_best = ts->early_best = 0.0;
    if (!s)
        return DTNN_OK;
    long long n[4];
    int used = 0;
    if (sscanf(s, "%lld,%lf,%lf,%lld,%lld,%lld%n", &n[0], &ts->plateau_best, &ts->early_best,
               &n[1], &n[2], &n[3], &used) != 6 || s[used] || n[0] < 0 || n[1] < 0 ||
        n[2] < 0 || n[3] < 0 || !isfinite(ts->plateau_best) || !isfinite(ts->early_best))
        return dtnn_error_set(err, DTNN_ERR_FORMAT, "checkpoint %s: metadata 'monitor' is "
                              "malformed: '%.80s'", path, s);
    ts->monitored = n[0];
    ts->plateau_bad = n[1];
    ts->early_bad = n[2];
    ts->plateau_cuts = n[3];
    return DTNN_OK;
}

/* "a,b,c": 1 to 4 finite floats (positive ones when positive is set). */
dtnn_status ckpt_meta_floats(const char *path, const st_file *f, const char *key,
                               int positive, float *v, int *n, dtnn_error *err)
{
    const char *s = st_meta(f, key);
    *n = 0;
    if (!s)
        return dtnn_error_set(err, DTNN_ERR_FORMAT, "checkpoint %s: metadata '%s' is missing",
                              path, key);
    for (;;) {
        char *end = (char *)s;
        int number_start = (*s >= '0' && *s <= '9') || *s == '-' || *s == '.';
        double x = number_start ? strtod(s, &end) : NAN;
        if (*n == 4 || !isfinite(x) || (positive && !(x > 0.0)) || fabs(x) > 3.0e38 ||
            (*end != ',' && *end != '\0'))
            return dtnn_error_set(err, DTNN_ERR_FORMAT, "checkpoint %s: metadata '%s' is "
                                  "'%.64s', not 1 to 4 comma-separated %s numbers", path, key,
                                  st_meta(f, key), positive ? "positive" : "finite");
        v[(*n)++] = (float)x;
        if (*end == '\0')
            return DTNN_OK;
        s = end + 1;
    }
}
