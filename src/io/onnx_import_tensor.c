/*
 * onnx_import_tensor.c — the importer's tensors of any rank, for the self-attention that
 * hybrid CNNs write with Reshape, Transpose, Split and MatMul of computed values (MobileViT's
 * patch unfolding and its transformer). Such a value is each sample's tensor of up to 6 dims
 * sd, the batch in one of three places of the ONNX shape (onnx_import.h, IMP_GEN_*):
 *   IMP_GEN_BATCH   [N, sd0, sd1, ...]
 *   IMP_GEN_MERGED  [N * sd0, sd1, ...]      (the batch folded into axis 0: MobileViT's B * P)
 *   IMP_GEN_LEAD    [sd0, N * sd1, sd2, ...] (a Transpose that put q, k, v before the batch,
 *                                             only ever split or gathered on axis 0)
 * Each sample's data is contiguous in dtnn, in the order of sd, as C x H x W = (product of the
 * leading dims) x sd[k-2] x sd[k-1], the permute layer's convention, so softmax, layernorm and
 * linear with axis = last run on the last axis. Reshape keeps the memory (a view); Transpose
 * keeping the batch's axis first is the permute layer; a MatMul of two such values the matmul
 * layer. A value of 3 dims behind the batch is an ordinary [N, C, H, W] again.
 */
#include <stdio.h>
#include <string.h>

#include "onnx_import.h"

#define FAIL(...) imp_fail(p, nd, DTNN_ERR_UNSUPPORTED, err, __VA_ARGS__)
#define BAD(...) imp_fail(p, nd, DTNN_ERR_FORMAT, err, __VA_ARGS__)

void imp_gen_set(imp_value *v, int mode, const int *sd, int nsd)
{
    if (mode == IMP_GEN_MERGED && nsd >= 2 && sd[0] == 1) {
        /* [N * 1, d1, ...] is [N, d1, ...] */
        mode = IMP_GEN_BATCH;
        sd++;
        nsd--;
    }
    v->gen = mode;
    v->nsd = nsd;
    memmove(v->sd, sd, sizeof(int) * (size_t)nsd);
    v->rank = mode == IMP_GEN_BATCH ? nsd + 1 : nsd;
    v->c = 1;
    v->h = nsd >= 2 ? sd[nsd - 2] : 1;
    v->w = nsd >= 2 ? sd[nsd - 1] : 1;
    for (int k = 0; k < (nsd >= 2 ? nsd - 2 : 1); k++)
        v->c *= sd[k];
    v->nhwc = 0;
    v->groups = 0;
    if (mode == IMP_GEN_BATCH && (nsd == 3 || nsd == 1)) {
        /* [N, C, H, W] and [N, F]: ordinary values */
        v->gen = 0;
        v->nsd = 0;
    }
}

int imp_gen_dims(const imp_value *v, int64_t batch, int64_t *dims)
{
    const int b = v->gen == IMP_GEN_BATCH, at = v->gen == IMP_GEN_LEAD ? 1 : 0;
    if (b)
        dims[0] = batch;
    for (int k = 0; k < v->nsd; k++)
        dims[k + b] = v->sd[k] * (k == at && !b ? batch : 1);
    return v->rank;
}

/* Output `out` of nd (a new value, or output k of a multi-output node when k >= 0) as value x
 * seen with these sample dims: no layer where dtnn's C x H x W stays, else a reshape (a view).
 * Three dims behind the batch are an ordinary [N, C, H, W], one an [N, F]. */
static int as_dims(imp *p, const Onnx__NodeProto *nd, int k, int x, int mode, const int *sd,
                   int nsd, dtnn_error *err)
{
    imp_value want;
    memset(&want, 0, sizeof want);
    imp_gen_set(&want, mode, sd, nsd);
    const imp_value X = p->v[x];
    int o;
    if (k < 0 && want.c == X.c && want.h == X.h && want.w == X.w) {
        o = imp_out_alias(p, nd, x, err);
    } else {
        o = k < 0 ? imp_layer_new(p, nd, "reshape", NULL, &x, 1, 4, want.c, want.h, want.w, err)
                  : imp_layer_output(p, nd, k, "reshape", &x, 1, 4, want.c, want.h, want.w,
                                     err);
        if (o >= 0)
            imp_opt(&p->l[p->v[o].layer], "shape", "%dx%dx%d", want.c, want.h, want.w);
    }
    if (o < 0)
        return -1;
    imp_gen_set(&p->v[o], mode, sd, nsd);
    return o;
}

