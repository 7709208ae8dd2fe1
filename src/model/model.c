/*
 * model.c — a model is a list of layers in topological order (each layer names its producers),
 * built once: shapes inferred, every buffer planned (model_plan.c) and allocated by the
 * backend, parameters initialised. After that a training step allocates nothing. Then forward
 * and backward, layer by layer through the backend; values go in and out in model_copy.c.
 *
 * Parameters, gradients (same layout) and batch-norm buffers each live in one aligned flat
 * buffer, laid out in layer order; every tensor has a PyTorch state_dict name ("<layer
 * name>.<suffix>"). Backward visits layers in reverse; when an output feeds several layers, the
 * first gradient to arrive writes and the others add (dx_accumulate), so no gradient buffer is
 * ever cleared.
 */
#include <fnmatch.h>
#include <math.h>
#include <string.h>

#include "../layers/layer.h"
#include "../core/rng.h"
#include "../comm/comm.h"
#include "../core/trace.h"
#include "model_internal.h"

void dtnn_build_params_default(dtnn_build_params *p)
{
    memset(p, 0, sizeof *p);
    p->max_batch = 64;
    p->training = 1;
    p->seed = 42;
    p->init = DTNN_INIT_DEFAULT;
    p->workspace_limit = (size_t)64 << 20;
}

const char *dtnn_precision_name(dtnn_precision p)
{
    return p == DTNN_PRECISION_FP32 ? "fp32" : p == DTNN_PRECISION_BF16 ? "bf16" : NULL;
}

dtnn_status dtnn_precision_parse(const char *name, dtnn_precision *out, dtnn_error *err)
{
    if (name && !strcmp(name, "fp32"))
        *out = DTNN_PRECISION_FP32;
    else if (name && !strcmp(name, "bf16"))
        *out = DTNN_PRECISION_BF16;
    else
        return dtnn_error_set(err, DTNN_ERR_ARG, "precision '%s': choose fp32 or bf16",
                              name ? name : "");
    return DTNN_OK;
}

static const char *layer_key(const void *ctx, int id)
{
    return ((const dtnn_model *)ctx)->layers[id]->name;
}

static const char *tensor_key(const void *ctx, int id)
{
    return ((const dtnn_model *)ctx)->tensors[id].name;
}

dtnn_model *dtnn_model_create(int c, int h, int w)
{
    if (c <= 0 || h <= 0 || w <= 0)
        return NULL;
    dtnn_model *m = calloc(1, sizeof *m);
    if (!m)
        return NULL;
    m->input = (dtnn_shape){c, h, w};
    name_index_init(&m->layer_index, layer_key, m);
    name_index_init(&m->tensor_index, tensor_key, m);
    return m;
}

static void layer_free(layer *l)
{
    if (!l)
        return;
    if (l->ops->release && l->be)
        l->ops->release(l);
    free(l->cfg);
    free(l->in_ids);
    free(l->in);
    free(l->x);
    free(l->dx);
    free(l->dx_accumulate);
    free(l);
}

void dtnn_model_free(dtnn_model *m)
{
    if (!m)
        return;
    for (int i = 0; i < m->n_layers; i++)
        layer_free(m->layers[i]);
    free(m->layers);
    name_index_free(&m->layer_index);
    name_index_free(&m->tensor_index);
    for (int i = 0; i < m->n_tensors; i++)
        free((char *)m->tensors[i].name);
    free(m->tensors);
    if (m->be) {
        model_prefetch_free(m);
        void *owned[] = {m->params, m->grads, m->buffers, m->activations, m->input_grad,
                         m->aux, m->workspace, m->input_buf, m->labels, m->loss_out};
        for (size_t i = 0; i < sizeof owned / sizeof owned[0]; i++)
            be_free(m->be, owned[i]);
        dtnn__backend_free(m->be);
    }
    free(m->reduce_stage);
    for (int i = 0; i < m->bp.n_freeze && m->freeze; i++)
        free(m->freeze[i]);
    free(m->freeze);
    free(m);
}

int dtnn_model_find(const dtnn_model *m, const char *name)
{
    int i = name_index_find(&m->layer_index, name);
    return i >= 0 ? i : -2;
}

/* Letters, digits, '_', '.' and '-' (torchvision's RegNet names its blocks "block1-0"), not
 * starting with '.' or '-'. */
