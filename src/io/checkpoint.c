/*
 * checkpoint.c — model (and optionally optimizer and training) state as one safetensors file.
 *
 * Tensors: every entry of the model's tensor table under its PyTorch state_dict name (parameters
 * F32, batch-norm buffers F32 or I64, num_batches_tracked a 0-d I64), so the file loads into
 * PyTorch with safetensors.torch.load_file + load_state_dict(strict=False); with an optimizer,
 * its state as "optimizer.<slot>.<tensor>" (slot = PyTorch's state key) for every parameter.
 * Metadata (strings): format "dtnn-checkpoint", version "2", crc32c (the whole file's checksum,
 * added by the safetensors writer and required from version 2 on), model_input "CxHxW", model_step
 * (the dropout stream position); with an optimizer: optimizer (its name) and opt_step; with a
 * training state: step, epoch, step_in_epoch, seed, global_batch, monitor (the epoch-end
 * decisions' state: train/monitor.c); with a dataset: dataset,
 * norm_mean and norm_std (per channel, comma-separated, %.9g so floats round-trip).
 *
 * Loading validates the whole file before it changes anything: every model tensor present with
 * the same dtype and shape, no tensor the model lacks, the optimizer state complete and of the
 * same kind and settings, every requested metadata value well-formed. A failed load leaves model,
 * optimizer, training state and normalisation untouched. A file without "format" metadata is
 * taken to be a plain state_dict (as PyTorch's safetensors writer makes one): weights only.
 */
#include <fnmatch.h>
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "../core/internal.h"
#include "../model/model.h"
#include "../optim/optimizer.h"
#include "checkpoint.h"
#include "checkpoint_meta.h"
#include "safetensors.h"

#define CKPT_FORMAT "dtnn-checkpoint"
/* Version 2 added the file checksum (safetensors.c); version 1 files still load. */
#define CKPT_VERSION "2"
#define OPT_PREFIX "optimizer."
#define AVG_PREFIX "ema."

static const char *dtype_name(dtnn_dtype d) { return d == DTNN_I64 ? "I64" : "F32"; }
static size_t dtype_bytes(dtnn_dtype d) { return d == DTNN_I64 ? 8 : 4; }

/* Model memory belongs to the backend: a save works on a host copy of the parameters, the
 * buffers and the optimizer state (snapshot), a load uploads each validated tensor. */
typedef struct {
    float *params;
    unsigned char *buffers;
    float *state;       /* [n_slots, n] or NULL */
} snapshot;

static void snapshot_free(snapshot *h)
{
    free(h->params);
    free(h->buffers);
    free(h->state);
}

static dtnn_status snapshot_take(const char *path, dtnn_model *m, const dtnn_optimizer *opt,
                                 snapshot *h, dtnn_error *err)
{
    const size_t sbytes = opt ? sizeof(float) * optimizer_length(opt) * (size_t)optimizer_slot_count(opt) : 0;
    size_t bytes;
    if (!(h->params = model_region_to_host(m, DTNN_REGION_PARAMS, &bytes, err)) ||
        !(h->buffers = model_region_to_host(m, DTNN_REGION_BUFFERS, &bytes, err))) {
        snapshot_free(h);
        char msg[sizeof err->message];
        snprintf(msg, sizeof msg, "%s", err->message);
        return dtnn_error_set(err, err->code, "checkpoint %s: %s", path, msg);
    }
    if (opt && !(h->state = malloc(DTNN_MAX(sbytes, 1)))) {
        snapshot_free(h);
        return dtnn_error_set(err, DTNN_ERR_NOMEM, "checkpoint %s: out of memory copying the "
                              "optimizer state (%.1f MiB)", path, (double)sbytes / 1048576.0);
    }
    if (opt)
        be_download(model_backend(m), h->state, optimizer_state(opt), sbytes);
    return DTNN_OK;
}

/* Where a model tensor's data is: params (elements) or buffers (bytes), in the snapshot. */
static void *tensor_host(const snapshot *h, const dtnn_tensor_info *ti)
{
    if (ti->kind == DTNN_TENSOR_PARAM)
        return h->params + ti->offset;
    return h->buffers + ti->offset;
}

/* ... and in backend memory, for the uploads of a load. */
static void *tensor_backend(dtnn_model *m, const dtnn_tensor_info *ti)
{
    if (ti->kind == DTNN_TENSOR_PARAM)
        return model_params(m) + ti->offset;
    return model_buffers(m) + ti->offset;
}

static dtnn_status check_model(const char *path, const dtnn_model *m, const dtnn_optimizer *opt,
                               const char *what, dtnn_error *err)
{
    if (!path || !m)
        return dtnn_error_set(err, DTNN_ERR_ARG, "checkpoint %s: path and model are required",
                              what);
    if (!model_is_built(m))
        return dtnn_error_set(err, DTNN_ERR_ARG, "checkpoint %s: the model is not built", path);
    if (opt && optimizer_model(opt) != m)
        return dtnn_error_set(err, DTNN_ERR_ARG, "checkpoint %s: the optimizer belongs to "
                              "another model", path);
    return DTNN_OK;
}

