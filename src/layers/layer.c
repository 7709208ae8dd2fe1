/*
 * layer.c — helpers every layer uses: tensor declaration and option parsing.
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "layer.h"

int layer_declare(layer *l, const char *suffix, dtnn_tensor_kind kind, dtnn_dtype dtype,
                  int ndim, const int64_t *dims, layer_init init, double fan_in, double fan_out)
{
    DTNN_ASSERT(l->n_tensors < LAYER_MAX_TENSORS && ndim >= 0 && ndim <= 4);
    layer_tensor *t = &l->t[l->n_tensors];
    memset(t, 0, sizeof *t);
    snprintf(t->suffix, sizeof t->suffix, "%s", suffix);
    t->kind = kind;
    t->dtype = dtype;
    t->ndim = ndim;
    for (int i = 0; i < ndim; i++)
        t->dims[i] = dims[i];
    t->init = init;
    t->fan_in = fan_in;
    t->fan_out = fan_out;
    return l->n_tensors++;
}

dtnn_status layer_opt_int(const char *key, const char *value, int min, int max, int *out,
                          dtnn_error *err)
{
    long long v;
    if (dtnn__parse_int(value, &v) != 0 || v < min || v > max)
        return dtnn_error_set(err, DTNN_ERR_ARG, "option '%s': '%s' is not an integer in [%d, %d]",
                              key, value, min, max);
    *out = (int)v;
    return DTNN_OK;
}

dtnn_status layer_opt_float(const char *key, const char *value, double min, double max,
                            float *out, dtnn_error *err)
{
    double v;
    if (dtnn__parse_float(value, &v) != 0 || v < min || v > max)
        return dtnn_error_set(err, DTNN_ERR_ARG, "option '%s': '%s' is not a number in [%g, %g]",
                              key, value, min, max);
    *out = (float)v;
    return DTNN_OK;
}

dtnn_status layer_opt_identifier(const char *key, const char *value, char *out, size_t cap,
                                 dtnn_error *err)
{
    const size_t n = strlen(value);
    int ok = n > 0 && n < cap;
    for (size_t i = 0; i < n && ok; i++)
        ok = (value[i] >= 'a' && value[i] <= 'z') || (value[i] >= 'A' && value[i] <= 'Z') ||
             (value[i] >= '0' && value[i] <= '9') || value[i] == '_';
    if (!ok)
        return dtnn_error_set(err, DTNN_ERR_ARG, "option '%s': '%s' is not 1 to %zu letters, "
                              "digits and '_'", key, value, cap - 1);
    memcpy(out, value, n + 1);
    return DTNN_OK;
}

dtnn_status layer_opt_bool(const char *key, const char *value, int *out, dtnn_error *err)
{
    if (!strcmp(value, "1") || !strcmp(value, "true") || !strcmp(value, "yes")) {
        *out = 1;
        return DTNN_OK;
    }
    if (!strcmp(value, "0") || !strcmp(value, "false") || !strcmp(value, "no")) {
        *out = 0;
        return DTNN_OK;
    }
    return dtnn_error_set(err, DTNN_ERR_ARG, "option '%s': '%s' is not a boolean (true/false)",
                          key, value);
}

void layer_view_forward(layer *l, const layer_ctx *ctx)
{
    const size_t count = shape_size(l->out) * (size_t)l->n;
    if (l->y != l->x[0])
        be_run(ctx->be, copy_rows, 1, count, l->y, count, l->x[0], count, 0);
}

void layer_view_backward(layer *l, const layer_ctx *ctx)
{
    const size_t count = shape_size(l->out) * (size_t)l->n;
    if (l->dx[0])
        be_run(ctx->be, copy_rows, 1, count, l->dx[0], count, l->dy, count,
               l->dx_accumulate[0]);
}

dtnn_status layer_opt_pair(const char *key, const char *value, int min, int *h, int *w,
                           dtnn_error *err)
{
    char buf[64];
    snprintf(buf, sizeof buf, "%s", value);
    char *x = strchr(buf, 'x');
    if (x)
        *x = '\0';
    dtnn_status st = layer_opt_int(key, buf, min, 1 << 20, h, err);
    if (st)
        return st;
    if (!x) {
        *w = *h;
        return DTNN_OK;
    }
    return layer_opt_int(key, x + 1, min, 1 << 20, w, err);
}

dtnn_status layer_unknown_key(const layer_ops *ops, const char *key, dtnn_error *err)
{
    return dtnn_error_set(err, DTNN_ERR_ARG, "unknown option '%s' for layer type '%s'", key,
                          ops->type);
}

/* NumPy's rule on one sample's (C, H, W): each output size is the larger of the two, and an
 * input whose size differs from it must have size 1 there. */