static int valid_name(const char *s)
{
    if (!*s || *s == '.' || *s == '-')
        return 0;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
              *s == '_' || *s == '.' || *s == '-'))
            return 0;
    return 1;
}

int model_add_layer(dtnn_model *m, const char *type, const char *name, const char *const *keys,
                    const char *const *values, int n_options, const int *inputs, int n_inputs,
                    const char *origin, dtnn_error *err)
{
    const layer_ops *ops = layer_ops_find(type);
    if (!ops) {
        dtnn_error_set(err, DTNN_ERR_ARG, "%s%sunknown layer type '%s' (dtnn models --layers "
                       "lists them)", origin ? origin : "", origin ? ": " : "", type);
        return -1;
    }
    return model_append_layer(m, ops, name, keys, values, n_options, inputs, n_inputs, origin,
                              err);
}

int model_append_layer(dtnn_model *m, const layer_ops *ops, const char *name,
                       const char *const *keys, const char *const *values, int n_options,
                       const int *inputs, int n_inputs, const char *origin, dtnn_error *err)
{
    const char *type = ops->type;
    const char *where = origin ? origin : "";
    const char *sep = origin ? ": " : "";
    if (m->built) {
        dtnn_error_set(err, DTNN_ERR_ARG, "%s%scannot add layers to a model already built",
                       where, sep);
        return -1;
    }
    int default_input = m->n_layers == 0 ? DTNN_INPUT : m->n_layers - 1;
    if (!inputs || n_inputs == 0) {
        inputs = &default_input;
        n_inputs = 1;
    }
    if (n_inputs < ops->min_inputs || n_inputs > ops->max_inputs) {
        dtnn_error_set(err, DTNN_ERR_ARG, "%s%slayer type '%s' takes %d to %d inputs, not %d",
                       where, sep, type, ops->min_inputs, ops->max_inputs, n_inputs);
        return -1;
    }
    for (int i = 0; i < n_inputs; i++) {
        if (inputs[i] != DTNN_INPUT && (inputs[i] < 0 || inputs[i] >= m->n_layers)) {
            dtnn_error_set(err, DTNN_ERR_ARG, "%s%sinput %d of layer '%s' refers to node %d, "
                           "which does not exist yet", where, sep, i, name ? name : type,
                           inputs[i]);
            return -1;
        }
    }
    layer *l = calloc(1, sizeof *l);
    if (!l) {
        dtnn_error_set(err, DTNN_ERR_NOMEM, "out of memory adding layer '%s'", type);
        return -1;
    }
    l->ops = ops;
    l->index = m->n_layers;
    snprintf(l->origin, sizeof l->origin, "%s", where);
    if (name && *name)
        snprintf(l->name, sizeof l->name, "%s", name);
    else
        snprintf(l->name, sizeof l->name, "%s%d", type, m->n_layers);
    l->cfg = calloc(1, ops->cfg_size ? ops->cfg_size : 1);
    l->n_in = n_inputs;
    l->in_ids = malloc(sizeof(int) * n_inputs);
    l->in = calloc(n_inputs, sizeof(dtnn_shape));
    l->x = calloc(n_inputs, sizeof(float *));
    l->dx = calloc(n_inputs, sizeof(float *));
    l->dx_accumulate = calloc(n_inputs, sizeof(int));
    if (!l->cfg || !l->in_ids || !l->in || !l->x || !l->dx || !l->dx_accumulate) {
        layer_free(l);
        dtnn_error_set(err, DTNN_ERR_NOMEM, "out of memory adding layer '%s'", type);
        return -1;
    }
    memcpy(l->in_ids, inputs, sizeof(int) * n_inputs);
    if (!valid_name(l->name) || dtnn_model_find(m, l->name) >= 0) {
        dtnn_error_set(err, DTNN_ERR_ARG, "%s%slayer name '%s' is %s", where, sep, l->name,
                       valid_name(l->name) ? "used twice" :
                       "not valid (letters, digits, '_', '.' and '-')");
        layer_free(l);
        return -1;
    }
    if (ops->defaults)
        ops->defaults(l->cfg);
    for (int i = 0; i < n_options; i++) {
        dtnn_error e;
        if (ops->set(l->cfg, keys[i], values[i], &e) != DTNN_OK) {
            dtnn_error_set(err, e.code, "%s%slayer '%s' (%s): %s", where, sep, l->name, type,
                           e.message);
            layer_free(l);
            return -1;
        }
    }
    if (m->n_layers == m->cap) {
        int cap = m->cap ? 2 * m->cap : 16;
        layer **nl = realloc(m->layers, sizeof(layer *) * cap);
        if (!nl) {
            layer_free(l);
            dtnn_error_set(err, DTNN_ERR_NOMEM, "out of memory adding layer '%s'", type);
            return -1;
        }
        m->layers = nl;
        m->cap = cap;
    }
    m->layers[m->n_layers] = l;
    if (name_index_add(&m->layer_index, m->n_layers)) {
        layer_free(l);
        dtnn_error_set(err, DTNN_ERR_NOMEM, "out of memory adding layer '%s'", type);
        return -1;
    }
    m->n_layers++;
    return l->index;
}