/* ---- saving ---------------------------------------------------------------------------------- */

/* What trains: the number of frozen tensors and a hash of their names and of --freeze-bn,
 * which a resume must match (the optimizer state holds the trainable tensors only), as
 * "N HASH"; and the --freeze patterns, for the message when it does not. */
static void freeze_signature(const dtnn_model *m, char *sig, size_t len)
{
    uint64_t h = DTNN_FNV1A_INIT;
    int n = 0;
    for (int i = 0; i < dtnn_model_tensor_count(m); i++) {
        if (!dtnn_model_tensor(m, i)->frozen)
            continue;
        n++;
        /* the name with its terminating NUL, so "a" "bc" and "ab" "c" differ */
        h = dtnn__fnv1a(h, dtnn_model_tensor(m, i)->name, strlen(dtnn_model_tensor(m, i)->name) + 1);
    }
    const unsigned char freeze_bn_mark = 0xb5;
    if (n && model_build_params(m)->freeze_bn)
        h = dtnn__fnv1a(h, &freeze_bn_mark, 1);
    snprintf(sig, len, "%d %016llx", n, (unsigned long long)h);
}

static void freeze_patterns(const dtnn_model *m, char *buf, size_t len)
{
    size_t k = 0;
    buf[0] = '\0';
    for (int i = 0; i < model_build_params(m)->n_freeze && k + 1 < len; i++)
        k += (size_t)snprintf(buf + k, len - k, "%s%s", i ? " " : "", model_build_params(m)->freeze[i]);
    if (model_build_params(m)->n_freeze && model_build_params(m)->freeze_bn && k + 1 < len)
        snprintf(buf + k, len - k, " with --freeze-bn");
}

static int norm_channels(const dtnn_model *m)
{
    int c, h, w;
    dtnn_model_input_shape(m, &c, &h, &w);
    return DTNN_MAX(1, DTNN_MIN(c, 4));
}

/* A checkpoint never holds NaN or Inf: resuming from one would only repeat the failure. */
static dtnn_status check_finite(const char *path, const dtnn_model *m, const dtnn_optimizer *opt,
                                const snapshot *h, dtnn_error *err)
{
    for (int i = 0; i < dtnn_model_tensor_count(m); i++) {
        const dtnn_tensor_info *ti = dtnn_model_tensor(m, i);
        if (ti->dtype != DTNN_F32)
            continue;
        const float *v = tensor_host(h, ti);
        const int slots = opt && ti->kind == DTNN_TENSOR_PARAM && !ti->frozen ? optimizer_slot_count(opt) : 0;
        for (int s = 0; s <= slots; s++) {
            const float *t = s == 0 ? v : h->state + (size_t)(s - 1) * optimizer_length(opt) + ti->offset;
            for (size_t k = 0; k < ti->count; k++)
                if (!isfinite(t[k]))
                    return dtnn_error_set(err, DTNN_ERR_NONFINITE, "checkpoint %s not written: "
                                          "%s%s%s'%s' holds %s", path,
                                          s ? "the optimizer's " : "",
                                          s ? optimizer_slot_name(opt, s - 1) : "", s ? " of " : "",
                                          ti->name, isnan(t[k]) ? "NaN" : "Inf");
        }
    }
    return DTNN_OK;
}

dtnn_status dtnn_checkpoint_save(const char *path, dtnn_model *m, dtnn_optimizer *opt,
                                 const dtnn_train_state *ts, const dtnn_dataset *norm,
                                 dtnn_error *err)
{
    return ckpt_save_with_average(path, m, opt, ts, norm, NULL, err);
}