/* X's ONNX dims (any value of a layer). */
static int onnx_dims(const imp *p, const imp_value *X, int64_t *dims)
{
    return X->gen ? imp_gen_dims(X, p->batch, dims) : imp_layer_dims(X, p->batch, dims);
}

int imp_gen_from_nhwc(imp *p, const Onnx__NodeProto *nd, int x, dtnn_error *err)
{
    const imp_value X = p->v[x];
    const int sd[3] = {X.h, X.w, X.c};
    int o = imp_layer_inner(p, nd, "permute", &x, 1, 4, X.h, X.w, X.c, err);
    if (o < 0)
        return -1;
    imp_layer *l = &p->l[p->v[o].layer];
    imp_opt(l, "dims", "%dx%dx%d", X.c, X.h, X.w);
    imp_opt(l, "perm", "1,2,0");
    imp_gen_set(&p->v[o], IMP_GEN_BATCH, sd, 3);
    return o;
}

int imp_gen_reshape(imp *p, const Onnx__NodeProto *nd, int x, const int64_t *t, int r,
                    dtnn_error *err)
{
    const imp_value X = p->v[x];
    if (X.gen == IMP_GEN_LEAD || r < 2 || r > IMP_MAX_DIMS)
        return 0;
    int64_t d[IMP_MAX_DIMS], rd[IMP_MAX_DIMS], known = 1;
    const int xr = onnx_dims(p, &X, d);
    const int64_t total = p->batch * (int64_t)X.c * X.h * X.w;
    int unknown = -1;
    for (int k = 0; k < r; k++) {
        rd[k] = t[k] == 0 && k < xr ? d[k] : t[k];
        if (rd[k] == -1 && unknown < 0)
            unknown = k;
        else if (rd[k] < 1 || rd[k] > total / known)   /* the product stays within total */
            return 0;
        else
            known *= rd[k];
    }
    if (unknown >= 0) {
        if (total % known)
            return 0;
        rd[unknown] = total / known;
    } else if (known != total) {
        return 0;
    }
    if (rd[0] % p->batch || r - (rd[0] == p->batch) > IMP_SAMPLE_DIMS)
        return 0;
    int sd[IMP_SAMPLE_DIMS], nsd = 0, mode = IMP_GEN_BATCH;
    if (rd[0] != p->batch) {
        mode = IMP_GEN_MERGED;
        sd[nsd++] = (int)(rd[0] / p->batch);
    }
    for (int k = 1; k < r; k++)
        sd[nsd++] = (int)rd[k];
    return as_dims(p, nd, -1, x, mode, sd, nsd, err) < 0 ? -1 : 1;
}

/* An inner reshape (a view) of value x to C x H x W; the new value or -1. */
static int inner_reshape(imp *p, const Onnx__NodeProto *nd, int x, int c, int h, int w,
                         dtnn_error *err)
{
    int o = imp_layer_inner(p, nd, "reshape", &x, 1, 4, c, h, w, err);
    if (o >= 0)
        imp_opt(&p->l[p->v[o].layer], "shape", "%dx%dx%d", c, h, w);
    return o;
}

/* The permute layer's "dims" and "perm" options of l. */
static void permute_opts(imp_layer *l, const int *dims, const int *perm, int n)
{
    char d[96] = "", q[64] = "";
    for (int k = 0, a = 0, b = 0; k < n; k++) {
        a += snprintf(d + a, sizeof d - (size_t)a, "%s%d", k ? "x" : "", dims[k]);
        b += snprintf(q + b, sizeof q - (size_t)b, "%s%d", k ? "," : "", perm[k]);
    }
    imp_opt(l, "dims", "%s", d);
    imp_opt(l, "perm", "%s", q);
}

/* The sample dims of layer value X (any kind) and its mode: an ordinary one is
 * IMP_GEN_BATCH of its C, H, W (rank 3: C, H; rank 2: F; rank 5: its groups, C / groups, H,
 * W). */
static int sample_dims(const imp_value *X, int *sd, int *mode)
{
    if (X->gen) {
        memcpy(sd, X->sd, sizeof(int) * (size_t)X->nsd);
        *mode = X->gen;
        return X->nsd;
    }
    *mode = IMP_GEN_BATCH;
    if (X->rank == 5) {
        const int g[4] = {X->groups, X->c / X->groups, X->h, X->w};
        memcpy(sd, g, sizeof g);
        return 4;
    }
    const int all[3] = {X->c, X->h, X->w};
    const int n = X->rank - 1;
    memcpy(sd, all, sizeof(int) * (size_t)(n < 3 ? n : 3));
    return n;
}

