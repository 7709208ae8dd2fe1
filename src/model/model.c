/*
 * model.c — a model is a list of layers in topological order (each layer names its producers),
 * built once: shapes inferred, every buffer planned and allocated, parameters initialised. After
 * that a training step allocates nothing.
 *
 * Memory plan: parameters, gradients (same layout) and batch-norm buffers each live in one
 * aligned flat buffer, laid out in layer order; every tensor has a PyTorch state_dict name
 * ("<layer name>.<suffix>"). Each layer owns its output array for max_batch samples, except
 * the ReLUs (and flattens) that write over their input's (plan_inplace); one scratch workspace
 * (the largest any layer asks for) is shared by all layers. A ReLU in place after a batch norm
 * or an add is done by that layer in the same pass (plan_fusion) and skipped, and so is a
 * two-input add after a batch norm (the batch norm does it and writes the add's output).
 * Backward visits layers in reverse; when an output feeds several layers, the first gradient to
 * arrive writes and the others add (dx_accumulate), so no gradient buffer is ever cleared.
 *
 * Output gradients share one pool (plan_gradient_pool): the gradient at layer i's output is
 * only alive from the backward of its last consumer to its own backward, so buffers whose
 * lifetimes do not overlap take the same memory. In a chain that is two buffers instead of one
 * per layer: about half of the activation memory of training.
 */
#include <math.h>
#include <string.h>
#include <unistd.h>

#include "../layers/layer.h"
#include "../core/rng.h"
#include "model_internal.h"

/* Which layers compute their output in their input's memory (alias[i] = the producer whose
 * output array layer i shares, else -1): see layer_ops.inplace. Returns nonzero when out of
 * memory. */
static int plan_inplace(const dtnn_model *m, int *alias)
{
    const int n = m->n_layers;
    int *consumers = calloc((size_t)n, sizeof(int));
    if (!consumers)
        return 1;
    for (int j = 0; j < n; j++)
        for (int k = 0; k < m->layers[j]->n_in; k++)
            if (m->layers[j]->in_ids[k] != DTNN_INPUT)
                consumers[m->layers[j]->in_ids[k]]++;
    for (int i = 0; i < n; i++) {
        const layer *l = m->layers[i];
        const int src = l->n_in == 1 ? l->in_ids[0] : DTNN_INPUT;
        alias[i] = -1;
        /* The model input is the caller's memory: never written. */
        if (!l->ops->inplace || src == DTNN_INPUT || consumers[src] != 1 ||
            m->layers[src]->ops->backward_reads_output ||
            (l->ops->inplace == LAYER_INPLACE && alias[src] >= 0))
            continue;
        alias[i] = alias[src] >= 0 ? alias[src] : src;
    }
    free(consumers);
    return 0;
}

extern const layer_ops layer_relu, layer_add, layer_batchnorm;

/* How many inputs of the layers strictly between `lo` and `hi` read the output of `id`. */
static int reads_between(const dtnn_model *m, int id, int lo, int hi)
{
    int reads = 0;
    for (int j = lo + 1; j < hi; j++)
        for (int k = 0; k < m->layers[j]->n_in; k++)
            reads += m->layers[j]->in_ids[k] == id;
    return reads;
}

/* A two-input add whose one input is a batch norm that feeds nothing else (ResNet's bn2 +
 * shortcut) is done by that batch norm: y = relu(bn(x) + residual), its ReLU too when fused
 * into the add; backward the batch norm passes the gradient to the residual. That saves the
 * batch norm's output going to memory and back (and backward the add's pass): ResNet-20's
 * batch norms and adds, forward + backward, 51-66 -> 47-61 ms a step (dtnn bench --profile,
 * batch 64, 1 thread, three alternating runs), peak RSS 142 -> 121 MB (the batch norm's
 * output is the add's). The residual's gradient is then written at the
 * batch norm's place in the backward order instead of the add's, so the residual must come
 * from before the batch norm and no layer between them may read it (the first gradient to
 * reach a producer writes, the later ones add). */