dtnn_status ckpt_save_with_average(const char *path, dtnn_model *m, dtnn_optimizer *opt,
                                   const dtnn_train_state *ts, const dtnn_dataset *norm,
                                   const ckpt_average *avg, dtnn_error *err)
{
    dtnn_status st = check_model(path, m, opt, "save", err);
    snapshot h = {0};
    if (st || (st = snapshot_take(path, m, opt, &h, err)))
        return st;
    if ((st = check_finite(path, m, opt, &h, err))) {
        snapshot_free(&h);
        return st;
    }
    int n_param_tensors = 0;
    for (int i = 0; i < dtnn_model_tensor_count(m); i++)
        n_param_tensors += dtnn_model_tensor(m, i)->kind == DTNN_TENSOR_PARAM && !dtnn_model_tensor(m, i)->frozen;
    const int n_opt = opt ? optimizer_slot_count(opt) * n_param_tensors : 0;
    const int n_avg = avg ? dtnn_model_tensor_count(m) : 0;
    const int n_entries = dtnn_model_tensor_count(m) + n_opt + n_avg;
    st_entry *e = calloc(n_entries ? n_entries : 1, sizeof *e);
    char **opt_names = calloc(n_opt + n_avg ? n_opt + n_avg : 1, sizeof *opt_names);
    if (!e || !opt_names) {
        st = dtnn_error_set(err, DTNN_ERR_NOMEM, "checkpoint %s: out of memory", path);
        goto done;
    }
    for (int i = 0; i < dtnn_model_tensor_count(m); i++) {
        const dtnn_tensor_info *ti = dtnn_model_tensor(m, i);
        e[i] = (st_entry){ti->name, dtype_name(ti->dtype), ti->ndim, ti->dims,
                          tensor_host(&h, ti), ti->count * dtype_bytes(ti->dtype)};
    }
    int k = 0;
    for (int s = 0; opt && s < optimizer_slot_count(opt); s++) {
        for (int i = 0; i < dtnn_model_tensor_count(m); i++) {
            const dtnn_tensor_info *ti = dtnn_model_tensor(m, i);
            if (ti->kind != DTNN_TENSOR_PARAM || ti->frozen)
                continue;
            size_t len = strlen(OPT_PREFIX) + strlen(optimizer_slot_name(opt, s)) + strlen(ti->name) + 2;
            opt_names[k] = malloc(len);
            if (!opt_names[k]) {
                st = dtnn_error_set(err, DTNN_ERR_NOMEM, "checkpoint %s: out of memory", path);
                goto done;
            }
            snprintf(opt_names[k], len, OPT_PREFIX "%s.%s", optimizer_slot_name(opt, s), ti->name);
            e[dtnn_model_tensor_count(m) + k] = (st_entry){opt_names[k], "F32", ti->ndim, ti->dims,
                                             h.state + (size_t)s * optimizer_length(opt) + ti->offset,
                                             ti->count * sizeof(float)};
            k++;
        }
    }
    /* The average: the model's tensors again, "ema.<name>", from the host copies given. */
    const snapshot avg_h = {avg ? (float *)avg->params : NULL,
                            avg ? (unsigned char *)avg->buffers : NULL, NULL};
    for (int i = 0; i < n_avg; i++) {
        const dtnn_tensor_info *ti = dtnn_model_tensor(m, i);
        const size_t len = strlen(AVG_PREFIX) + strlen(ti->name) + 1;
        if (!(opt_names[n_opt + i] = malloc(len))) {
            st = dtnn_error_set(err, DTNN_ERR_NOMEM, "checkpoint %s: out of memory", path);
            goto done;
        }
        snprintf(opt_names[n_opt + i], len, AVG_PREFIX "%s", ti->name);
        e[dtnn_model_tensor_count(m) + n_opt + i] =
            (st_entry){opt_names[n_opt + i], dtype_name(ti->dtype), ti->ndim, ti->dims,
                       tensor_host(&avg_h, ti), ti->count * dtype_bytes(ti->dtype)};
    }

    meta_list ml;
    ml.n = 0;
    ckpt_meta_add(&ml, "format", CKPT_FORMAT);
    ckpt_meta_add(&ml, "version", CKPT_VERSION);
    int in_c, in_h, in_w;
    dtnn_model_input_shape(m, &in_c, &in_h, &in_w);
    ckpt_meta_add(&ml, "model_input", "%dx%dx%d", in_c, in_h, in_w);
    ckpt_meta_add(&ml, "model_step", "%" PRId64, dtnn_model_step(m));
    if (avg)
        ckpt_meta_add(&ml, "ema_count", "%" PRId64, avg->count);
    if (opt) {
        ckpt_meta_add(&ml, "optimizer", "%s", dtnn_opt_name(optimizer_kind(opt)));
        ckpt_meta_add(&ml, "opt_step", "%" PRId64, optimizer_step(opt));
    }
    if (dtnn_model_trainable_count(m) < model_param_count(m)) {
        char buf[192];
        freeze_signature(m, buf, sizeof buf);
        ckpt_meta_add(&ml, "frozen", "%s", buf);
        freeze_patterns(m, buf, sizeof buf);
        ckpt_meta_add(&ml, "freeze", "%s", buf);
    }
    if (ts) {
        ckpt_meta_add(&ml, "step", "%" PRId64, ts->step);
        ckpt_meta_add(&ml, "epoch", "%" PRId64, ts->epoch);
        ckpt_meta_add(&ml, "step_in_epoch", "%" PRId64, ts->step_in_epoch);
        ckpt_meta_add(&ml, "seed", "%" PRIu64, ts->seed);
        ckpt_meta_add(&ml, "global_batch", "%" PRId64, ts->global_batch);
        /* %.17g: the doubles come back bit for bit, so a resumed monitor decides alike */
        ckpt_meta_add(&ml, "monitor", "%" PRId64 ",%.17g,%.17g,%" PRId64 ",%" PRId64 ",%" PRId64,
                 ts->monitored, ts->plateau_best, ts->early_best, ts->plateau_bad,
                 ts->early_bad, ts->plateau_cuts);
    }
    if (norm) {
        const int c = norm_channels(m);
        char csv[128];
        ckpt_meta_add(&ml, "dataset", "%.63s", norm->name);
        ckpt_floats_csv(csv, sizeof csv, norm->mean, c);
        ckpt_meta_add(&ml, "norm_mean", "%s", csv);
        ckpt_floats_csv(csv, sizeof csv, norm->std, c);
        ckpt_meta_add(&ml, "norm_std", "%s", csv);
    }
    st = st_write(path, e, n_entries, ml.keys, ml.values, ml.n, err);
done:
    for (int i = 0; opt_names && i < n_opt + n_avg; i++)
        free(opt_names[i]);
    free(opt_names);
    free(e);
    snapshot_free(&h);
    return st;
}