int dtnn_model_add(dtnn_model *m, const char *type, const char *name, const char *options,
                   const int *inputs, int n_inputs, dtnn_error *err)
{
    enum { MAX_OPTS = 32 };
    char buf[1024];
    const char *keys[MAX_OPTS], *values[MAX_OPTS];
    int n = 0;
    snprintf(buf, sizeof buf, "%s", options ? options : "");
    for (char *tok = strtok(buf, " \t\n"); tok; tok = strtok(NULL, " \t\n")) {
        char *eq = strchr(tok, '=');
        if (!eq || eq == tok || n == MAX_OPTS) {
            dtnn_error_set(err, DTNN_ERR_ARG, "layer '%s': option '%s' is not key=value",
                           name ? name : type, tok);
            return -1;
        }
        *eq = '\0';
        keys[n] = tok;
        values[n++] = eq + 1;
    }
    return model_add_layer(m, type, name, keys, values, n, inputs, n_inputs, NULL, err);
}

static float init_value(dtnn_rng *rng, const layer_tensor *t, dtnn_init_scheme scheme)
{
    switch (t->init) {
    case INIT_ONES:
        return 1.0f;
    case INIT_WEIGHT:
        if (scheme == DTNN_INIT_HE)
            return (float)(dtnn__rng_normal(rng) * sqrt(2.0 / t->fan_in));
        if (scheme == DTNN_INIT_XAVIER) {
            double b = sqrt(6.0 / (t->fan_in + t->fan_out));
            return (float)((2.0 * dtnn__rng_uniform(rng) - 1.0) * b);
        }
        /* PyTorch: kaiming_uniform_(a = sqrt(5)) gives bound = 1 / sqrt(fan_in). */
        return (float)((2.0 * dtnn__rng_uniform(rng) - 1.0) / sqrt(t->fan_in));
    case INIT_BIAS:
        if (scheme != DTNN_INIT_DEFAULT)
            return 0.0f;
        return (float)((2.0 * dtnn__rng_uniform(rng) - 1.0) / sqrt(t->fan_in));
    case INIT_FILL:
        return t->fill;
    case INIT_ZEROS:
    case INIT_NONE:
        break;
    }
    return 0.0f;
}

/* Initialises in layer order from one seeded stream (the same seed gives the same model): each
 * tensor made on the host and uploaded. The I64 buffers stay as allocated, zero. */
static dtnn_status init_tensors(dtnn_model *m, const dtnn_build_params *p, dtnn_error *err)
{
    size_t largest = 0;
    for (int i = 0; i < m->n_tensors; i++)
        largest = DTNN_MAX(largest, m->tensors[i].count);
    float *v = malloc(sizeof(float) * DTNN_MAX(largest, 1));
    if (!v)
        return dtnn_error_set(err, DTNN_ERR_NOMEM, "out of memory initialising the model");
    dtnn_rng rng;
    dtnn__rng_seed(&rng, p->seed);
    for (int i = 0; i < m->n_layers; i++) {
        layer *l = m->layers[i];
        for (int k = 0; k < l->n_tensors; k++) {
            const dtnn_tensor_info *ti = &m->tensors[l->t[k].model_index];
            if (ti->dtype == DTNN_I64)
                continue;
            for (size_t j = 0; j < ti->count; j++)
                v[j] = init_value(&rng, &l->t[k], p->init);
            be_upload(m->be, l->p[k], v, sizeof(float) * ti->count);
        }
    }
    free(v);
    return DTNN_OK;
}