static void plan_residual_fusion(dtnn_model *m, int *first)
{
    for (int i = 0; i < m->n_layers; i++) {
        layer *a = m->layers[i];
        if (a->ops != &layer_add || a->n_in != 2)
            continue;
        for (int s = 0; s < 2; s++) {
            const int b_id = a->in_ids[s], r_id = a->in_ids[1 - s];
            if (b_id == DTNN_INPUT || r_id == b_id || (r_id != DTNN_INPUT && r_id > b_id))
                continue;
            layer *b = m->layers[b_id];
            /* the add is the batch norm's only reader */
            if (b->ops != &layer_batchnorm || b->relu_fused || b->residual_add ||
                reads_between(m, b_id, b_id, m->n_layers) != 1 ||
                (r_id != DTNN_INPUT && reads_between(m, r_id, b_id, i)))
                continue;
            b->residual_add = a;
            b->residual_slot = 1 - s;
            a->fused = 1;
            /* the add's output gradient, or that of the ReLU fused into it, is read by the
             * batch norm */
            for (int j = i; j < m->n_layers; j++)
                if (first[j] == i)
                    first[j] = b_id;
            break;
        }
    }
}

/* Which ReLUs their producer does (layer_ops.relu_epilogue): a ReLU running in place on the
 * output of a layer that can clamp it, unless the build asks for every layer on its own
 * (dtnn_build_params.unfused). first[i] is the lowest layer whose backward uses layer i's
 * output gradient: i, or for a fused ReLU its producer, which reads the ReLU's output gradient
 * as its own (so plan_gradient_pool keeps it alive until then). */
static void plan_fusion(dtnn_model *m, const int *alias, int *first)
{
    for (int i = 0; i < m->n_layers; i++) {
        m->layers[i]->relu_fused = m->layers[i]->fused = 0;
        m->layers[i]->residual_add = NULL;
        first[i] = i;
    }
    for (int i = 0; i < m->n_layers && !m->bp.unfused; i++) {
        layer *l = m->layers[i];
        if (l->ops != &layer_relu || alias[i] < 0 || alias[i] != l->in_ids[0])
            continue;
        layer *producer = m->layers[alias[i]];
        if (!producer->ops->relu_epilogue || producer->relu_fused)
            continue;
        producer->relu_fused = 1;
        l->fused = 1;
        first[i] = alias[i];
    }
    if (!m->bp.unfused)
        plan_residual_fusion(m, first);
}

/* Places each layer's output gradient (size[i] floats) in a shared pool: the gradient of layer
 * i is alive over the layers [first[i], last consumer of i] (backward runs from the last
 * consumer, which writes it first, down to first[i], which reads it last: i itself, or the
 * producer of a fused ReLU). Largest first, each at the lowest
 * offset that overlaps in memory no placed buffer alive at the same time: first-fit
 * interval colouring, O(n^2) for n layers, at build time only. Returns the pool's size in
 * floats, or SIZE_MAX when out of memory. */