/* ---- loading --------------------------------------------------------------------------------- */

static void shape_str(char *buf, size_t len, int ndim, const int64_t *dims)
{
    size_t k = (size_t)snprintf(buf, len, "[");
    for (int d = 0; d < ndim && k < len; d++)
        k += (size_t)snprintf(buf + k, len - k, "%s%" PRId64, d ? ", " : "", dims[d]);
    if (k < len)
        snprintf(buf + k, len - k, "]");
}

/* The file's tensor `name` must match the model tensor ti in dtype and shape. */
static dtnn_status match_tensor(const char *path, const st_file *f, const char *name,
                                const dtnn_tensor_info *ti, dtnn_dtype dtype,
                                const st_tensor **out, dtnn_error *err)
{
    char want[128], got[128];
    shape_str(want, sizeof want, ti->ndim, ti->dims);
    const st_tensor *t = st_find(f, name);
    if (!t)
        return dtnn_error_set(err, DTNN_ERR_SHAPE, "checkpoint %s: tensor '%s' is missing (the "
                              "model expects %s %s)", path, name, dtype_name(dtype), want);
    shape_str(got, sizeof got, t->ndim, t->dims);
    if (strcmp(t->dtype, dtype_name(dtype)) != 0)
        return dtnn_error_set(err, DTNN_ERR_SHAPE, "checkpoint %s: tensor '%s' has dtype %s, "
                              "the model expects %s", path, name, t->dtype, dtype_name(dtype));
    int same = t->ndim == ti->ndim;
    for (int d = 0; same && d < ti->ndim; d++)
        same = t->dims[d] == ti->dims[d];
    if (!same)
        return dtnn_error_set(err, DTNN_ERR_SHAPE, "checkpoint %s: tensor '%s' has shape %s, "
                              "the model expects %s", path, name, got, want);
    *out = t;
    return DTNN_OK;
}

/* Everything a load will write, gathered and checked before anything is written. */
typedef struct {
    const st_tensor **model;    /* [n_tensors] */
    const st_tensor **opt;      /* [n_slots * n_tensors], NULL for buffers */
    int64_t opt_step, model_step;
    dtnn_train_state ts;
    float mean[4], std[4];
    int has_norm;
    const char *dataset;
    const char *const *exclude; /* globs of tensor names left as they are (weights-only loads) */
    int n_exclude;
} load_plan;

static int excluded(const load_plan *lp, const char *name)
{
    for (int k = 0; k < lp->n_exclude; k++)
        if (fnmatch(lp->exclude[k], name, 0) == 0)
            return 1;
    return 0;
}

/* Whether the file holds `name` with ti's dtype and shape. */
static int tensor_fits(const st_file *f, const char *name, const dtnn_tensor_info *ti)
{
    const st_tensor *t = st_find(f, name);
    int same = t && !strcmp(t->dtype, dtype_name(ti->dtype)) && t->ndim == ti->ndim;
    for (int d = 0; same && d < ti->ndim; d++)
        same = t->dims[d] == ti->dims[d];
    return same;
}

/* A weights-only load that failed on a tensor: when every tensor that does not fit belongs to
 * one layer (a new head: other classes), the message says how to keep that layer fresh. */
static dtnn_status hint_new_head(const st_file *f, const dtnn_model *m, const load_plan *lp,
                                 dtnn_status st, dtnn_error *err)
{
    const char *head = NULL;
    size_t len = 0;
    for (int i = 0; i < dtnn_model_tensor_count(m); i++) {
        const dtnn_tensor_info *ti = dtnn_model_tensor(m, i);
        if (excluded(lp, ti->name) || tensor_fits(f, ti->name, ti))
            continue;
        const char *dot = strrchr(ti->name, '.');
        size_t n = dot ? (size_t)(dot - ti->name) : strlen(ti->name);
        if (head && (n != len || strncmp(head, ti->name, n) != 0))
            return st;      /* more than one layer differs: no simple fix to suggest */
        head = ti->name;
        len = n;
    }
    if (!head)
        return st;
    char msg[sizeof err->message];
    snprintf(msg, sizeof msg, "%s", err->message);
    return dtnn_error_set(err, st, "%s; only layer '%.*s' differs (a new head?): --init-exclude "
                          "'%.*s.*' leaves it at its fresh initialisation", msg, (int)len, head,
                          (int)len, head);
}

