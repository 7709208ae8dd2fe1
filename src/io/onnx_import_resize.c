/*
 * onnx_import_resize.c — Resize (opsets 10 to 17) and Upsample (7 to 9) by integer factors of
 * H and W, as dtnn's upsample layer. Nearest: the coordinate transformation and rounding
 * the node names are evaluated for every output row and column, and imported only where they
 * pick d / s, the value upsample repeats (torch's asymmetric floor does, as half_pixel with
 * either rounding does for integer factors); bilinear ("linear"): half_pixel and
 * pytorch_half_pixel are align_corners 0, align_corners is 1. Scales come as a constant
 * [1, 1, sh, sw] or sizes [N, C, H sh, W sw]; anything else is refused with its reason.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "onnx_import.h"

#define FAIL(...) imp_fail(p, nd, DTNN_ERR_UNSUPPORTED, err, __VA_ARGS__)

static void attr_text(const Onnx__NodeProto *nd, const char *name, const char *dflt, char *buf,
                      size_t len)
{
    const Onnx__AttributeProto *a = imp_attr(nd, name);
    if (a && a->has_s)
        snprintf(buf, len, "%.*s", (int)a->s.len, (const char *)a->s.data);
    else
        snprintf(buf, len, "%s", dflt);
}

/* The factor a scale names: an integer in [1, 64], else 0. */
static int factor_of(double scale)
{
    return scale >= 1.0 && scale <= 64.0 && scale == floor(scale) ? (int)scale : 0;
}

/* Whether ONNX's nearest pick (ctm, rounding) of every output of an axis of `in` inputs
 * upsampled s times is d / s. */
static int nearest_is_repeat(const char *ctm, const char *rounding, int in, int s)
{
    const int out = in * s;
    for (int d = 0; d < out; d++) {
        double x;
        if (!strcmp(ctm, "asymmetric"))
            x = (double)d / s;
        else if (!strcmp(ctm, "half_pixel") || !strcmp(ctm, "pytorch_half_pixel"))
            x = out > 1 || strcmp(ctm, "pytorch_half_pixel") ? (d + 0.5) / s - 0.5 : 0.0;
        else if (!strcmp(ctm, "tf_half_pixel_for_nn"))
            x = (d + 0.5) / s;
        else if (!strcmp(ctm, "align_corners"))
            x = out > 1 ? (double)d * (in - 1) / (out - 1) : 0.0;
        else
            return 0;
        double r;
        if (!strcmp(rounding, "floor"))
            r = floor(x);
        else if (!strcmp(rounding, "ceil"))
            r = ceil(x);
        else if (!strcmp(rounding, "round_prefer_floor"))
            r = x - floor(x) == 0.5 ? floor(x) : floor(x + 0.5);
        else if (!strcmp(rounding, "round_prefer_ceil"))
            r = x - floor(x) == 0.5 ? ceil(x) : floor(x + 0.5);
        else
            return 0;
        r = r < 0 ? 0 : r > in - 1 ? in - 1 : r;
        if ((int)r != d / s)
            return 0;
    }
    return 1;
}

/* The node's factors from its scales (input k_scales, or the attribute before opset 9) or
 * sizes (input k_sizes, -1: none). */
