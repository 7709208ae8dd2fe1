/*
 * model_plan.c — the memory plan of a model build (model.c calls it): which outputs are
 * computed in their input's memory, which ReLUs and adds are fused into the layer before them,
 * where each output gradient lives in the shared pool, the check that it all fits, and the
 * views every layer gets into the flat buffers.
 *
 * Each layer owns its output array for max_batch samples, except the ReLUs (and flattens) that
 * write over their input's (plan_inplace); one scratch workspace (the largest any layer asks
 * for) is shared by all layers. A ReLU in place after a batch norm or an add is done by that
 * layer in the same pass (plan_fusion) and skipped, and so is a two-input add after a batch
 * norm (the batch norm does it and writes the add's output), and a squeeze-excitation block
 * by its channel scale (plan_se_fusion).
 *
 * Output gradients share one pool (plan_gradient_pool): the gradient at layer i's output is
 * only alive from the backward of its last consumer to its own backward, so buffers whose
 * lifetimes do not overlap take the same memory. In a chain that is two buffers instead of one
 * per layer: about half of the activation memory of training.
 */
#include <string.h>
#include <unistd.h>

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

/* How many inputs of the layers strictly between `lo` and `hi` read the output of `id`. */
static int reads_between(const dtnn_model *m, int id, int lo, int hi)
{
    int reads = 0;
    for (int j = lo + 1; j < hi; j++)
        for (int k = 0; k < m->layers[j]->n_in; k++)
            reads += m->layers[j]->in_ids[k] == id;
    return reads;
}

/* Whether a layer's inputs differ in shape (an add that broadcasts), or it is an add of one
 * input and a constant: its kernels then are the binary ones, which have no epilogue, and its
 * output need not be any input's shape. */
static int broadcasts(const layer *l)
{
    if (l->ops->sums_inputs && l->n_in == 1)
        return 1;
    for (int k = 1; k < l->n_in; k++)
        if (l->in[k].c != l->in[0].c || l->in[k].h != l->in[0].h || l->in[k].w != l->in[0].w)
            return 1;
    return 0;
}

/* A two-input add whose one input is a batch norm that feeds nothing else (ResNet's bn2 +
 * shortcut) is done by that batch norm: y = relu(bn(x) + residual), its ReLU too when fused
 * into the add; backward the batch norm passes the gradient to the residual. That saves the
 * batch norm's output going to memory and back (and backward the add's pass), in time and in
 * peak memory, since the batch norm's output is the add's (measurements: docs/perf-notes.md).
 * The residual's gradient is then written at the batch norm's place in the backward order
 * instead of the add's, so the residual must come from before the batch norm and no layer
 * between them may read it (the first gradient to reach a producer writes, the later ones
 * add). */