static dtnn_status check_optimizer(const char *path, const st_file *f, dtnn_model *m,
                                   const dtnn_optimizer *opt, load_plan *lp, dtnn_error *err)
{
    const char *oname = st_meta(f, "optimizer");
    const char *want = dtnn_opt_name(optimizer_kind(opt));
    if (!oname)
        return dtnn_error_set(err, DTNN_ERR_FORMAT, "checkpoint %s holds no optimizer state "
                              "(saved without an optimizer); load it without one", path);
    if (strcmp(oname, want) != 0)
        return dtnn_error_set(err, DTNN_ERR_ARG, "checkpoint %s holds %.32s optimizer state, "
                              "but the optimizer is %s", path, oname, want);
    dtnn_status st = ckpt_meta_i64(path, f, "opt_step", &lp->opt_step, err);
    if (st)
        return st;
    int expected = 0;
    for (int s = 0; s < optimizer_slot_count(opt); s++) {
        for (int i = 0; i < dtnn_model_tensor_count(m); i++) {
            const dtnn_tensor_info *ti = dtnn_model_tensor(m, i);
            if (ti->kind != DTNN_TENSOR_PARAM || ti->frozen)
                continue;
            char name[512];
            snprintf(name, sizeof name, OPT_PREFIX "%s.%s", optimizer_slot_name(opt, s), ti->name);
            if (!st_find(f, name))
                return dtnn_error_set(err, DTNN_ERR_FORMAT, "checkpoint %s: optimizer state "
                                      "'%s' is missing (saved with other %s settings?)", path,
                                      name, want);
            st = match_tensor(path, f, name, ti, DTNN_F32,
                              &lp->opt[(size_t)s * dtnn_model_tensor_count(m) + i], err);
            if (st)
                return st;
            expected++;
        }
    }
    /* Names are unique and every expected one is present, so any other one is extra. */
    int present = 0;
    const char *extra = NULL;
    for (int i = 0; i < f->n_tensors; i++) {
        const char *nm = f->tensors[i].name;
        if (strncmp(nm, OPT_PREFIX, strlen(OPT_PREFIX)) != 0)
            continue;
        present++;
        const char *slot = nm + strlen(OPT_PREFIX), *dot = strchr(slot, '.');
        int known = 0;
        const dtnn_tensor_info *ti = dot ? dtnn_model_tensor_by_name(m, dot + 1) : NULL;
        for (int s = 0; ti && !ti->frozen && s < optimizer_slot_count(opt) && !known; s++)
            known = strlen(optimizer_slot_name(opt, s)) == (size_t)(dot - slot) &&
                    !strncmp(slot, optimizer_slot_name(opt, s), (size_t)(dot - slot));
        if (!known && !extra)
            extra = nm;
    }
    if (present != expected)
        return dtnn_error_set(err, DTNN_ERR_FORMAT, "checkpoint %s: optimizer state '%s' does "
                              "not belong to this %s optimizer (saved with other settings, e.g. "
                              "momentum or centered?)", path, extra ? extra : "?", want);
    return DTNN_OK;
}

/* A resume trains what the saved run trained: the same tensors frozen (--freeze-bn too). */
static dtnn_status check_frozen(const char *path, const st_file *f, const dtnn_model *m,
                                dtnn_error *err)
{
    char mine[64], here[192];
    freeze_signature(m, mine, sizeof mine);
    const char *saved = st_meta(f, "frozen");
    const int none_saved = !saved;
    if (none_saved ? dtnn_model_trainable_count(m) == model_param_count(m) : !strcmp(saved, mine))
        return DTNN_OK;
    freeze_patterns(m, here, sizeof here);
    const char *was = st_meta(f, "freeze");
    return dtnn_error_set(err, DTNN_ERR_ARG, "checkpoint %s was trained with %s%.160s%s, this "
                          "run freezes %s%s%s: resume with the same --freeze and --freeze-bn "
                          "(to train other parameters from it, start a new run with --init)",
                          path, none_saved ? "nothing frozen" : "--freeze ",
                          none_saved ? "" : was ? was : "?", "",
                          *here ? "--freeze " : "nothing", here, "");
}