static size_t plan_gradient_pool(const dtnn_model *m, const int *first, const size_t *size,
                                 size_t *offset)
{
    const int n = m->n_layers;
    int *last = malloc(sizeof(int) * (size_t)n), *order = malloc(sizeof(int) * (size_t)n);
    int *placed = malloc(sizeof(int) * (size_t)n);
    if (!last || !order || !placed) {
        free(last);
        free(order);
        free(placed);
        return SIZE_MAX;
    }
    for (int i = 0; i < n; i++) {
        last[i] = i;
        order[i] = i;
    }
    for (int j = 0; j < n; j++)
        for (int k = 0; k < m->layers[j]->n_in; k++)
            if (m->layers[j]->in_ids[k] != DTNN_INPUT)
                last[m->layers[j]->in_ids[k]] = DTNN_MAX(last[m->layers[j]->in_ids[k]], j);
    /* Largest first (ties: lower layer first, so the plan is deterministic). */
    for (int a = 1; a < n; a++) {
        int v = order[a], b = a;
        while (b > 0 && (size[order[b - 1]] < size[v] ||
                         (size[order[b - 1]] == size[v] && order[b - 1] > v))) {
            order[b] = order[b - 1];
            b--;
        }
        order[b] = v;
    }
    size_t pool = 0;
    for (int a = 0; a < n; a++) {
        const int i = order[a];
        /* The placed buffers alive with i, by offset; take the first gap that fits. */
        int live = 0;
        for (int b = 0; b < a; b++) {
            const int j = order[b];
            if (first[j] <= last[i] && first[i] <= last[j])
                placed[live++] = j;
        }
        for (int x = 1; x < live; x++) {
            int v = placed[x], y = x;
            while (y > 0 && offset[placed[y - 1]] > offset[v]) {
                placed[y] = placed[y - 1];
                y--;
            }
            placed[y] = v;
        }
        size_t at = 0;
        for (int b = 0; b < live; b++) {
            const int j = placed[b];
            if (offset[j] >= at + size[i])
                break;
            at = DTNN_MAX(at, offset[j] + size[j]);
        }
        offset[i] = at;
        pool = DTNN_MAX(pool, at + size[i]);
    }
    free(last);
    free(order);
    free(placed);
    return pool;
}

void dtnn_build_params_default(dtnn_build_params *p)
{
    memset(p, 0, sizeof *p);
    p->max_batch = 64;
    p->training = 1;
    p->seed = 42;
    p->init = DTNN_INIT_DEFAULT;
    p->workspace_limit = (size_t)64 << 20;
}

dtnn_model *dtnn_model_create(int c, int h, int w)
{
    if (c <= 0 || h <= 0 || w <= 0)
        return NULL;
    dtnn_model *m = calloc(1, sizeof *m);
    if (!m)
        return NULL;
    m->input = (dtnn_shape){c, h, w};
    m->be = dtnn_backend_cpu();
    return m;
}

static void layer_free(layer *l)
{
    if (!l)
        return;
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
    for (int i = 0; i < m->n_tensors; i++)
        free((char *)m->tensors[i].name);
    free(m->tensors);
    dtnn_free_aligned(m->params);
    dtnn_free_aligned(m->grads);
    dtnn_free_aligned(m->buffers);
    dtnn_free_aligned(m->activations);
    dtnn_free_aligned(m->input_grad);
    dtnn_free_aligned(m->aux);
    dtnn_free_aligned(m->workspace);
    free(m);
}

int dtnn_model_find(const dtnn_model *m, const char *name)
{
    for (int i = 0; i < m->n_layers; i++)
        if (!strcmp(m->layers[i]->name, name))
            return i;
    return -2;
}

static int valid_name(const char *s)
{
    if (!*s || *s == '.')
        return 0;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
              *s == '_' || *s == '.'))
            return 0;
    return 1;
}