/* The permute layer of x by pp over its sample dims sd (no layer for the identity), its
 * output seen with `mode` and dims od (od may hold a unit dim the permutation does not). */
static int permuted(imp *p, const Onnx__NodeProto *nd, int x, const int *sd, const int *pp,
                    int nsd, int mode, const int *od, int nod, dtnn_error *err)
{
    int identity = 1;
    for (int k = 0; k < nsd; k++)
        identity &= pp[k] == k;
    if (identity)
        return as_dims(p, nd, -1, x, mode, od, nod, err);
    /* the layer's own C x H x W (its dims in the new order) and the value's, which may hold
     * a unit dim more: a view between them where they differ */
    int moved[IMP_SAMPLE_DIMS];
    for (int k = 0; k < nsd; k++)
        moved[k] = sd[pp[k]];
    imp_value own, want;
    memset(&own, 0, sizeof own);
    memset(&want, 0, sizeof want);
    imp_gen_set(&own, IMP_GEN_MERGED, moved, nsd);
    imp_gen_set(&want, mode, od, nod);
    const int same = own.c == want.c && own.h == want.h && own.w == want.w;
    int o = same ? imp_layer_new(p, nd, "permute", NULL, &x, 1, 4, own.c, own.h, own.w, err)
                 : imp_layer_inner(p, nd, "permute", &x, 1, 4, own.c, own.h, own.w, err);
    if (o < 0)
        return -1;
    permute_opts(&p->l[p->v[o].layer], sd, pp, nsd);
    if (!same)
        return as_dims(p, nd, -1, o, mode, od, nod, err);
    imp_gen_set(&p->v[o], mode, od, nod);
    return o;
}

int imp_gen_transpose(imp *p, const Onnx__NodeProto *nd, int x, const int64_t *perm, int n,
                      dtnn_error *err)
{
    const imp_value X = p->v[x];
    int sd[IMP_SAMPLE_DIMS], mode;
    const int nsd = sample_dims(&X, sd, &mode);
    if (mode == IMP_GEN_LEAD || n != X.rank || nsd < 1)
        return 0;
    /* b: the ONNX axis of sample dim 0 is 1 (the batch alone on axis 0) or 0 (merged) */
    const int b = mode == IMP_GEN_BATCH;
    int pp[IMP_SAMPLE_DIMS], od[IMP_SAMPLE_DIMS], m = 0;
    if (perm[0] == 0) {
        for (int k = 1; k < n; k++)
            pp[m++] = (int)perm[k] - b;
        if (!b) { /* merged: sample dim 0 stays with the batch on axis 0 */
            memmove(pp + 1, pp, sizeof(int) * (size_t)m);
            pp[0] = 0;
            m++;
        }
    } else if (n >= 2 && perm[1] == 0) {
        /* the batch's axis moves to position 1: q, k and v before it (IMP_GEN_LEAD) */
        pp[m++] = (int)perm[0] - b;
        if (!b)
            pp[m++] = 0;
        for (int k = 2; k < n; k++)
            pp[m++] = (int)perm[k] - b;
    } else {
        return 0;
    }
    for (int k = 0; k < m; k++)
        if (pp[k] < 0 || pp[k] >= nsd)
            return 0;
    if (m + (perm[0] != 0 && b) > IMP_SAMPLE_DIMS)
        return 0;
    int nod = 0;
    for (int k = 0; k < m; k++) {
        od[nod++] = sd[pp[k]];
        if (perm[0] != 0 && b && k == 0)
            od[nod++] = 1;  /* the batch alone on axis 1: a unit sample dim merged with it */
    }
    return permuted(p, nd, x, sd, pp, nsd, perm[0] == 0 ? mode : IMP_GEN_LEAD, od, nod, err) < 0
               ? -1 : 1;
}