static dtnn_status broadcast_shapes(const layer *l, dtnn_shape a, dtnn_shape b, binary_geom *g,
                                    dtnn_error *err)
{
    const int as[3] = {a.c, a.h, a.w}, bs[3] = {b.c, b.h, b.w};
    int out[3];
    for (int d = 0; d < 3; d++) {
        if (as[d] != bs[d] && as[d] != 1 && bs[d] != 1)
            return dtnn_error_set(err, DTNN_ERR_SHAPE, "%s: input 0 is %dx%dx%d and input 1 "
                                  "%dx%dx%d, which do not broadcast (each size must be equal "
                                  "or 1)", l->ops->type, a.c, a.h, a.w, b.c, b.h, b.w);
        out[d] = as[d] > bs[d] ? as[d] : bs[d];
    }
    *g = (binary_geom){.C = out[0], .H = out[1], .W = out[2]};
    for (int d = 0; d < 3; d++) {
        g->a[d] = as[d];
        g->b[d] = bs[d];
    }
    return DTNN_OK;
}

dtnn_status layer_broadcast_geom(const layer *l, binary_geom *g, dtnn_error *err)
{
    return broadcast_shapes(l, l->in[0], l->in[1], g, err);
}

int layer_opt_constant(const char *key, const char *value, int reversible, layer_constant *k,
                       dtnn_status *st, dtnn_error *err)
{
    if (!strcmp(key, "const_shape")) {
        /* C, or CxHxW read as the list C,H,W */
        char buf[64];
        int d[3] = {1, 1, 1}, xs = 0;
        snprintf(buf, sizeof buf, "%s", value);
        for (char *q = buf; *q; q++)
            if (*q == 'x') {
                *q = ',';
                xs++;
            }
        if (xs != 0 && xs != 2)
            *st = dtnn_error_set(err, DTNN_ERR_ARG, "option 'const_shape': '%s' is not C or "
                                 "CxHxW", value);
        else
            *st = layer_opt_ints(key, buf, 1, 1 << 24, xs ? 3 : 1, d, err);
        k->c = d[0], k->h = d[1], k->w = d[2];
    } else if (!strcmp(key, "const_value")) {
        *st = layer_opt_float(key, value, -1e30, 1e30, &k->value, err);
    } else if (reversible && !strcmp(key, "reverse")) {
        *st = layer_opt_bool(key, value, &k->reverse, err);
    } else {
        return 0;
    }
    k->given = 1;
    return 1;
}

dtnn_status layer_constant_infer(layer *l, const layer_constant *k, binary_geom *g,
                                 dtnn_error *err)
{
    if (l->n_in == 1 && !k->c)
        return dtnn_error_set(err, DTNN_ERR_ARG, "%s of one input needs the shape of its "
                              "constant operand: const_shape = C or CxHxW", l->ops->type);
    if (l->n_in != 1 && k->given)
        return dtnn_error_set(err, DTNN_ERR_ARG, "%s: const_shape, const_value and reverse "
                              "are for the one-input form (x op constant); this one has %d "
                              "inputs", l->ops->type, l->n_in);
    if (l->n_in != 1)
        return layer_broadcast_geom(l, g, err);
    const dtnn_shape c = {k->c, k->h, k->w};
    dtnn_status st = k->reverse ? broadcast_shapes(l, c, l->in[0], g, err)
                                : broadcast_shapes(l, l->in[0], c, g, err);
    if (st)
        return st;
    g->a_shared = k->reverse;
    g->b_shared = !k->reverse;
    const int64_t dims[3] = {k->c, k->h, k->w};
    const int t = layer_declare(l, k->name[0] ? k->name : "constant",
                                k->trainable ? DTNN_TENSOR_PARAM : DTNN_TENSOR_BUFFER, DTNN_F32,
                                3, dims, INIT_FILL, 0, 0);
    l->t[t].fill = k->value;
    return DTNN_OK;
}