int model_add_layer(dtnn_model *m, const char *type, const char *name, const char *const *keys,
                    const char *const *values, int n_options, const int *inputs, int n_inputs,
                    const char *origin, dtnn_error *err)
{
    const char *where = origin ? origin : "";
    const char *sep = origin ? ": " : "";
    if (m->built) {
        dtnn_error_set(err, DTNN_ERR_ARG, "%s%scannot add layers to a model already built",
                       where, sep);
        return -1;
    }
    const layer_ops *ops = layer_ops_find(type);
    if (!ops) {
        dtnn_error_set(err, DTNN_ERR_ARG, "%s%sunknown layer type '%s' (dtnn models --layers "
                       "lists them)", where, sep, type);
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
                       "not valid (letters, digits, '_' and '.')");
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
    m->layers[m->n_layers++] = l;
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
            return (float)(dtnn_rng_normal(rng) * sqrt(2.0 / t->fan_in));
        if (scheme == DTNN_INIT_XAVIER) {
            double b = sqrt(6.0 / (t->fan_in + t->fan_out));
            return (float)((2.0 * dtnn_rng_uniform(rng) - 1.0) * b);
        }
        /* PyTorch: kaiming_uniform_(a = sqrt(5)) gives bound = 1 / sqrt(fan_in). */
        return (float)((2.0 * dtnn_rng_uniform(rng) - 1.0) / sqrt(t->fan_in));
    case INIT_BIAS:
        if (scheme != DTNN_INIT_DEFAULT)
            return 0.0f;
        return (float)((2.0 * dtnn_rng_uniform(rng) - 1.0) / sqrt(t->fan_in));
    case INIT_ZEROS:
    case INIT_NONE:
        break;
    }
    return 0.0f;
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
static dtnn_status plan_tensors(dtnn_model *m, dtnn_error *err)
{
    int total = 0;
    for (int i = 0; i < m->n_layers; i++)
        total += m->layers[i]->n_tensors;
    m->tensors = calloc(total ? total : 1, sizeof *m->tensors);
    if (!m->tensors)
        return dtnn_error_set(err, DTNN_ERR_NOMEM, "out of memory planning tensors");
    size_t poff = 0, boff = 0;
    for (int i = 0; i < m->n_layers; i++) {
        layer *l = m->layers[i];
        for (int k = 0; k < l->n_tensors; k++) {
            layer_tensor *t = &l->t[k];
            dtnn_tensor_info *ti = &m->tensors[m->n_tensors];
            size_t len = strlen(l->name) + strlen(t->suffix) + 2;
            char *nm = malloc(len);
            if (!nm)
                return dtnn_error_set(err, DTNN_ERR_NOMEM, "out of memory planning tensors");
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
                ti->offset = poff;
                poff += dtnn_round_up(ti->count, 16); /* 64-byte aligned views */
            } else {
                ti->offset = boff;
                boff += dtnn_round_up(ti->count * (t->dtype == DTNN_I64 ? 8 : 4), 64);
            }
            t->model_index = m->n_tensors++;
        }
    }
    m->n_params_padded = poff;
    m->buffer_bytes = boff;
    for (int i = 0; i < m->n_tensors; i++)
        if (m->tensors[i].kind == DTNN_TENSOR_PARAM)
            m->n_params += m->tensors[i].count;
    return DTNN_OK;
}

size_t dtnn_memory_available(void)
{
    size_t avail = 0;
    FILE *f = fopen("/proc/meminfo", "r");
    char line[256];
    while (f && fgets(line, sizeof line, f)) {
        unsigned long long kb;
        if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1)
            avail = (size_t)kb * 1024;
    }
    if (f)
        fclose(f);
    if (!avail) {
        long pages = sysconf(_SC_AVPHYS_PAGES), page = sysconf(_SC_PAGESIZE);
        avail = pages > 0 && page > 0 ? (size_t)pages * (size_t)page : SIZE_MAX;
    }
    /* A cgroup v2 limit (containers, batch schedulers) caps what this process may take. */
    unsigned long long limit = 0, used = 0;
    f = fopen("/sys/fs/cgroup/memory.max", "r");
    int has_limit = f && fscanf(f, "%llu", &limit) == 1;
    if (f)
        fclose(f);
    f = fopen("/sys/fs/cgroup/memory.current", "r");
    if (f && fscanf(f, "%llu", &used) != 1)
        used = 0;
    if (f)
        fclose(f);
    if (has_limit && limit > used)
        avail = DTNN_MIN(avail, (size_t)(limit - used));
    return avail;
}

void dtnn_model_memory(const dtnn_model *m, dtnn_memory *out) { *out = m->memory; }

/* Adds up what the model will allocate (and the optimizer after it) and refuses, before any
 * of it is allocated, what does not fit: an error now instead of the OOM killer later. */