int imp_gen_split(imp *p, const Onnx__NodeProto *nd, int x, const int64_t *sizes, int outs,
                  dtnn_error *err)
{
    const imp_value X = p->v[x];
    if (X.gen != IMP_GEN_LEAD || X.nsd < 3)
        return 0;
    const int per = X.c / X.sd[0];
    int64_t at = 0;
    for (int k = 0; k < outs; k++) {
        if (sizes[k] < 1 || at + sizes[k] > X.sd[0])
            return BAD("split sizes that do not add up to %d", X.sd[0]), -1;
        if (nd->output[k] && nd->output[k][0] && imp_uses(p, nd->output[k])) {
            int sd[IMP_SAMPLE_DIMS];
            memcpy(sd, X.sd, sizeof sd);
            sd[0] = (int)sizes[k];
            imp_value want;
            memset(&want, 0, sizeof want);
            imp_gen_set(&want, IMP_GEN_LEAD, sd, X.nsd);
            int o = imp_layer_output(p, nd, k, "slice", &x, 1, 4, want.c, want.h, want.w, err);
            if (o < 0)
                return -1;
            imp_opt(&p->l[p->v[o].layer], "start", "%d", (int)at * per);
            imp_opt(&p->l[p->v[o].layer], "end", "%d", (int)(at + sizes[k]) * per);
            imp_gen_set(&p->v[o], IMP_GEN_LEAD, sd, X.nsd);
        }
        at += sizes[k];
    }
    return at == X.sd[0] ? 1 : (BAD("split sizes add up to %lld of %d", (long long)at, X.sd[0]),
                                -1);
}

int imp_gen_squeeze_lead(imp *p, const Onnx__NodeProto *nd, int x, dtnn_error *err)
{
    const imp_value X = p->v[x];
    if (X.gen != IMP_GEN_LEAD || X.sd[0] != 1)
        return 0;
    return as_dims(p, nd, -1, x, IMP_GEN_MERGED, X.sd + 1, X.nsd - 1, err) < 0 ? -1 : 1;
}

int imp_gen_gather(imp *p, const Onnx__NodeProto *nd, int x, int64_t index, dtnn_error *err)
{
    const imp_value X = p->v[x];
    if (X.gen != IMP_GEN_LEAD || X.nsd < 3)
        return 0;
    if (index < 0)
        index += X.sd[0];
    if (index < 0 || index >= X.sd[0])
        return BAD("index %lld is outside the %d of axis 0", (long long)index, X.sd[0]), -1;
    const int per = X.c / X.sd[0];
    imp_value want;
    memset(&want, 0, sizeof want);
    imp_gen_set(&want, IMP_GEN_MERGED, X.sd + 1, X.nsd - 1);
    int o = imp_layer_new(p, nd, "slice", NULL, &x, 1, 4, want.c, want.h, want.w, err);
    if (o < 0)
        return -1;
    imp_opt(&p->l[p->v[o].layer], "start", "%d", (int)index * per);
    imp_opt(&p->l[p->v[o].layer], "end", "%d", (int)(index + 1) * per);
    imp_gen_set(&p->v[o], IMP_GEN_MERGED, X.sd + 1, X.nsd - 1);
    return 1;
}

dtnn_status imp_gen_matmul(imp *p, const Onnx__NodeProto *nd, int a, int b, dtnn_error *err)
{
    const imp_value A = p->v[a], B = p->v[b];
    int sa[IMP_SAMPLE_DIMS], sb[IMP_SAMPLE_DIMS], ma, mb;
    const int na = sample_dims(&A, sa, &ma), nb = sample_dims(&B, sb, &mb);
    /* folded into axis 0 the batch would be in a 2-D product's rows or contraction */
    int same = na == nb && ma == mb && na >= (ma == IMP_GEN_MERGED ? 3 : 2) &&
               ma != IMP_GEN_LEAD;
    for (int k = 0; same && k < na - 2; k++)
        same = sa[k] == sb[k];
    if (!same || sa[na - 1] != sb[nb - 2])
        return FAIL("a MatMul of the computed values '%s' and '%s' whose batch dimensions "
                    "differ (dtnn multiplies matrices of equal leading dimensions)", A.name,
                    B.name);
    int sd[IMP_SAMPLE_DIMS];
    memcpy(sd, sa, sizeof sd);
    sd[na - 1] = sb[nb - 1];
    imp_value want;
    memset(&want, 0, sizeof want);
    imp_gen_set(&want, ma, sd, na);
    const int ins[2] = {a, b};
    /* the matmul layer's B x M x K: the operands' own C x H x W must be that */
    if (A.c != want.c || A.h != sa[na - 2] || B.c != want.c)
        return FAIL("a MatMul of '%s' and '%s' of shapes dtnn does not hold as matrices",
                    A.name, B.name);
    int o = imp_layer_new(p, nd, "matmul", NULL, ins, 2, 4, want.c, want.h, want.w, err);
    if (o < 0)
        return err->code;
    imp_gen_set(&p->v[o], ma, sd, na);
    return DTNN_OK;
}