int layer_opt_pad_sides(const char *key, const char *value, int side[4], dtnn_status *st,
                        dtnn_error *err)
{
    const int k = !strcmp(key, "pad_top") ? 0 : !strcmp(key, "pad_left") ? 1 :
                  !strcmp(key, "pad_bottom") ? 2 : !strcmp(key, "pad_right") ? 3 : -1;
    if (k >= 0)
        *st = layer_opt_int(key, value, 0, 1 << 20, &side[k], err);
    else if (!strcmp(key, "pads"))
        *st = layer_opt_ints(key, value, 0, 1 << 20, 4, side, err);
    else
        return 0;
    return 1;
}

dtnn_status layer_opt_last_axis(const char *type, const char *value, const char *other,
                                int *last, dtnn_error *err)
{
    if (strcmp(value, "last") && strcmp(value, other))
        return dtnn_error_set(err, DTNN_ERR_ARG, "%s: axis = %s is not %s or last", type, value,
                              other);
    *last = !strcmp(value, "last");
    return DTNN_OK;
}

dtnn_status layer_rows_fit(const layer *l, size_t rows_per_sample, dtnn_error *err)
{
    if ((size_t)l->build->max_batch * rows_per_sample <= INT_MAX)
        return DTNN_OK;
    return dtnn_error_set(err, DTNN_ERR_SHAPE, "%s: %d samples of %zu rows each are more rows "
                          "than one call takes (2^31): a smaller batch", l->ops->type,
                          l->build->max_batch, rows_per_sample);
}

int layer_opt_list(const char *value, char sep, int min, int max, int cap, int *out)
{
    int n = 0;
    for (const char *s = value;;) {
        char *end;
        const long v = strtol(s, &end, 10);
        if (end == s || v < min || v > max || n == cap)
            return -1;
        out[n++] = (int)v;
        if (!*end)
            return n;
        if (*end != sep)
            return -1;
        s = end + 1;
    }
}

dtnn_status layer_permutation(const int *dims, const int *perm, int rank, permute_geom *g,
                              permute_geom *inverse, dtnn_shape *out, size_t *size,
                              dtnn_error *err)
{
    int seen[PERMUTE_MAX_DIMS] = {0}, od[PERMUTE_MAX_DIMS] = {1, 1, 1, 1, 1, 1};
    *g = (permute_geom){.rank = rank};
    *inverse = (permute_geom){.rank = rank};
    *size = 1;
    for (int k = 0; k < rank; k++) {
        if (perm[k] < 0 || perm[k] >= rank || seen[perm[k]]++)
            return dtnn_error_set(err, DTNN_ERR_ARG, "permute: perm is not a permutation of "
                                  "0 .. %d", rank - 1);
        g->dims[k] = dims[k];
        g->perm[k] = perm[k];
        od[k] = dims[perm[k]];
        inverse->dims[k] = od[k];
        inverse->perm[perm[k]] = k;
        if ((size_t)dims[k] > ((size_t)1 << 31) / *size)
            return dtnn_error_set(err, DTNN_ERR_ARG, "permute: dims hold more than 2^31 values");
        *size *= (size_t)dims[k];
    }
    *out = (dtnn_shape){1, rank >= 2 ? od[rank - 2] : 1, rank >= 2 ? od[rank - 1] : 1};
    for (int k = 0; k < (rank >= 2 ? rank - 2 : 1); k++)
        out->c *= od[k];
    return DTNN_OK;
}

dtnn_status layer_opt_ints(const char *key, const char *value, int min, int max, int count,
                           int *out, dtnn_error *err)
{
    char buf[128];
    snprintf(buf, sizeof buf, "%s", value);
    char *p = buf;
    for (int i = 0; i < count; i++) {
        char *comma = strchr(p, ',');
        if ((comma == NULL) != (i == count - 1))
            return dtnn_error_set(err, DTNN_ERR_ARG, "option '%s': '%s' is not %d integers "
                                  "separated by commas", key, value, count);
        if (comma)
            *comma = '\0';
        dtnn_status st = layer_opt_int(key, p, min, max, &out[i], err);
        if (st)
            return st;
        p = comma ? comma + 1 : p;
    }
    return DTNN_OK;
}

dtnn_status layer_opt_drop_probability(const char *key, const char *value, float *out,
                                       dtnn_error *err)
{
    dtnn_status st = layer_opt_float(key, value, 0.0, 1.0, out, err);
    if (st == DTNN_OK && !(*out < 1.0f))
        return dtnn_error_set(err, DTNN_ERR_ARG, "option '%s': '%s' must be in [0, 1)", key,
                              value);
    return st;
}
