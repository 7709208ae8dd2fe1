/*
 * onnx_import_layers.c — the importer's layers: making one for a node (its output value, its
 * options and bound constants) and naming it. A layer takes its PyTorch module's name where the
 * model says it (a weight "layer2.0.conv1.weight", a trainable constant "features.1.0.layer_scale",
 * torch.onnx's scoped node names), so dtnn's tensor names are the state_dict's; else the node's
 * name, made a valid dtnn name.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx_import.h"

static int name_used(const imp *p, const char *name)
{
    if (!strcmp(name, "input") || !strcmp(name, "output"))
        return 1;
    return name_index_find(&p->layer_index, name) >= 0;
}

/* dtnn's names: letters, digits, '_', '.' and '-', not starting with '.' or '-'. Others become
 * '_'. */
static void sanitise(char *dst, size_t cap, const char *src)
{
    while (*src == '/' || *src == '.' || *src == ':' || *src == '-')
        src++;
    size_t n = 0;
    for (; *src && n + 1 < cap - 8; src++) {
        char ch = *src;
        int ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                 (ch >= '0' && ch <= '9') || ch == '_' || ch == '.' || ch == '-';
        dst[n++] = ok ? ch : '_';
    }
    dst[n] = '\0';
}

/* The PyTorch module a node was exported from, by torch.onnx's scoped node names: in
 * "/layer2/layer2.0/downsample/downsample.0/Conv" each part is a module's name within its
 * parent, where a Sequential's child is written "parent.index", and the last part is the
 * operator. That gives "layer2.0.downsample.0", the state_dict prefix, so a folded weight
 * (onnx::Conv_214) still gets PyTorch's name and --freeze 'layer2.*' finds it. 0 where the
 * name is not of that form. */
static int torch_scope(const char *node, char *out, size_t cap)
{
    if (!node || node[0] != '/' || !strchr(node + 1, '/'))
        return 0;
    size_t n = 0, prev_len = 0;
    const char *prev = NULL;
    out[0] = '\0';
    for (const char *c = node + 1;;) {
        const char *end = strchr(c, '/');
        if (!end)
            break;  /* the operator */
        const size_t len = (size_t)(end - c);
        if (!len)
            return 0;
        const char *add = c;
        size_t add_len = len;
        /* "layer2.0" after "layer2": the child ".0" */
        if (prev && len > prev_len + 1 && !strncmp(c, prev, prev_len) && c[prev_len] == '.') {
            add = c + prev_len;
            add_len = len - prev_len;
        }
        const int dot = n > 0 && add[0] != '.';
        if (n + add_len + (size_t)dot + 1 > cap)
            return 0;
        if (dot)
            out[n++] = '.';
        memcpy(out + n, add, add_len);
        n += add_len;
        out[n] = '\0';
        prev = c;
        prev_len = len;
        c = end + 1;
    }
    return n > 0;
}

static int name_fits(const imp *p, const char *name)
{
    char s[80];
    sanitise(s, sizeof s, name);
    return !strcmp(s, name) && s[0] && !name_used(p, s);
}

static void pick_name(imp *p, imp_layer *l, const Onnx__NodeProto *nd, const char *weight)
{
    char buf[80];
    size_t wl = weight ? strlen(weight) : 0;
    /* PREFIX.weight, or for mul's trainable constant PREFIX.SUFFIX (its const_name) */
    const char *dot = weight ? strrchr(weight, '.') : NULL;
    const size_t suffix = !dot                                      ? 0
                          : !strcmp(l->type, "mul")                 ? strlen(dot)
                          : wl > 7 && !strcmp(weight + wl - 7, ".weight") ? 7
                                                                    : 0;
    if (suffix && wl > suffix && wl < 80) {
        snprintf(buf, sizeof buf, "%.*s", (int)(wl - suffix), weight);
        if (name_fits(p, buf)) {
            snprintf(l->name, sizeof l->name, "%s", buf);
            return;
        }
    }
    /* A weighted layer whose weight has no module name: its module's, from the node. */
    if (weight && torch_scope(nd->name, buf, sizeof buf) && name_fits(p, buf)) {
        snprintf(l->name, sizeof l->name, "%s", buf);
        return;
    }
    sanitise(buf, sizeof buf, nd->name ? nd->name : "");
    if (!buf[0])
        snprintf(buf, sizeof buf, "%s%d", l->type, p->n_l);
    snprintf(l->name, sizeof l->name, "%s", buf);
    for (int k = 2; name_used(p, l->name); k++)
        snprintf(l->name, sizeof l->name, "%s_%d", buf, k);
}