static dtnn_status build_error(const layer *l, dtnn_error *err)
{
    if (l->origin[0]) {
        char msg[sizeof err->message];
        snprintf(msg, sizeof msg, "%s", err->message);
        dtnn_error_set(err, err->code, "%s: %s", l->origin, msg);
    }
    return err->code;
}

/* Adds every tensor to the model table and computes offsets. */
/* Whether parameter `name` is frozen by one of p's patterns; counts each pattern's hits. */
static int frozen_by(const dtnn_build_params *p, const char *name, int *hits)
{
    int frozen = 0;
    for (int k = 0; k < p->n_freeze; k++)
        if (!fnmatch(p->freeze[k], name, 0)) {
            hits[k]++;
            frozen = 1;
        }
    return frozen;
}

/* Every pattern must freeze something, and something must train. */
static dtnn_status check_freeze(const dtnn_model *m, const dtnn_build_params *p, const int *hits,
                                dtnn_error *err)
{
    for (int k = 0; k < p->n_freeze; k++)
        if (!hits[k])
            return dtnn_error_set(err, DTNN_ERR_ARG, "--freeze '%s' matches no parameter of the "
                                  "model (its first is '%s', its last '%s'; `dtnn info "
                                  "--model M` lists them)", p->freeze[k],
                                  m->n_tensors ? m->tensors[0].name : "",
                                  m->n_tensors ? m->tensors[m->n_tensors - 1].name : "");
    if (p->training && p->n_freeze && m->n_params && !m->n_trainable)
        return dtnn_error_set(err, DTNN_ERR_ARG, "--freeze leaves no parameter to train (all "
                              "%zu are frozen)", m->n_params);
    return DTNN_OK;
}

/* The named layout. Trainable parameters come first in the flat buffer, in layer order, the
 * frozen ones after them, so the gradient buffer (and with it the all-reduce and the
 * optimizer state) covers the trainable ones only, at the same offsets. */
static dtnn_status plan_tensors(dtnn_model *m, const dtnn_build_params *p, dtnn_error *err)
{
    int total = 0;
    for (int i = 0; i < m->n_layers; i++)
        total += m->layers[i]->n_tensors;
    m->tensors = calloc(total ? total : 1, sizeof *m->tensors);
    int *hits = calloc(p->n_freeze > 0 ? (size_t)p->n_freeze : 1, sizeof *hits);
    if (!m->tensors || !hits) {
        free(hits);
        return dtnn_error_set(err, DTNN_ERR_NOMEM, "out of memory planning tensors");
    }
    size_t boff = 0;
    for (int i = 0; i < m->n_layers; i++) {
        layer *l = m->layers[i];
        for (int k = 0; k < l->n_tensors; k++) {
            layer_tensor *t = &l->t[k];
            dtnn_tensor_info *ti = &m->tensors[m->n_tensors];
            size_t len = strlen(l->name) + strlen(t->suffix) + 2;
            char *nm = malloc(len);
            if (!nm) {
                free(hits);
                return dtnn_error_set(err, DTNN_ERR_NOMEM, "out of memory planning tensors");
            }
            snprintf(nm, len, "%s.%s", l->name, t->suffix);
            ti->name = nm;
            ti->kind = t->kind;
            ti->dtype = t->dtype;
            ti->ndim = t->ndim;
            ti->count = 1;
            for (int d = 0; d < t->ndim; d++) {
                ti->dims[d] = t->dims[d];
                ti->count *= (size_t)t->dims[d];
            }
            if (t->kind == DTNN_TENSOR_PARAM) {
                DTNN_ASSERT(t->dtype == DTNN_F32);
                ti->frozen = frozen_by(p, nm, hits);
            } else {
                ti->offset = boff;
                boff += dtnn__round_up(ti->count * (t->dtype == DTNN_I64 ? 8 : 4), 64);
            }
            if (name_index_find(&m->tensor_index, nm) < 0 &&
                name_index_add(&m->tensor_index, m->n_tensors)) {
                free(hits);
                return dtnn_error_set(err, DTNN_ERR_NOMEM, "out of memory planning tensors");
            }
            t->model_index = m->n_tensors++;
        }
    }
    size_t poff = 0;
    for (int frozen = 0; frozen <= 1; frozen++) {
        for (int i = 0; i < m->n_tensors; i++) {
            dtnn_tensor_info *ti = &m->tensors[i];
            if (ti->kind != DTNN_TENSOR_PARAM || ti->frozen != frozen)
                continue;
            ti->offset = poff;
            poff += dtnn__round_up(ti->count, 16); /* 64-byte aligned views */
            m->n_params += ti->count;
            if (!frozen)
                m->n_trainable += ti->count;
        }
        if (!frozen)
            m->n_grads = poff;
    }
    m->n_params_padded = poff;
    m->buffer_bytes = boff;
    dtnn_status st = check_freeze(m, p, hits, err);
    free(hits);
    return st;
}