static dtnn_status check_memory(dtnn_model *m, const dtnn_build_params *p, size_t act_floats,
                                size_t aux_bytes, size_t ws, dtnn_error *err)
{
    dtnn_memory *mem = &m->memory;
    const size_t param_bytes = sizeof(float) * m->n_params_padded;
    mem->params = param_bytes;
    mem->grads = p->training ? param_bytes : 0;
    mem->optimizer = p->training ? param_bytes * (size_t)DTNN_MAX(p->optimizer_slots, 0) : 0;
    mem->buffers = m->buffer_bytes;
    mem->activations = sizeof(float) * act_floats + aux_bytes +
                       (p->training && p->input_grad
                            ? sizeof(float) * shape_size(m->input) * p->max_batch
                            : 0);
    mem->workspace = ws;
    mem->total = mem->params + mem->grads + mem->optimizer + mem->buffers + mem->activations +
                 mem->workspace;
    size_t limit = p->memory_limit ? p->memory_limit : dtnn_memory_available();
    if (mem->total <= limit)
        return DTNN_OK;
    const double gib = 1024.0 * 1024.0 * 1024.0;
    return dtnn_error_set(err, DTNN_ERR_NOMEM, "the model needs %.2f GiB at batch %d "
                          "(parameters %.2f, gradients %.2f, optimizer state %.2f, activations "
                          "%.2f, workspace %.2f GiB) but %.2f GiB is available%s: lower the "
                          "batch size", (double)mem->total / gib, p->max_batch,
                          (double)mem->params / gib, (double)mem->grads / gib,
                          (double)mem->optimizer / gib, (double)mem->activations / gib,
                          (double)mem->workspace / gib, (double)limit / gib,
                          p->memory_limit ? " (the memory limit given)" : "");
}