/* inner: 0 the node's first output (its others unused), 1 a value inside a node's expansion,
 * -k - 1 the node's output k (one of several that are used: Split). */
static int layer_make(imp *p, const Onnx__NodeProto *nd, const char *type, const char *weight,
                      const int *ins, int n_in, int rank, int c, int h, int w, int inner,
                      dtnn_error *err)
{
    if (n_in > IMP_MAX_IN) {
        imp_fail(p, nd, DTNN_ERR_UNSUPPORTED, err, "%d inputs (dtnn takes up to %d)", n_in,
                 IMP_MAX_IN);
        return -1;
    }
    if (c < 1 || h < 1 || w < 1 || (int64_t)c * h * w > (int64_t)1 << 30) {
        imp_fail(p, nd, DTNN_ERR_UNSUPPORTED, err, "its output %dx%dx%d is empty or larger than "
                 "dtnn takes", c, h, w);
        return -1;
    }
    int o = inner < 0 ? imp_value_new(p, nd->output[-inner - 1], err)
            : inner ? imp_value_new(p, "", err) : imp_out(p, nd, 0, err);
    if (o < 0)
        return -1;
    if (p->n_l == p->cap_l) {
        int cap = p->cap_l ? 2 * p->cap_l : 64;
        imp_layer *nl = realloc(p->l, sizeof *nl * (size_t)cap);
        if (!nl) {
            dtnn_error_set(err, DTNN_ERR_NOMEM, "out of memory importing '%s'", p->path);
            return -1;
        }
        p->l = nl;
        p->cap_l = cap;
    }
    imp_layer *l = &p->l[p->n_l];
    memset(l, 0, sizeof *l);
    snprintf(l->type, sizeof l->type, "%s", type);
    pick_name(p, l, nd, weight);
    if (name_index_add(&p->layer_index, p->n_l)) {
        dtnn_error_set(err, DTNN_ERR_NOMEM, "out of memory importing '%s'", p->path);
        return -1;
    }
    memcpy(l->in, ins, sizeof(int) * (size_t)n_in);
    l->n_in = n_in;
    l->out = o;
    imp_value *v = &p->v[o];
    v->kind = IMP_LAYER;
    v->layer = p->n_l;
    v->rank = rank;
    v->c = c;
    v->h = h;
    v->w = w;
    p->n_l++;
    return o;
}

void imp_opt(imp_layer *l, const char *key, const char *fmt, ...)
{
    char val[96];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(val, sizeof val, fmt, ap);
    va_end(ap);
    size_t n = strlen(l->opts);
    snprintf(l->opts + n, sizeof l->opts - n, "%s = %s\n", key, val);
}

int imp_bind_add(imp_layer *l, const char *suffix, int value, int transpose)
{
    if (l->n_bind == IMP_MAX_BIND)
        return -1;
    imp_bind *b = &l->bind[l->n_bind++];
    snprintf(b->suffix, sizeof b->suffix, "%s", suffix);
    b->value = value;
    b->transpose = transpose;
    return 0;
}

int imp_layer_new(imp *p, const Onnx__NodeProto *nd, const char *type, const char *weight,
                  const int *ins, int n_in, int rank, int c, int h, int w, dtnn_error *err)
{
    return layer_make(p, nd, type, weight, ins, n_in, rank, c, h, w, 0, err);
}

int imp_layer_inner(imp *p, const Onnx__NodeProto *nd, const char *type, const int *ins,
                    int n_in, int rank, int c, int h, int w, dtnn_error *err)
{
    return layer_make(p, nd, type, NULL, ins, n_in, rank, c, h, w, 1, err);
}

int imp_layer_output(imp *p, const Onnx__NodeProto *nd, int k, const char *type,
                     const int *ins, int n_in, int rank, int c, int h, int w, dtnn_error *err)
{
    if ((size_t)k >= nd->n_output || !nd->output[k] || !nd->output[k][0]) {
        imp_fail(p, nd, DTNN_ERR_FORMAT, err, "output %d is missing", k);
        return -1;
    }
    return layer_make(p, nd, type, NULL, ins, n_in, rank, c, h, w, -k - 1, err);
}