static void plan_residual_fusion(dtnn_model *m, int *first)
{
    for (int i = 0; i < m->n_layers; i++) {
        layer *a = m->layers[i];
        if (!a->ops->sums_inputs || a->n_in != 2 || broadcasts(a))
            continue;
        for (int s = 0; s < 2; s++) {
            const int b_id = a->in_ids[s], r_id = a->in_ids[1 - s];
            if (b_id == DTNN_INPUT || r_id == b_id || (r_id != DTNN_INPUT && r_id > b_id))
                continue;
            layer *b = m->layers[b_id];
            /* the add is the batch norm's only reader */
            if (!b->ops->residual_epilogue || b->relu_fused || b->residual_add || b->eval_mode ||
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

/* Whether layer l has a parameter that trains; whether it has parameters, all frozen. */
static int trains(const dtnn_model *m, const layer *l)
{
    for (int k = 0; k < l->n_tensors; k++) {
        const dtnn_tensor_info *ti = &m->tensors[l->t[k].model_index];
        if (ti->kind == DTNN_TENSOR_PARAM && !ti->frozen)
            return 1;
    }
    return 0;
}

static int all_frozen(const dtnn_model *m, const layer *l)
{
    int any = 0;
    for (int k = 0; k < l->n_tensors; k++) {
        const dtnn_tensor_info *ti = &m->tensors[l->t[k].model_index];
        if (ti->kind == DTNN_TENSOR_PARAM)
            any = 1;
    }
    return any && !trains(m, l);
}

/* --freeze-bn: layers with an evaluation form (batch norm) whose parameters are all frozen
 * run in it. */
static void plan_frozen_bn(dtnn_model *m, const dtnn_build_params *p)
{
    for (int i = 0; i < m->n_layers; i++) {
        layer *l = m->layers[i];
        l->eval_mode = p->training && p->freeze_bn && l->ops->eval_when_frozen &&
                       all_frozen(m, l);
    }
}

/* Which layers' backward is skipped (--freeze): a layer's backward is needed when it has a
 * trainable parameter or a layer it reads needs its output gradient (the model input: when
 * its gradient is asked for), decided in forward order; a batch norm doing a fused add's
 * backward is needed wherever that add is. Without --freeze every layer's is needed. */
static void plan_backward(dtnn_model *m, const dtnn_build_params *p)
{
    for (int i = 0; i < m->n_layers; i++) {
        layer *l = m->layers[i];
        int need = !p->n_freeze || trains(m, l);
        for (int k = 0; k < l->n_in && !need; k++)
            need = l->in_ids[k] == DTNN_INPUT ? p->input_grad
                                              : !m->layers[l->in_ids[k]]->no_backward;
        l->no_backward = !need;
    }
    for (int i = 0; i < m->n_layers; i++) {
        layer *b = m->layers[i];
        if (b->residual_add && !b->residual_add->no_backward)
            b->no_backward = 0;
    }
}

/* The layer feeding input k of l, if it is layer `at` and feeds nothing else. */
static layer *sole_feeder(const dtnn_model *m, const layer *l, int k, int at)
{
    if (k >= l->n_in || l->in_ids[k] != at || at < 0 ||
        reads_between(m, at, at, m->n_layers) != 1)
        return NULL;
    return m->layers[at];
}

/* Which channel scales run their squeeze-excitation block as one operation (layer_ops'
 * plane_mean ... channel_scale; backend se_forward): x -> mean -> affine -> activation ->
 * affine -> gate -> x * gate, the five layers in a row just before the scale, each feeding
 * only the next, the mean reading the very x the scale scales. In a row, so that the block's
 * writes keep the order they have unfused and no layer between reads what they skip. */
static void plan_se_fusion(dtnn_model *m)
{
    if (!m->be->op->se_forward || !m->be->op->se_backward)
        return;
    for (int j = 5; j < m->n_layers; j++) {
        layer *l = m->layers[j], *se[5];
        const int x_slot = l->ops->channel_scale ? l->ops->channel_scale(l) : -1;
        if (x_slot < 0 || !(se[4] = sole_feeder(m, l, 1 - x_slot, j - 1)))
            continue;
        int ok = 1;
        for (int k = 3; k >= 0 && ok; k--)
            ok = (se[k] = sole_feeder(m, se[k + 1], 0, j - 5 + k)) != NULL;
        act_kind kind;
        float a, b;
        int bias;
        if (!ok || se[0]->n_in != 1 || se[0]->in_ids[0] != l->in_ids[x_slot] ||
            !se[0]->ops->plane_mean || !se[0]->ops->plane_mean(se[0]))
            continue;
        for (int k = 1; k <= 3 && ok; k += 2)
            ok = se[k]->ops->channel_affine && se[k]->ops->channel_affine(se[k], &bias) &&
                 se[k + 1]->ops->activation && se[k + 1]->ops->activation(se[k + 1], &kind, &a, &b);
        if (!ok || se[3]->out.c != l->out.c)
            continue;
        for (int k = 0; k < 5; k++) {
            l->se[k] = se[k];
            se[k]->fused = 1;
        }
        l->se_x = x_slot;
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
        memset(m->layers[i]->se, 0, sizeof m->layers[i]->se);
        first[i] = i;
    }
    if (!m->bp.unfused)
        plan_se_fusion(m);
    for (int i = 0; i < m->n_layers && !m->bp.unfused; i++) {
        layer *l = m->layers[i];
        if (!l->ops->fusable_relu || l->fused || alias[i] < 0 || alias[i] != l->in_ids[0])
            continue;
        layer *producer = m->layers[alias[i]];
        /* an eval-mode batch norm's backward (bn_backward_eval) has no epilogue */
        if (!producer->ops->relu_epilogue || producer->relu_fused || producer->fused ||
            producer->eval_mode ||
            broadcasts(producer))
            continue;
        producer->relu_fused = 1;
        l->fused = 1;
        first[i] = alias[i];
    }
    if (!m->bp.unfused)
        plan_residual_fusion(m, first);
}

/* Orders gradient buffers largest first; ties: lower layer first, so the plan is deterministic. */
typedef struct {
    size_t size;
    int layer;
} pool_entry;

static int cmp_pool_entry(const void *pa, const void *pb)
{
    const pool_entry *a = pa, *b = pb;
    if (a->size != b->size)
        return a->size < b->size ? 1 : -1;
    return (a->layer > b->layer) - (a->layer < b->layer);
}

static int cmp_by_offset(const void *pa, const void *pb, const size_t *offset)
{
    size_t x = offset[*(const int *)pa], y = offset[*(const int *)pb];
    return (x > y) - (x < y);
}

/* The buffers placed so far that are alive at each layer position: alive[t] lists them. */
typedef struct {
    int **ids;
    int *n, *cap;
} alive_lists;

static int alive_add(alive_lists *al, int t, int id)
{
    if (al->n[t] == al->cap[t]) {
        int cap = al->cap[t] ? 2 * al->cap[t] : 4;
        int *p = realloc(al->ids[t], sizeof(int) * (size_t)cap);
        if (!p)
            return -1;
        al->ids[t] = p;
        al->cap[t] = cap;
    }
    al->ids[t][al->n[t]++] = id;
    return 0;
}

/* Places each layer's output gradient (size[i] floats) in a shared pool: the gradient of layer
 * i is alive over the layers [first[i], last consumer of i] (backward runs from the last
 * consumer, which writes it first, down to first[i], which reads it last: i itself, or the
 * producer of a fused ReLU). Largest first, each at the lowest offset that overlaps in memory
 * no placed buffer alive at the same time: first-fit interval colouring. The buffers alive with
 * i are found through per-position lists (alive), so the work is the sum of the intervals'
 * lengths, not a scan of every placed buffer per buffer: linear for a chain of any length.
 * Returns the pool's size in floats, or SIZE_MAX when out of memory. */
static size_t plan_gradient_pool(const dtnn_model *m, const int *first, const size_t *size,
                                 size_t *offset)
{
    const int n = m->n_layers;
    int *last = malloc(sizeof(int) * (size_t)n), *placed = malloc(sizeof(int) * (size_t)n);
    int *stamp = malloc(sizeof(int) * (size_t)n);
    pool_entry *order = malloc(sizeof *order * (size_t)n);
    alive_lists al = {calloc((size_t)n, sizeof(int *)), calloc((size_t)n, sizeof(int)),
                      calloc((size_t)n, sizeof(int))};
    size_t pool = 0;
    if (!last || !placed || !stamp || !order || !al.ids || !al.n || !al.cap) {
        pool = SIZE_MAX;
        goto done;
    }
    for (int i = 0; i < n; i++) {
        last[i] = i;
        stamp[i] = -1;
        order[i] = (pool_entry){size[i], i};
    }
    for (int j = 0; j < n; j++)
        for (int k = 0; k < m->layers[j]->n_in; k++)
            if (m->layers[j]->in_ids[k] != DTNN_INPUT)
                last[m->layers[j]->in_ids[k]] = DTNN_MAX(last[m->layers[j]->in_ids[k]], j);
    qsort(order, (size_t)n, sizeof *order, cmp_pool_entry);
    for (int a = 0; a < n && pool != SIZE_MAX; a++) {
        const int i = order[a].layer;
        /* The placed buffers alive with i, by offset; take the first gap that fits. */
        int live = 0;
        for (int t = first[i]; t <= last[i]; t++)
            for (int k = 0; k < al.n[t]; k++) {
                const int j = al.ids[t][k];
                if (stamp[j] != a) {
                    stamp[j] = a;
                    placed[live++] = j;
                }
            }
        /* qsort has no context argument: an insertion sort, on the few buffers alive at once. */
        for (int x = 1; x < live; x++) {
            int v = placed[x], y = x;
            while (y > 0 && cmp_by_offset(&placed[y - 1], &v, offset) > 0) {
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
        for (int t = first[i]; t <= last[i]; t++)
            if (alive_add(&al, t, i))
                pool = SIZE_MAX;
    }
done:
    for (int t = 0; al.ids && t < n; t++)
        free(al.ids[t]);
    free(al.ids);
    free(al.n);
    free(al.cap);
    free(last);
    free(placed);
    free(stamp);
    free(order);
    return pool;
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
dtnn_status model_check_memory(dtnn_model *m, const dtnn_build_params *p, size_t act_floats,
                               size_t aux_bytes, size_t ws, dtnn_error *err)
{
    dtnn_memory *mem = &m->memory;
    const size_t param_bytes = sizeof(float) * m->n_params_padded;
    const size_t grad_bytes = sizeof(float) * m->n_grads;
    mem->params = param_bytes;
    mem->grads = p->training ? grad_bytes : 0;
    mem->optimizer = p->training ? grad_bytes * (size_t)DTNN_MAX(p->optimizer_slots, 0) : 0;
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

void model_memory_plan_free(memory_plan *mp)
{
    free(mp->alias);
    free(mp->first);
    free(mp->grad_size);
    free(mp->grad_offset);
}

/* Floats of layer l's output array (and output gradient) for a full batch. */
static size_t output_floats(const layer *l, int max_batch)
{
    return dtnn__round_up(shape_size(l->out) * (size_t)max_batch, 16);
}

dtnn_status model_plan_memory(dtnn_model *m, const dtnn_build_params *p, memory_plan *mp,
                              dtnn_error *err)
{
    const size_t n = (size_t)m->n_layers;
    memset(mp, 0, sizeof *mp);
    mp->alias = calloc(n, sizeof(int));
    mp->first = calloc(n, sizeof(int));
    mp->grad_size = calloc(n, sizeof(size_t));
    mp->grad_offset = calloc(n, sizeof(size_t));
    if (!mp->alias || !mp->first || !mp->grad_size || !mp->grad_offset ||
        plan_inplace(m, mp->alias))
        return dtnn_error_set(err, DTNN_ERR_NOMEM, "out of memory");
    plan_frozen_bn(m, p);
    plan_fusion(m, mp->alias, mp->first);
    plan_backward(m, p);
    for (int i = 0; i < m->n_layers; i++) {
        layer *l = m->layers[i];
        const size_t sz = output_floats(l, p->max_batch);
        /* a batch norm doing an add writes the add's output, and has none of its own */
        mp->act_floats += mp->alias[i] < 0 && !l->residual_add ? sz : 0;
        /* a fused ReLU's producer takes the ReLU's output gradient instead of its own, and a
         * batch norm doing an add that add's (or its ReLU's) */
        mp->grad_size[i] = l->relu_fused || l->residual_add ? 0 : sz;
        mp->aux_bytes += dtnn__round_up(l->aux_bytes * (size_t)p->max_batch + l->aux_fixed_bytes,
                                       64);
        mp->workspace = DTNN_MAX(mp->workspace, l->workspace_bytes);
        if (l->se[0]) {
            const se_geom g = {.C = l->out.c, .hidden = l->se[1]->out.c};
            mp->workspace = DTNN_MAX(mp->workspace,
                                     sizeof(float) * se_workspace_floats(&g) * p->max_batch);
        }
    }
    mp->outputs_floats = mp->act_floats;
    if (p->training) {
        size_t pool = plan_gradient_pool(m, mp->first, mp->grad_size, mp->grad_offset);
        if (pool == SIZE_MAX)
            return dtnn_error_set(err, DTNN_ERR_NOMEM, "out of memory");
        mp->act_floats += pool;
    }
    return DTNN_OK;
}

/* Each layer's views into the flat buffers: outputs, output gradients, aux, tensors, inputs. */
void model_set_views(dtnn_model *m, const dtnn_build_params *p, const memory_plan *mp)
{
    float *act = m->activations;
    unsigned char *aux = m->aux;
    for (int i = 0; i < m->n_layers; i++) {
        layer *l = m->layers[i];
        if (mp->alias[i] >= 0) {
            l->y = m->layers[mp->alias[i]]->y;
        } else if (l->residual_add) {
            l->y = NULL;    /* the add's, below */
        } else {
            l->y = act;
            act += output_floats(l, p->max_batch);
        }
        l->dy = p->training ? m->activations + mp->outputs_floats + mp->grad_offset[i] : NULL;
        l->aux = aux;
        aux += dtnn__round_up(l->aux_bytes * (size_t)p->max_batch + l->aux_fixed_bytes, 64);
        for (int k = 0; k < l->n_tensors; k++) {
            const dtnn_tensor_info *ti = &m->tensors[l->t[k].model_index];
            if (ti->kind == DTNN_TENSOR_PARAM) {
                l->p[k] = m->params + ti->offset;
                l->g[k] = m->grads && !ti->frozen ? m->grads + ti->offset : NULL;
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
            m->layers[mp->first[i]]->dy = m->layers[i]->dy;
}