dtnn_status dtnn_model_build(dtnn_model *m, const dtnn_build_params *p, dtnn_error *err)
{
    if (m->built)
        return dtnn_error_set(err, DTNN_ERR_ARG, "model is already built");
    if (m->n_layers == 0)
        return dtnn_error_set(err, DTNN_ERR_ARG, "model has no layers");
    if (p->max_batch <= 0)
        return dtnn_error_set(err, DTNN_ERR_ARG, "max_batch must be positive, got %d",
                              p->max_batch);
    /* A DTNN_CPU the kernels cannot honour (unknown, or avx2 on a CPU without it) would
     * otherwise train on a set the user did not ask for. */
    const dtnn_status kernels = dtnn_cpu_kernels_check(err);
    if (kernels != DTNN_OK)
        return kernels;
    m->bp = *p;
    if (!m->bp.workspace_limit)
        m->bp.workspace_limit = (size_t)64 << 20;
    dtnn_set_threads(p->threads); /* also keeps the BLAS single-threaded: see gemm_blas.c */

    /* Shapes, in topological order. */
    for (int i = 0; i < m->n_layers; i++) {
        layer *l = m->layers[i];
        for (int k = 0; k < l->n_in; k++)
            l->in[k] = l->in_ids[k] == DTNN_INPUT ? m->input : m->layers[l->in_ids[k]]->out;
        l->max_batch = p->max_batch;
        l->workspace_limit = m->bp.workspace_limit;
        l->conv_algo = m->bp.conv_algo;
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

    dtnn_status st = plan_tensors(m, err);
    if (st)
        return st;
    size_t act_floats = 0, aux_bytes = 0, ws = 0;
    size_t *grad_size = calloc((size_t)m->n_layers, sizeof(size_t));
    size_t *grad_offset = calloc((size_t)m->n_layers, sizeof(size_t));
    if (!grad_size || !grad_offset) {
        free(grad_size);
        free(grad_offset);
        return dtnn_error_set(err, DTNN_ERR_NOMEM, "out of memory");
    }
    int *alias = calloc((size_t)m->n_layers, sizeof(int));
    int *first = calloc((size_t)m->n_layers, sizeof(int));
    if (!alias || !first || plan_inplace(m, alias)) {
        free(alias);
        free(first);
        free(grad_size);
        free(grad_offset);
        return dtnn_error_set(err, DTNN_ERR_NOMEM, "out of memory");
    }
    plan_fusion(m, alias, first);
    for (int i = 0; i < m->n_layers; i++) {
        layer *l = m->layers[i];
        size_t sz = dtnn_round_up(shape_size(l->out) * (size_t)p->max_batch, 16);
        /* a batch norm doing an add writes the add's output, and has none of its own */
        act_floats += alias[i] < 0 && !l->residual_add ? sz : 0;
        /* a fused ReLU's producer takes the ReLU's output gradient instead of its own, and a
         * batch norm doing an add that add's (or its ReLU's) */
        grad_size[i] = l->relu_fused || l->residual_add ? 0 : sz;
        aux_bytes += dtnn_round_up(l->aux_bytes * (size_t)p->max_batch + l->aux_fixed_bytes, 64);
        ws = DTNN_MAX(ws, l->workspace_bytes);
    }
    const size_t outputs_floats = act_floats;
    if (p->training) {
        size_t pool = plan_gradient_pool(m, first, grad_size, grad_offset);
        if (pool == SIZE_MAX) {
            free(alias);
            free(first);
            free(grad_size);
            free(grad_offset);
            return dtnn_error_set(err, DTNN_ERR_NOMEM, "out of memory");
        }
        act_floats += pool;
    }
    free(grad_size);
    if ((st = check_memory(m, p, act_floats, aux_bytes, ws, err))) {
        free(alias);
        free(first);
        free(grad_offset);
        return st;
    }
    m->params = dtnn_alloc_aligned(sizeof(float) * m->n_params_padded);
    m->grads = p->training ? dtnn_alloc_aligned(sizeof(float) * m->n_params_padded) : NULL;
    m->buffers = dtnn_alloc_aligned(m->buffer_bytes);
    m->activations = dtnn_alloc_aligned(sizeof(float) * act_floats);
    m->aux = dtnn_alloc_aligned(aux_bytes);
    m->workspace = dtnn_alloc_aligned(ws);
    if (p->training && p->input_grad) {
        m->input_grad = dtnn_alloc_aligned(sizeof(float) * shape_size(m->input) * p->max_batch);
    }
    m->workspace_bytes = ws;
    m->activation_bytes = sizeof(float) * act_floats + aux_bytes + ws;
    if (!m->params || (p->training && !m->grads) || !m->buffers || !m->activations || !m->aux ||
        !m->workspace || (p->training && p->input_grad && !m->input_grad)) {
        free(alias);
        free(first);
        free(grad_offset);
        return dtnn_error_set(err, DTNN_ERR_NOMEM,
                              "out of memory: the model needs %.1f MiB of parameters and "
                              "%.1f MiB of activations and workspace at batch %d",
                              (double)m->n_params_padded * 4 * (p->training ? 2 : 1) / 1048576.0,
                              (double)m->activation_bytes / 1048576.0, p->max_batch);
    }

    /* Views. */
    float *act = m->activations;
    unsigned char *aux = m->aux;
    for (int i = 0; i < m->n_layers; i++) {
        layer *l = m->layers[i];
        size_t sz = dtnn_round_up(shape_size(l->out) * (size_t)p->max_batch, 16);
        if (alias[i] >= 0) {
            l->y = m->layers[alias[i]]->y;
        } else if (l->residual_add) {
            l->y = NULL;    /* the add's, below */
        } else {
            l->y = act;
            act += sz;
        }
        l->dy = p->training ? m->activations + outputs_floats + grad_offset[i] : NULL;
        l->aux = aux;
        aux += dtnn_round_up(l->aux_bytes * (size_t)p->max_batch + l->aux_fixed_bytes, 64);
        for (int k = 0; k < l->n_tensors; k++) {
            const dtnn_tensor_info *ti = &m->tensors[l->t[k].model_index];
            if (ti->kind == DTNN_TENSOR_PARAM) {
                l->p[k] = m->params + ti->offset;
                l->g[k] = m->grads ? m->grads + ti->offset : NULL;
            } else {
                l->p[k] = m->buffers + ti->offset;
                l->g[k] = NULL;
            }
        }
        for (int k = 0; k < l->n_in; k++) {
            int src = l->in_ids[k];
            l->x[k] = src == DTNN_INPUT ? NULL : m->layers[src]->y;
            if (!p->training)
                l->dx[k] = NULL;
            else
                l->dx[k] = src == DTNN_INPUT ? m->input_grad : m->layers[src]->dy;
        }
    }
    for (int i = 0; i < m->n_layers; i++) {
        layer *l = m->layers[i];
        if (l->residual_add) {
            l->y = l->residual_add->y;
            l->residual_add->x[1 - l->residual_slot] = l->y;
        }
    }
    /* A fused ReLU's output gradient is read by its producer's backward. */
    for (int i = 0; i < m->n_layers && p->training; i++)
        if (m->layers[i]->fused)
            m->layers[first[i]]->dy = m->layers[i]->dy;
    free(grad_offset);
    free(alias);
    free(first);
    /* Reverse order: the first gradient to reach a producer writes, later ones add. */
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

    /* Initialise in layer order from one seeded stream: the same seed gives the same model. */
    dtnn_rng rng;
    dtnn_rng_seed(&rng, p->seed);
    for (int i = 0; i < m->n_layers; i++) {
        layer *l = m->layers[i];
        for (int k = 0; k < l->n_tensors; k++) {
            const dtnn_tensor_info *ti = &m->tensors[l->t[k].model_index];
            if (ti->dtype == DTNN_I64) {
                memset(l->p[k], 0, ti->count * 8);
                continue;
            }
            float *v = l->p[k];
            for (size_t j = 0; j < ti->count; j++)
                v[j] = init_value(&rng, &l->t[k], p->init);
        }
    }
    m->seed = p->seed;
    m->built = 1;
    return DTNN_OK;
}

static dtnn_status reduce_over_ranks(void *user, double *buf, size_t n)
{
    dtnn_error err;
    return dtnn_comm_allreduce_sum_f64(user, buf, n, &err);
}

void dtnn_model_set_sync_bn(dtnn_model *m, dtnn_comm *comm) { m->sync_comm = comm; }

static void layer_time(dtnn_model *m, layer *l, int backward)
{
    if (l->fused)
        return;     /* its producer did the work */
    const layer_ctx ctx = {m->be, m->workspace, m->workspace_bytes, m->training, m->seed,
                           m->step, m->sync_comm ? reduce_over_ranks : NULL, m->sync_comm};
    if (!m->profiling) {
        if (backward)
            l->ops->backward(l, &ctx);
        else
            l->ops->forward(l, &ctx);
        return;
    }
    double t0 = dtnn_now();
    if (backward)
        l->ops->backward(l, &ctx);
    else
        l->ops->forward(l, &ctx);
    double dt = dtnn_now() - t0;
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
    /* every layer's batch and inputs first: a batch norm doing an add reads the add's */
    for (int i = 0; i < m->n_layers; i++) {
        layer *l = m->layers[i];
        l->n = n;
        for (int k = 0; k < l->n_in; k++)
            if (l->in_ids[k] == DTNN_INPUT)
                l->x[k] = x;
    }
    for (int i = 0; i < m->n_layers; i++)
        layer_time(m, m->layers[i], 0);
    m->forward_done = 1;
    m->loss_done = 0;
    return DTNN_OK;
}

const float *dtnn_model_output(const dtnn_model *m, int *n, int *classes)
{
    const layer *last = m->layers[m->n_layers - 1];
    if (n)
        *n = m->n;
    if (classes)
        *classes = (int)shape_size(last->out);
    return last->y;
}

dtnn_status dtnn_model_backward(dtnn_model *m, dtnn_error *err)
{
    if (!m->bp.training)
        return dtnn_error_set(err, DTNN_ERR_ARG, "model was built for inference only");
    if (!m->forward_done || !m->training || !m->loss_done)
        return dtnn_error_set(err, DTNN_ERR_ARG,
                              "backward needs a training-mode forward and a loss first");
    size_t ready_from = m->n_params_padded;
    for (int i = m->n_layers - 1; i >= 0; i--) {
        layer *l = m->layers[i];
        layer_time(m, l, 1);
        if (!m->hook)
            continue;
        for (int k = 0; k < l->n_tensors; k++)
            if (l->t[k].kind == DTNN_TENSOR_PARAM)
                ready_from = DTNN_MIN(ready_from, m->tensors[l->t[k].model_index].offset);
        m->hook(ready_from, m->hook_user);
    }
    m->step++;
    return DTNN_OK;
}

float *dtnn_model_output_grad(dtnn_model *m)
{
    if (!m->built || !m->bp.training)
        return NULL;
    m->loss_done = 1;
    return m->layers[m->n_layers - 1]->dy;
}

const float *dtnn_model_input_grad(const dtnn_model *m) { return m->input_grad; }
size_t dtnn_model_params_padded(const dtnn_model *m) { return m->n_params_padded; }

void dtnn_model_set_backward_hook(dtnn_model *m, dtnn_backward_hook fn, void *user)
{
    m->hook = fn;
    m->hook_user = user;
}
int64_t dtnn_model_step(const dtnn_model *m) { return m->step; }
void dtnn_model_set_step(dtnn_model *m, int64_t step) { m->step = step; }

void dtnn_model_zero_grad(dtnn_model *m)
{
    if (m->grads)
        memset(m->grads, 0, sizeof(float) * m->n_params_padded);
}

int dtnn_model_tensor_count(const dtnn_model *m) { return m->n_tensors; }
const dtnn_tensor_info *dtnn_model_tensor(const dtnn_model *m, int i)
{
    return (i >= 0 && i < m->n_tensors) ? &m->tensors[i] : NULL;
}
const dtnn_tensor_info *dtnn_model_tensor_by_name(const dtnn_model *m, const char *name)
{
    for (int i = 0; i < m->n_tensors; i++)
        if (!strcmp(m->tensors[i].name, name))
            return &m->tensors[i];
    return NULL;
}
size_t dtnn_model_param_count(const dtnn_model *m) { return m->n_params; }
float *dtnn_model_params(dtnn_model *m) { return m->params; }
float *dtnn_model_grads(dtnn_model *m) { return m->grads; }
unsigned char *dtnn_model_buffers(dtnn_model *m) { return m->buffers; }
size_t dtnn_model_buffer_bytes(const dtnn_model *m) { return m->buffer_bytes; }
int dtnn_model_layer_count(const dtnn_model *m) { return m->n_layers; }
size_t dtnn_model_activation_bytes(const dtnn_model *m) { return m->activation_bytes; }
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


static int all_finite(const float *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isfinite(v[i]))
            return 0;
    return 1;
}