static dtnn_status plan_load(const char *path, const st_file *f, dtnn_model *m,
                             const dtnn_optimizer *opt, int want_ts, int want_norm,
                             load_plan *lp, dtnn_error *err)
{
    const char *format = st_meta(f, "format");
    if (format && strcmp(format, CKPT_FORMAT) != 0)
        return dtnn_error_set(err, DTNN_ERR_FORMAT, "checkpoint %s: metadata format is "
                              "'%.64s', not '" CKPT_FORMAT "'", path, format);
    if (format) {
        const char *version = st_meta(f, "version");
        if (!version || (strcmp(version, CKPT_VERSION) != 0 && strcmp(version, "1") != 0))
            return dtnn_error_set(err, DTNN_ERR_FORMAT, "checkpoint %s: version '%.32s' is not "
                                  "supported (this dtnn reads versions 1 and " CKPT_VERSION ")",
                                  path, version ? version : "(none)");
        if (strcmp(version, "1") != 0 && !f->checksummed)
            return dtnn_error_set(err, DTNN_ERR_FORMAT, "checkpoint %s: the checksum is missing "
                                  "(version %s files carry one): the file was altered", path,
                                  version);
    } else if (opt || want_ts) {
        return dtnn_error_set(err, DTNN_ERR_FORMAT, "checkpoint %s: no dtnn metadata (a plain "
                              "state_dict?), so it holds weights only and cannot resume "
                              "training", path);
    }
    dtnn_status st;
    for (int k = 0; k < lp->n_exclude; k++) {
        int matches = 0;
        for (int i = 0; i < dtnn_model_tensor_count(m) && !matches; i++)
            matches = fnmatch(lp->exclude[k], dtnn_model_tensor(m, i)->name, 0) == 0;
        if (!matches)
            return dtnn_error_set(err, DTNN_ERR_ARG, "--init-exclude '%s' matches no tensor of "
                                  "the model (dtnn info --model M lists the layers)",
                                  lp->exclude[k]);
    }
    for (int i = 0; i < dtnn_model_tensor_count(m); i++) {
        const dtnn_tensor_info *ti = dtnn_model_tensor(m, i);
        if (excluded(lp, ti->name)) {
            lp->model[i] = NULL;
            continue;
        }
        if ((st = match_tensor(path, f, ti->name, ti, ti->dtype, &lp->model[i], err)) != 0)
            return !opt && !want_ts ? hint_new_head(f, m, lp, st, err) : st;
    }
    for (int i = 0; i < f->n_tensors; i++) {
        const char *nm = f->tensors[i].name;
        if (strncmp(nm, OPT_PREFIX, strlen(OPT_PREFIX)) != 0 &&
            strncmp(nm, AVG_PREFIX, strlen(AVG_PREFIX)) != 0 && !excluded(lp, nm) &&
            !dtnn_model_tensor_by_name(m, nm))
            return dtnn_error_set(err, DTNN_ERR_SHAPE, "checkpoint %s: tensor '%s' is not part "
                                  "of this model (a checkpoint of a different model?)", path,
                                  nm);
    }
    if ((opt || want_ts) && (st = check_frozen(path, f, m, err)) != DTNN_OK)
        return st;
    if (opt && (st = check_optimizer(path, f, m, opt, lp, err)) != DTNN_OK)
        return st;
    if (want_ts) {
        if ((st = ckpt_meta_i64(path, f, "step", &lp->ts.step, err)) ||
            (st = ckpt_meta_i64(path, f, "epoch", &lp->ts.epoch, err)) ||
            (st = ckpt_meta_i64(path, f, "step_in_epoch", &lp->ts.step_in_epoch, err)) ||
            (st = ckpt_meta_u64(path, f, "seed", UINT64_MAX, &lp->ts.seed, err)) ||
            (st = ckpt_meta_i64(path, f, "global_batch", &lp->ts.global_batch, err)) ||
            (st = ckpt_meta_monitor(path, f, &lp->ts, err)) ||
            (st = ckpt_meta_i64(path, f, "model_step", &lp->model_step, err)))
            return st;
    }
    if (want_norm && (st_meta(f, "norm_mean") || st_meta(f, "norm_std"))) {
        int nm, ns;
        if ((st = ckpt_meta_floats(path, f, "norm_mean", 0, lp->mean, &nm, err)) ||
            (st = ckpt_meta_floats(path, f, "norm_std", 1, lp->std, &ns, err)))
            return st;
        if (nm != ns)
            return dtnn_error_set(err, DTNN_ERR_FORMAT, "checkpoint %s: norm_mean has %d "
                                  "channels, norm_std %d", path, nm, ns);
        for (int c = nm; c < 4; c++) {
            lp->mean[c] = 0.0f;
            lp->std[c] = 1.0f;
        }
        lp->has_norm = 1;
        lp->dataset = st_meta(f, "dataset");
    }
    return DTNN_OK;
}

/* Refuses a checkpoint whose float tensors (weights, buffers, optimizer state) hold NaN or Inf,
 * naming the first: loaded, they would only give NaN logits or, resumed, a first step that
 * fails as if the learning rate were at fault. */