/* Shapes, in topological order: every layer's inputs, then its infer(). */
static dtnn_status infer_shapes(dtnn_model *m, dtnn_error *err)
{
    for (int i = 0; i < m->n_layers; i++) {
        layer *l = m->layers[i];
        for (int k = 0; k < l->n_in; k++)
            l->in[k] = l->in_ids[k] == DTNN_INPUT ? m->input : m->layers[l->in_ids[k]]->out;
        l->build = &m->bp;
        l->be = m->be;
        l->n_tensors = 0;
        if (l->ops->infer(l, err) != DTNN_OK) {
            char msg[sizeof err->message];
            snprintf(msg, sizeof msg, "%s", err->message);
            dtnn_error_set(err, err->code, "layer '%s' (%s): %s", l->name, l->ops->type, msg);
            return build_error(l, err);
        }
        if (shape_size(l->out) == 0) {
            dtnn_error_set(err, DTNN_ERR_SHAPE, "layer '%s' (%s): output shape %dx%dx%d is empty",
                           l->name, l->ops->type, l->out.c, l->out.h, l->out.w);
            return build_error(l, err);
        }
    }
    /* Every output but the last must be consumed, or its gradient would be undefined. */
    for (int i = 0; i < m->n_layers - 1; i++) {
        int used = 0;
        for (int j = i + 1; j < m->n_layers && !used; j++)
            for (int k = 0; k < m->layers[j]->n_in; k++)
                used |= m->layers[j]->in_ids[k] == i;
        if (!used) {
            dtnn_error_set(err, DTNN_ERR_ARG, "layer '%s' (%s): its output is used by no later "
                           "layer (only the last layer may be the model output)",
                           m->layers[i]->name, m->layers[i]->ops->type);
            return build_error(m->layers[i], err);
        }
    }
    return DTNN_OK;
}

/* Every buffer of the plan, from the backend. */
static dtnn_status allocate(dtnn_model *m, const dtnn_build_params *p, const memory_plan *mp,
                            dtnn_error *err)
{
    dtnn_backend *be = m->be;
    m->params = be_alloc(be, sizeof(float) * m->n_params_padded);
    m->grads = p->training ? be_alloc(be, sizeof(float) * m->n_grads) : NULL;
    m->buffers = be_alloc(be, m->buffer_bytes);
    m->activations = be_alloc(be, sizeof(float) * mp->act_floats);
    m->aux = be_alloc(be, mp->aux_bytes);
    m->workspace = be_alloc(be, mp->workspace);
    if (p->training && p->input_grad)
        m->input_grad = be_alloc(be, sizeof(float) * shape_size(m->input) * p->max_batch);
    /* A host backend reads the caller's batch where it is; a device gets it uploaded. */
    if (!be->host_memory)
        m->input_buf = be_alloc(be, sizeof(float) * shape_size(m->input) * p->max_batch);
    /* Twice the batch: a mixed batch's partner labels follow its own (dtnn_model_loss_mixed). */
    m->labels = be_alloc(be, 2 * sizeof(int32_t) * (size_t)p->max_batch);
    m->loss_out = be_alloc(be, 3 * sizeof(double));
    m->workspace_bytes = mp->workspace;
    m->activation_bytes = sizeof(float) * mp->act_floats + mp->aux_bytes + mp->workspace;
    if (!m->params || (p->training && !m->grads) || !m->buffers || !m->activations || !m->aux ||
        !m->workspace || (p->training && p->input_grad && !m->input_grad) ||
        (!be->host_memory && !m->input_buf) || !m->labels || !m->loss_out)
        return dtnn_error_set(err, DTNN_ERR_NOMEM,
                              "out of memory: the model needs %.1f MiB of parameters and "
                              "%.1f MiB of activations and workspace at batch %d",
                              (double)(m->n_params_padded + (p->training ? m->n_grads : 0)) *
                                  4 / 1048576.0,
                              (double)m->activation_bytes / 1048576.0, p->max_batch);
    return DTNN_OK;
}