int imp_gen_split_last(imp *p, const Onnx__NodeProto *nd, int x, const int64_t *sizes, int outs,
                       dtnn_error *err)
{
    int sd[IMP_SAMPLE_DIMS], mode;
    const int nsd = sample_dims(&p->v[x], sd, &mode);
    if (mode == IMP_GEN_LEAD || nsd < 2 || (!p->v[x].gen && p->v[x].rank != 4))
        return 0;
    /* the last axis first, as channels: [L, rest, 1] */
    const int last = sd[nsd - 1], rest = p->v[x].c * p->v[x].h * p->v[x].w / last;
    int pp[IMP_SAMPLE_DIMS], od[IMP_SAMPLE_DIMS];
    pp[0] = nsd - 1;
    for (int k = 1; k < nsd; k++)
        pp[k] = k - 1;
    for (int k = 0; k < nsd; k++)
        od[k] = sd[pp[k]];
    imp_value moved;
    memset(&moved, 0, sizeof moved);
    imp_gen_set(&moved, IMP_GEN_MERGED, od, nsd);
    int t = imp_layer_inner(p, nd, "permute", &x, 1, 4, moved.c, moved.h, moved.w, err);
    if (t < 0)
        return -1;
    permute_opts(&p->l[p->v[t].layer], sd, pp, nsd);
    if ((t = inner_reshape(p, nd, t, last, rest, 1, err)) < 0)
        return -1;
    int64_t at = 0;
    for (int k = 0; k < outs; k++) {
        if (sizes[k] < 1 || at + sizes[k] > last)
            return BAD("split sizes that do not add up to %d", last), -1;
        if (nd->output[k] && nd->output[k][0] && imp_uses(p, nd->output[k])) {
            int s = imp_layer_inner(p, nd, "slice", &t, 1, 4, (int)sizes[k], rest, 1, err);
            if (s < 0)
                return -1;
            imp_opt(&p->l[p->v[s].layer], "start", "%d", (int)at);
            imp_opt(&p->l[p->v[s].layer], "end", "%d", (int)(at + sizes[k]));
            /* back: [size, sd0 .. sd(n-2)] -> [sd0 .. sd(n-2), size] */
            int dims[IMP_SAMPLE_DIMS], back[IMP_SAMPLE_DIMS];
            dims[0] = (int)sizes[k];
            for (int j = 1; j < nsd; j++)
                dims[j] = sd[j - 1], back[j - 1] = j;
            back[nsd - 1] = 0;
            for (int j = 0; j < nsd; j++)
                od[j] = j < nsd - 1 ? sd[j] : (int)sizes[k];
            imp_value want;
            memset(&want, 0, sizeof want);
            imp_gen_set(&want, mode, od, nsd);
            int o = imp_layer_output(p, nd, k, "permute", &s, 1, 4, want.c, want.h, want.w, err);
            if (o < 0)
                return -1;
            permute_opts(&p->l[p->v[o].layer], dims, back, nsd);
            imp_gen_set(&p->v[o], mode, od, nsd);
        }
        at += sizes[k];
    }
    return at == last ? 1 : (BAD("split sizes add up to %lld of %d", (long long)at, last), -1);
}

int imp_gen_token_reduce(imp *p, const Onnx__NodeProto *nd, int x, const char *op,
                         dtnn_error *err)
{
    const imp_value X = p->v[x];
    if (X.gen != IMP_GEN_BATCH || X.nsd != 2)
        return 0;
    /* [T, F] seen as T channels of F values: the reduction over the channels is over T */
    const int tokens = X.sd[0], features = X.sd[1];
    int t = inner_reshape(p, nd, x, tokens, features, 1, err);
    if (t < 0 || (t = imp_layer_inner(p, nd, "reduce", &t, 1, 4, 1, features, 1, err)) < 0)
        return -1;
    imp_opt(&p->l[p->v[t].layer], "axes", "channels");
    imp_opt(&p->l[p->v[t].layer], "op", "%s", op);
    int o = imp_layer_new(p, nd, "reshape", NULL, &t, 1, 2, features, 1, 1, err);
    if (o < 0)
        return -1;
    imp_opt(&p->l[p->v[o].layer], "shape", "%dx1x1", features);
    return 1;
}

int imp_gen_view(imp *p, const Onnx__NodeProto *nd, int x, dtnn_error *err)
{
    const imp_value X = p->v[x];
    if (X.gen || X.rank != 3)
        return x;
    /* [N, C, L] is dtnn's C x L x 1; as a tensor its rows of L are the last axis: 1 x C x L */
    const int sd[2] = {X.c, X.h};
    int o = inner_reshape(p, nd, x, 1, X.c, X.h, err);
    if (o >= 0)
        imp_gen_set(&p->v[o], IMP_GEN_BATCH, sd, 2);
    return o;
}