static dtnn_status check_loaded_finite(const char *path, const st_file *f, const dtnn_model *m,
                                       const dtnn_optimizer *opt, const load_plan *lp,
                                       dtnn_error *err)
{
    const size_t n_opt = opt ? (size_t)optimizer_slot_count(opt) * dtnn_model_tensor_count(m) : 0;
    for (size_t k = 0; k < (size_t)dtnn_model_tensor_count(m) + n_opt; k++) {
        const st_tensor *t = k < (size_t)dtnn_model_tensor_count(m) ? lp->model[k] : lp->opt[k - dtnn_model_tensor_count(m)];
        const dtnn_tensor_info *ti = dtnn_model_tensor(m, k % dtnn_model_tensor_count(m));
        if (!t || ti->dtype != DTNN_F32)
            continue;
        int64_t bad = first_nonfinite_f32(f->data + t->offset, t->bytes / sizeof(float));
        if (bad < 0)
            continue;
        float v;
        memcpy(&v, f->data + t->offset + (size_t)bad * sizeof v, sizeof v);
        const int slot = k < (size_t)dtnn_model_tensor_count(m) ? -1 : (int)((k - dtnn_model_tensor_count(m)) / dtnn_model_tensor_count(m));
        return dtnn_error_set(err, DTNN_ERR_NONFINITE, "checkpoint %s: %s%s%s'%s' holds %s at "
                              "index %lld of %zu (the weights of a diverged run?); "
                              "--allow-nonfinite-weights loads it anyway, for forensics", path,
                              slot >= 0 ? "the optimizer's " : "",
                              slot >= 0 ? optimizer_slot_name(opt, slot) : "", slot >= 0 ? " of " : "",
                              ti->name, v != v ? "NaN" : "Inf", (long long)bad, ti->count);
    }
    return DTNN_OK;
}

static dtnn_status load(const char *path, dtnn_model *m, dtnn_optimizer *opt,
                        dtnn_train_state *ts, dtnn_dataset *norm, const char *const *exclude,
                        int n_exclude, dtnn_error *err)
{
    dtnn_status st = check_model(path, m, opt, "load", err);
    if (st)
        return st;
    st_file f;
    if ((st = st_read(path, &f, err)) != DTNN_OK)
        return st;
    load_plan lp;
    memset(&lp, 0, sizeof lp);
    lp.exclude = exclude;
    lp.n_exclude = n_exclude;
    const size_t n_opt = opt ? (size_t)optimizer_slot_count(opt) * dtnn_model_tensor_count(m) : 0;
    lp.model = calloc(dtnn_model_tensor_count(m) ? dtnn_model_tensor_count(m) : 1, sizeof *lp.model);
    lp.opt = calloc(n_opt ? n_opt : 1, sizeof *lp.opt);
    if (!lp.model || !lp.opt)
        st = dtnn_error_set(err, DTNN_ERR_NOMEM, "checkpoint %s: out of memory", path);
    else
        st = plan_load(path, &f, m, opt, ts != NULL, norm != NULL, &lp, err);
    if (st == DTNN_OK && !model_build_params(m)->allow_nonfinite_weights)
        st = check_loaded_finite(path, &f, m, opt, &lp, err);
    if (st == DTNN_OK) {
        /* Everything validated: from here on nothing can fail. */
        for (int i = 0; i < dtnn_model_tensor_count(m); i++) {
            const dtnn_tensor_info *ti = dtnn_model_tensor(m, i);
            if (!lp.model[i])
                continue;   /* excluded: stays as it was */
            be_upload(model_backend(m), tensor_backend(m, ti), f.data + lp.model[i]->offset,
                      lp.model[i]->bytes);
        }
        for (size_t k = 0; k < n_opt; k++) {
            if (!lp.opt[k])
                continue;
            const dtnn_tensor_info *ti = dtnn_model_tensor(m, k % dtnn_model_tensor_count(m));
            float *dst = optimizer_state(opt) + (k / dtnn_model_tensor_count(m)) * optimizer_length(opt) + ti->offset;
            be_upload(model_backend(m), dst, f.data + lp.opt[k]->offset, lp.opt[k]->bytes);
        }
        if (opt)
            optimizer_set_step(opt, lp.opt_step);
        if (ts) {
            *ts = lp.ts;
            dtnn_model_set_step(m, lp.model_step);
        }
        if (norm) {
            for (int c = 0; c < 4; c++) {
                norm->mean[c] = lp.has_norm ? lp.mean[c] : 0.0f;
                norm->std[c] = lp.has_norm ? lp.std[c] : 1.0f;
            }
            if (lp.dataset)
                snprintf(norm->name, sizeof norm->name, "%s", lp.dataset);
        }
    }
    free(lp.model);
    free(lp.opt);
    st_free(&f);
    return st;
}