/* Reverse order: the first gradient to reach a producer writes, later ones add. */
static dtnn_status set_gradient_order(dtnn_model *m, dtnn_error *err)
{
    char *seen = calloc(m->n_layers + 1, 1); /* slot n_layers: the model input */
    if (!seen)
        return dtnn_error_set(err, DTNN_ERR_NOMEM, "out of memory");
    for (int i = m->n_layers - 1; i >= 0; i--) {
        layer *l = m->layers[i];
        for (int k = 0; k < l->n_in; k++) {
            int src = l->in_ids[k] == DTNN_INPUT ? m->n_layers : l->in_ids[k];
            l->dx_accumulate[k] = seen[src];
            seen[src] = 1;
        }
    }
    free(seen);
    return DTNN_OK;
}

dtnn_status dtnn_model_build(dtnn_model *m, const dtnn_build_params *p, dtnn_error *err)
{
    if (m->built || m->be)
        return dtnn_error_set(err, DTNN_ERR_ARG, "model is already built%s",
                              m->built ? "" : " (or its build failed: make a new one)");
    if (m->n_layers == 0)
        return dtnn_error_set(err, DTNN_ERR_ARG, "model has no layers");
    if (p->max_batch <= 0)
        return dtnn_error_set(err, DTNN_ERR_ARG, "max_batch must be positive, got %d",
                              p->max_batch);
    m->bp = *p;
    /* The model keeps its own copy of the --freeze patterns (checkpoints name them). */
    m->bp.freeze = NULL;
    m->bp.n_freeze = 0;
    if (p->n_freeze > 0) {
        if (!(m->freeze = calloc((size_t)p->n_freeze, sizeof *m->freeze)))
            return dtnn_error_set(err, DTNN_ERR_NOMEM, "out of memory");
        for (int i = 0; i < p->n_freeze; i++, m->bp.n_freeze++)
            if (!(m->freeze[i] = dtnn__strdup(p->freeze[i])))
                return dtnn_error_set(err, DTNN_ERR_NOMEM, "out of memory");
        m->bp.freeze = (const char *const *)m->freeze;
    }
    if (!m->bp.workspace_limit)
        m->bp.workspace_limit = (size_t)64 << 20;
    if (!dtnn_precision_name(p->precision))
        return dtnn_error_set(err, DTNN_ERR_ARG, "precision %d is neither DTNN_PRECISION_FP32 "
                              "nor DTNN_PRECISION_BF16", (int)p->precision);
    if (!(m->be = dtnn__backend_create(p->device, p->threads, err)))
        return err->code;
    memory_plan mp;
    memset(&mp, 0, sizeof mp);
    dtnn_status st;
    if ((st = infer_shapes(m, err)) || (st = plan_tensors(m, &m->bp, err)) ||
        (st = model_plan_memory(m, p, &mp, err)) ||
        (st = model_check_memory(m, p, mp.act_floats, mp.aux_bytes, mp.workspace, err)) ||
        (st = allocate(m, p, &mp, err))) {
        model_memory_plan_free(&mp);
        return st;
    }
    model_set_views(m, p, &mp);
    model_memory_plan_free(&mp);
    if ((st = model_prefetch_alloc(m, err)))
        return st;
    if ((st = set_gradient_order(m, err)) || (st = init_tensors(m, p, err)))
        return st;
    m->seed = p->seed;
    m->built = 1;
    return DTNN_OK;
}

/* Synchronised batch norm's sums: buf [n] in backend memory and extra [n_extra] on the host,
 * reduced as one message through a host staging buffer (grown on first use, so a step
 * allocates nothing once the first has run). */