static dtnn_status factors(imp *p, const Onnx__NodeProto *nd, const imp_value *X, int k_scales,
                           int k_sizes, int *sh, int *sw, dtnn_error *err)
{
    double sc[4] = {0, 0, 0, 0};
    int have = 0;
    if (k_scales < 0) {
        const Onnx__AttributeProto *a = imp_attr(nd, "scales");
        if (a && a->n_floats == 4)
            for (int k = 0; k < 4; k++)
                sc[k] = a->floats[k];
        have = a && a->n_floats == 4;
    } else if (imp_in_opt(p, nd, k_scales, err) >= 0) {
        int i = imp_in_const(p, nd, k_scales, err);
        if (i < 0)
            return err->code;
        const imp_value *v = &p->v[i];
        if (v->count == 4 && v->is_float) {
            for (int k = 0; k < 4; k++)
                sc[k] = v->f[k];
            have = 1;
        } else if (v->count != 0) {
            return FAIL("scales '%s' must be 4 float32 values", v->name);
        }
    }
    if (!have && k_sizes >= 0 && imp_in_opt(p, nd, k_sizes, err) >= 0) {
        int64_t sz[4];
        int n = imp_const_ints(p, nd, k_sizes, sz, 4, err);
        if (n < 0)
            return err->code;
        if (n != 4 || sz[1] != X->c || sz[2] % X->h || sz[3] % X->w)
            return FAIL("sizes must be [N, %d, %d k, %d l] (integer factors)", X->c, X->h,
                        X->w);
        sc[0] = sc[1] = 1.0;
        sc[2] = (double)(sz[2] / X->h);
        sc[3] = (double)(sz[3] / X->w);
        have = 1;
    }
    *sh = factor_of(sc[2]);
    *sw = factor_of(sc[3]);
    if (!have || sc[0] != 1.0 || sc[1] != 1.0 || !*sh || !*sw)
        return FAIL("only scales [1, 1, sh, sw] of integers 1 to 64 (or sizes of such "
                    "factors) are supported, got [%g, %g, %g, %g]", sc[0], sc[1], sc[2], sc[3]);
    return DTNN_OK;
}

dtnn_status op_resize(imp *p, const Onnx__NodeProto *nd, dtnn_error *err)
{
    int x = imp_in_layer(p, nd, 0, 0, err);
    if (x < 0)
        return err->code;
    const imp_value X = p->v[x];
    if (X.rank != 4)
        return FAIL("only [N, C, H, W] inputs are resized");
    const int upsample = !strcmp(nd->op_type, "Upsample"), modern = !upsample && p->opset >= 11;
    int sh = 0, sw = 0;
    dtnn_status st = factors(p, nd, &X, upsample && p->opset < 9 ? -1 : modern ? 2 : 1,
                             modern ? 3 : -1, &sh, &sw, err);
    if (st)
        return st;
    char mode[32], ctm[32], rounding[32];
    attr_text(nd, "mode", "nearest", mode, sizeof mode);
    attr_text(nd, "coordinate_transformation_mode", modern ? "half_pixel" : "asymmetric", ctm,
              sizeof ctm);
    attr_text(nd, "nearest_mode", modern ? "round_prefer_floor" : "floor", rounding,
              sizeof rounding);
    int bilinear = 0, align = 0;
    if (!strcmp(mode, "nearest")) {
        if (!nearest_is_repeat(ctm, rounding, X.h, sh) ||
            !nearest_is_repeat(ctm, rounding, X.w, sw))
            return FAIL("nearest with coordinate_transformation_mode='%s' and nearest_mode='%s' "
                        "does not repeat each value (dtnn's nearest upsampling)", ctm, rounding);
    } else if (!strcmp(mode, "linear") || !strcmp(mode, "bilinear")) {
        bilinear = 1;
        align = !strcmp(ctm, "align_corners");
        if (!align && strcmp(ctm, "half_pixel") && strcmp(ctm, "pytorch_half_pixel"))
            return FAIL("linear with coordinate_transformation_mode='%s' (dtnn's bilinear is "
                        "half_pixel, pytorch_half_pixel or align_corners)", ctm);
    } else {
        return FAIL("mode='%s' (dtnn upsamples nearest or linear)", mode);
    }
    int o = imp_layer_new(p, nd, "upsample", NULL, &x, 1, 4, X.c, X.h * sh, X.w * sw, err);
    if (o < 0)
        return err->code;
    imp_layer *l = &p->l[p->v[o].layer];
    imp_opt(l, "scale", "%dx%d", sh, sw);
    imp_opt(l, "mode", "%s", bilinear ? "bilinear" : "nearest");
    if (bilinear)
        imp_opt(l, "align_corners", "%s", align ? "true" : "false");
    return DTNN_OK;
}