dtnn_status dtnn_checkpoint_load(const char *path, dtnn_model *m, dtnn_optimizer *opt,
                                 dtnn_train_state *ts, dtnn_dataset *norm, dtnn_error *err)
{
    return load(path, m, opt, ts, norm, NULL, 0, err);
}

dtnn_status dtnn_checkpoint_load_weights(const char *path, dtnn_model *m,
                                         const char *const *exclude, int n_exclude,
                                         dtnn_error *err)
{
    if (n_exclude < 0 || (n_exclude > 0 && !exclude))
        return dtnn_error_set(err, DTNN_ERR_ARG, "checkpoint %s: %d exclusion patterns",
                              path ? path : "(null)", n_exclude);
    return load(path, m, NULL, NULL, NULL, exclude, n_exclude, err);
}

/* For a supervisor choosing what to resume from: the whole file is read, so its checksum (and
 * every bound the reader checks) vouches that the file is complete, and only then is its
 * training state believed. No model is needed, since nothing is loaded. */
dtnn_status dtnn_checkpoint_read_state(const char *path, dtnn_train_state *ts, dtnn_error *err)
{
    if (!path || !ts)
        return dtnn_error_set(err, DTNN_ERR_ARG, "dtnn_checkpoint_read_state: NULL argument");
    st_file f;
    dtnn_status st = st_read(path, &f, err);
    if (st)
        return st;
    const char *format = st_meta(&f, "format"), *version = st_meta(&f, "version");
    dtnn_train_state s;
    memset(&s, 0, sizeof s);
    if (!format || strcmp(format, CKPT_FORMAT) != 0 || !st_meta(&f, "step"))
        st = dtnn_error_set(err, DTNN_ERR_FORMAT, "checkpoint %s: no dtnn training state, so "
                            "it cannot resume training", path);
    else if (!version || (strcmp(version, "1") != 0 && !f.checksummed))
        st = dtnn_error_set(err, DTNN_ERR_FORMAT, "checkpoint %s: version '%.32s' without its "
                            "checksum: the file was altered", path, version ? version : "(none)");
    else if (!(st = ckpt_meta_i64(path, &f, "step", &s.step, err)) &&
             !(st = ckpt_meta_i64(path, &f, "epoch", &s.epoch, err)) &&
             !(st = ckpt_meta_i64(path, &f, "step_in_epoch", &s.step_in_epoch, err)) &&
             !(st = ckpt_meta_u64(path, &f, "seed", UINT64_MAX, &s.seed, err)) &&
             !(st = ckpt_meta_i64(path, &f, "global_batch", &s.global_batch, err)))
        st = ckpt_meta_monitor(path, &f, &s, err);
    if (st == DTNN_OK)
        *ts = s;
    st_free(&f);
    return st;
}

dtnn_status ckpt_read_average(const char *path, dtnn_model *m, void *params, void *buffers,
                              int64_t *count, dtnn_error *err)
{
    st_file f;
    dtnn_status st = st_read(path, &f, err);
    if (st)
        return st;
    if (!st_meta(&f, "ema_count"))
        st = dtnn_error_set(err, DTNN_ERR_FORMAT, "checkpoint %s holds no averaged weights "
                            "(saved without --ema)", path);
    else
        st = ckpt_meta_i64(path, &f, "ema_count", count, err);
    const snapshot h = {params, buffers, NULL};
    for (int i = 0; i < dtnn_model_tensor_count(m) && !st; i++) {
        const dtnn_tensor_info *ti = dtnn_model_tensor(m, i);
        char name[300];
        snprintf(name, sizeof name, AVG_PREFIX "%s", ti->name);
        const st_tensor *t;
        if (!(st = match_tensor(path, &f, name, ti, ti->dtype, &t, err)))
            memcpy(tensor_host(&h, ti), f.data + t->offset, t->bytes);
    }
    st_free(&f);
    return st;
}

dtnn_status dtnn_checkpoint_load_average(const char *path, dtnn_model *m, dtnn_error *err)
{
    const size_t pbytes = sizeof(float) * dtnn_model_params_padded(m);
    const size_t bbytes = dtnn_model_buffer_bytes(m);
    void *params = calloc(1, pbytes ? pbytes : 1), *buffers = calloc(1, bbytes ? bbytes : 1);
    int64_t count;
    dtnn_status st = !params || !buffers
                         ? dtnn_error_set(err, DTNN_ERR_NOMEM, "checkpoint %s: out of memory",
                                          path)
                         : ckpt_read_average(path, m, params, buffers, &count, err);
    if (!st)
        st = dtnn_model_write(m, DTNN_REGION_PARAMS, 0, params, pbytes, err);
    if (!st && bbytes)
        st = dtnn_model_write(m, DTNN_REGION_BUFFERS, 0, buffers, bbytes, err);
    free(params);
    free(buffers);
    return st;
}