int dtnn_model_grads_finite(const dtnn_model *m)
{
    return all_finite(m->grads, m->n_params_padded);
}

int dtnn_model_find_nonfinite(const dtnn_model *m, char *where, size_t len)
{
    /* Forward order for outputs: the first layer whose output went bad is where it began. */
    for (int i = 0; m->forward_done && i < m->n_layers; i++) {
        const layer *l = m->layers[i];
        if (l->y && !all_finite(l->y, shape_size(l->out) * (size_t)m->n)) {
            snprintf(where, len, "the output of layer '%s' (%s)", l->name, l->ops->type);
            return 1;
        }
    }
    /* Then the parameter gradients in backward order (the output layer's first). The output
     * gradients between layers cannot tell more: they share memory (plan_gradient_pool), so
     * after backward each holds whatever the last layer to use it wrote. A non-finite value
     * born in a layer without parameters shows in the next parameter gradient backward. */
    for (int i = m->n_tensors - 1; i >= 0; i--) {
        const dtnn_tensor_info *t = &m->tensors[i];
        if (t->kind == DTNN_TENSOR_PARAM && !all_finite(m->grads + t->offset, t->count)) {
            snprintf(where, len, "the gradient of '%s'", t->name);
            return 1;
        }
    }
    return 0;
}