static dtnn_status reduce_over_ranks(void *user, double *buf, size_t n, double *extra,
                                     size_t n_extra)
{
    dtnn_model *m = user;
    dtnn_error err;
    if (n + n_extra > m->reduce_stage_len) {
        double *stage = realloc(m->reduce_stage, sizeof(double) * (n + n_extra));
        if (!stage)
            return DTNN_ERR_NOMEM;
        m->reduce_stage = stage;
        m->reduce_stage_len = n + n_extra;
    }
    double *stage = m->reduce_stage;
    be_download(m->be, stage, buf, sizeof(double) * n);
    for (size_t i = 0; i < n_extra; i++)
        stage[n + i] = extra[i];
    comm_set_purpose(m->sync_comm, "sync-BN statistics", -1, 0);
    dtnn_status st = dtnn_comm_allreduce_sum_f64(m->sync_comm, stage, n + n_extra, &err);
    be_upload(m->be, buf, stage, sizeof(double) * n);
    for (size_t i = 0; i < n_extra; i++)
        extra[i] = stage[n + i];
    return st;
}

void dtnn_model_set_sync_bn(dtnn_model *m, dtnn_comm *comm) { m->sync_comm = comm; }

static void layer_time(dtnn_model *m, layer *l, int backward)
{
    if (l->fused)
        return;     /* its producer did the work */
    const layer_ctx ctx = {m->be, m->workspace, m->workspace_bytes, m->training, m->seed,
                           m->step, m->sync_comm ? reduce_over_ranks : NULL, m};
    if (!m->profiling && !m->trace) {
        if (backward)
            l->ops->backward(l, &ctx);
        else
            l->ops->forward(l, &ctx);
        return;
    }
    /* a device queues its work: waiting before and after makes the span the layer's own */
    be_sync(m->be);
    double t0 = dtnn__now();
    if (backward)
        l->ops->backward(l, &ctx);
    else
        l->ops->forward(l, &ctx);
    be_sync(m->be);
    trace_span(m->trace, backward ? TRACE_LAYER_BWD : TRACE_LAYER_FWD, l->name, t0, -1);
    if (!m->profiling)
        return;
    double dt = dtnn__now() - t0;
    if (backward)
        l->seconds_bwd += dt;
    else
        l->seconds_fwd += dt;
}

dtnn_status dtnn_model_forward(dtnn_model *m, const float *x, int n, int training,
                               dtnn_error *err)
{
    if (!m->built)
        return dtnn_error_set(err, DTNN_ERR_ARG, "model is not built");
    if (n <= 0 || n > m->bp.max_batch)
        return dtnn_error_set(err, DTNN_ERR_ARG, "batch of %d samples: must be in [1, %d] "
                              "(the max_batch the model was built for)", n, m->bp.max_batch);
    if (training && !m->bp.training)
        return dtnn_error_set(err, DTNN_ERR_ARG, "model was built for inference only");
    m->training = training;
    m->n = n;
    m->forward_done = 0;
    if (!m->be->host_memory)
        x = model_prefetch_input(m, x, n);
    /* every layer's batch and inputs first: a batch norm doing an add reads the add's */
    for (int i = 0; i < m->n_layers; i++) {
        layer *l = m->layers[i];
        l->n = n;
        for (int k = 0; k < l->n_in; k++)
            if (l->in_ids[k] == DTNN_INPUT)
                l->x[k] = x;
    }
    double t0 = trace_clock(m->trace);
    for (int i = 0; i < m->n_layers; i++)
        layer_time(m, m->layers[i], 0);
    trace_span(m->trace, TRACE_FORWARD, training ? "forward" : "forward (eval)", t0, -1);
    if (!training)
        model_prefetch_release(m);  /* the input is read again only by a backward */
    dtnn_status st = be_check(m->be, err);     /* a device's failed operation, if any */
    if (!st)
        st = model_layers_failure(m, err);
    m->forward_done = st == DTNN_OK;
    m->loss_done = 0;
    return st;
}

void dtnn_model_output_shape(const dtnn_model *m, int *n, int *classes)
{
    if (n)
        *n = m->n;
    if (classes)
        *classes = (int)shape_size(m->layers[m->n_layers - 1]->out);
}

