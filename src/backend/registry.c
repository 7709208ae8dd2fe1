/*
 * registry.c — the list of backends, one line each, and the one place a backend is made by
 * name: dtnn__backend_create checks every table against the list of operations
 * (DTNN_BACKEND_OPS) before the engine may call it, so a backend that lacks an operation is
 * refused at creation with its name, never as a NULL call in a step. "cuda" is listed always
 * (cuda/cuda_absent.c where it is not built), so that `dtnn devices` and an error for
 * --device cuda say whether this build has it and whether a device was found.
 *
 * A new backend: its folder defines a backend_registration, and one line here lists it.
 */
#include <string.h>

#include "../core/internal.h"
#include "backend.h"

extern const backend_registration cpu_registration;
extern const backend_registration guarded_registration;
extern const backend_registration cuda_registration;

static const backend_registration *const registry[] = {
    &cpu_registration,
    &guarded_registration,
    &cuda_registration,
};

enum { REGISTRY_SIZE = (int)(sizeof registry / sizeof registry[0]) };

#define BE_OP_NAME(need, ret, name, params) #name,
static const char *const op_names[BACKEND_OP_COUNT] = {DTNN_BACKEND_OPS(BE_OP_NAME)};
#undef BE_OP_NAME

const char *backend_op_name(int i)
{
    return i >= 0 && i < BACKEND_OP_COUNT ? op_names[i] : NULL;
}

int backend_ops_missing(const dtnn_backend_ops *ops, char *msg, size_t len)
{
    int missing = 0;
    size_t at = 0;
    if (len)
        msg[0] = '\0';
#define BE_OP_CHECK(need, ret, name, params)                                                   \
    if ((need) && !ops->name) {                                                                \
        int w = len ? snprintf(msg + at, len - at, "%s%s", missing ? ", " : "", #name) : 0;   \
        if (w > 0 && (size_t)w < len - at)                                                     \
            at += (size_t)w;                                                                   \
        missing++;                                                                             \
    }
    DTNN_BACKEND_OPS(BE_OP_CHECK)
#undef BE_OP_CHECK
    return missing;
}

static const backend_registration *find(const char *name)
{
    for (int i = 0; i < REGISTRY_SIZE; i++)
        if (!strcmp(registry[i]->name, name))
            return registry[i];
    return NULL;
}

/* "cpu, cpu-guarded, cuda" */
static void list_names(char *out, size_t len)
{
    size_t at = 0;
    out[0] = '\0';
    for (int i = 0; i < REGISTRY_SIZE; i++) {
        int w = snprintf(out + at, len - at, "%s%s", i ? ", " : "", registry[i]->name);
        if (w > 0 && (size_t)w < len - at)
            at += (size_t)w;
    }
}

dtnn_backend *dtnn__backend_create(const char *name, int threads, dtnn_error *err)
{
    if (!name || !*name)
        name = "cpu";
    const backend_registration *r = find(name);
    if (!r) {
        char names[128];
        list_names(names, sizeof names);
        dtnn_error_set(err, DTNN_ERR_ARG, "unknown device '%s' (%s; dtnn devices says which "
                       "are usable here)", name, names);
        return NULL;
    }
    if (!r->create) {
        char why[sizeof err->message] = "not built into this dtnn";
        if (r->probe)
            r->probe(why, sizeof why);
        dtnn_error_set(err, DTNN_ERR_ARG, "device '%s': %s", name, why);
        return NULL;
    }
    dtnn_backend *be = r->create(threads, err);
    if (!be)
        return NULL;
    char missing[512];
    if (backend_ops_missing(be->op, missing, sizeof missing)) {
        dtnn_error_set(err, DTNN_ERR_UNSUPPORTED, "device '%s': its backend lacks the "
                       "operations %s", name, missing);
        dtnn__backend_free(be);
        return NULL;
    }
    return be;
}

void dtnn__backend_free(dtnn_backend *be)
{
    if (be)
        be->op->destroy(be);
}

int dtnn_device_count(void) { return REGISTRY_SIZE; }

const char *dtnn_device_name(int i, int *usable, char *why, size_t len)
{
    if (i < 0 || i >= REGISTRY_SIZE)
        return NULL;
    const backend_registration *r = registry[i];
    if (!usable && (!why || !len))
        return r->name;    /* only the name: no backend is made (a GPU's takes seconds) */
    char reason[sizeof ((dtnn_error *)0)->message] = "";
    int ok;
    if (r->probe) {
        ok = r->probe(reason, sizeof reason);
    } else {
        dtnn_error err;
        dtnn_backend *be = dtnn__backend_create(r->name, 0, &err);
        ok = be != NULL;
        snprintf(reason, sizeof reason, "%s", be ? "usable" : err.message);
        dtnn__backend_free(be);
    }
    if (usable)
        *usable = ok;
    if (why && len)
        snprintf(why, len, "%s", reason);
    return r->name;
}