dtnn_status dtnn_model_backward(dtnn_model *m, dtnn_error *err)
{
    if (!m->bp.training)
        return dtnn_error_set(err, DTNN_ERR_ARG, "model was built for inference only");
    if (!m->forward_done || !m->training || !m->loss_done)
        return dtnn_error_set(err, DTNN_ERR_ARG,
                              "backward needs a training-mode forward and a loss first");
    size_t ready_from = m->n_grads;
    double t0 = trace_clock(m->trace);
    for (int i = m->n_layers - 1; i >= 0; i--) {
        layer *l = m->layers[i];
        if (!l->no_backward)
            layer_time(m, l, 1);
        if (!m->hook)
            continue;
        for (int k = 0; k < l->n_tensors; k++) {
            const dtnn_tensor_info *ti = &m->tensors[l->t[k].model_index];
            if (ti->kind == DTNN_TENSOR_PARAM && !ti->frozen)
                ready_from = DTNN_MIN(ready_from, ti->offset);
        }
        m->hook(ready_from, m->hook_user);
    }
    trace_span(m->trace, TRACE_BACKWARD, "backward", t0, -1);
    model_prefetch_release(m);
    m->step++;
    dtnn_status st = be_check(m->be, err);
    return st ? st : model_layers_failure(m, err);
}

size_t dtnn_model_params_padded(const dtnn_model *m) { return m->n_params_padded; }
size_t dtnn_model_grads_length(const dtnn_model *m) { return m->n_grads; }
size_t dtnn_model_trainable_count(const dtnn_model *m) { return m->n_trainable; }

void dtnn_model_set_backward_hook(dtnn_model *m, dtnn_backward_hook fn, void *user)
{
    m->hook = fn;
    m->hook_user = user;
}
int64_t dtnn_model_step(const dtnn_model *m) { return m->step; }

void dtnn_model_sync(dtnn_model *m)
{
    if (m->be)
        be_sync(m->be);
}
void dtnn_model_set_step(dtnn_model *m, int64_t step) { m->step = step; }

void dtnn_model_zero_grad(dtnn_model *m)
{
    if (m->grads)
        be_zero(m->be, m->grads, sizeof(float) * m->n_grads);
}

int dtnn_model_tensor_count(const dtnn_model *m) { return m->n_tensors; }
const dtnn_tensor_info *dtnn_model_tensor(const dtnn_model *m, int i)
{
    return (i >= 0 && i < m->n_tensors) ? &m->tensors[i] : NULL;
}
const dtnn_tensor_info *dtnn_model_tensor_by_name(const dtnn_model *m, const char *name)
{
    int i = name_index_find(&m->tensor_index, name);
    return i >= 0 ? &m->tensors[i] : NULL;
}
size_t dtnn_model_param_count(const dtnn_model *m) { return m->n_params; }
const char *dtnn_model_device(const dtnn_model *m) { return m->be ? m->be->name : ""; }

size_t dtnn_model_buffer_bytes(const dtnn_model *m) { return m->buffer_bytes; }
int dtnn_model_layer_count(const dtnn_model *m) { return m->n_layers; }
size_t dtnn_model_activation_bytes(const dtnn_model *m) { return m->activation_bytes; }
void dtnn_model_set_trace(dtnn_model *m, dtnn_trace *t) { m->trace = t; }

void dtnn_model_set_profiling(dtnn_model *m, int on)
{
    m->profiling = on;
    for (int i = 0; i < m->n_layers; i++)
        m->layers[i]->seconds_fwd = m->layers[i]->seconds_bwd = 0;
}

void dtnn_model_input_shape(const dtnn_model *m, int *c, int *h, int *w)
{
    *c = m->input.c;
    *h = m->input.h;
    *w = m->input.w;
}

void dtnn_model_layer_info(const dtnn_model *m, int i, dtnn_layer_info *info)
{
    const layer *l = m->layers[i];
    memset(info, 0, sizeof *info);
    info->name = l->name;
    info->type = l->ops->type;
    info->method = !m->built ? "" : l->fused ? "fused" : l->ops->method ? l->ops->method(l) : "";
    info->c = l->out.c;
    info->h = l->out.h;
    info->w = l->out.w;
    if (m->built)
        for (int k = 0; k < l->n_tensors; k++)
            if (l->t[k].kind == DTNN_TENSOR_PARAM)
                info->params += m->tensors[l->t[k].model_index].count;
    info->flops = (m->built && l->ops->flops) ? l->ops->flops(l) : 0.0;
    info->seconds_fwd = l->seconds_fwd;
    info->seconds_bwd = l->seconds_bwd;
}


