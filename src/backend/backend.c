/*
 * backend.c — the list of backends, made by name, and the bracketed host <-> backend copies
 * every engine file uses. "cuda" is listed always, so that `dtnn devices` and an error for
 * --device cuda say whether this build has it and whether a device was found.
 */
#include <string.h>

#include "../core/internal.h"
#include "backend.h"

static const char *const backend_names[] = {"cpu", "cpu-guarded", "cuda"};

static void cpu_destroy(dtnn_backend *be) { free(be); }

static dtnn_backend *cpu_create(int threads, dtnn_error *err)
{
    dtnn_backend *be = calloc(1, sizeof *be);
    if (!be) {
        dtnn_error_set(err, DTNN_ERR_NOMEM, "out of memory creating the cpu backend");
        return NULL;
    }
    dtnn_set_threads(0);    /* the BLAS single-threaded inside dtnn's threads: gemm_blas.c */
    be->op = cpu_backend_ops();
    be->name = "cpu";
    be->host_memory = 1;
    be->threads = threads;
    return be;
}

dtnn_backend *dtnn_backend_create(const char *name, int threads, dtnn_error *err)
{
    if (!name || !*name || !strcmp(name, "cpu"))
        return cpu_create(threads, err);
    if (!strcmp(name, "cpu-guarded"))
        return guarded_backend_create(threads, err);
    if (!strcmp(name, "cuda")) {
#ifdef DTNN_HAVE_CUDA
        return cuda_backend_create(threads, err);
#else
        dtnn_error_set(err, DTNN_ERR_ARG, "device 'cuda': not built into this dtnn (configure "
                       "with the CUDA toolkit, cuDNN and cuBLAS installed: -DDTNN_CUDA=ON; "
                       "dtnn devices lists what is built)");
        return NULL;
#endif
    }
    dtnn_error_set(err, DTNN_ERR_ARG, "unknown device '%s' (cpu, cpu-guarded, cuda; dtnn "
                   "devices says which are usable here)", name);
    return NULL;
}

void dtnn_backend_free(dtnn_backend *be)
{
    if (!be)
        return;
    if (be->op->destroy)
        be->op->destroy(be);
    else
        cpu_destroy(be);
}

int dtnn_device_count(void) { return (int)(sizeof backend_names / sizeof backend_names[0]); }

const char *dtnn_device_name(int i, int *usable, char *why, size_t len)
{
    if (i < 0 || i >= dtnn_device_count())
        return NULL;
    const char *name = backend_names[i];
    if (!usable && (!why || !len))
        return name;    /* only the name: no backend is made (a GPU's takes seconds) */
    if (!strcmp(name, "cuda")) {
        /* The short forms `dtnn devices` prints; --device cuda gives the long ones. */
#ifdef DTNN_HAVE_CUDA
        char reason[200] = "";
        const int count = cuda_backend_device_count(reason, sizeof reason);
        dtnn_error err;
        dtnn_backend *be = count > 0 ? dtnn_backend_create(name, 0, &err) : NULL;
        if (usable)
            *usable = be != NULL;
        if (why && len) {
            if (be)
                snprintf(why, len, "usable (%d device%s)", count, count == 1 ? "" : "s");
            else if (count > 0)
                snprintf(why, len, "built, but not usable: %s", err.message);
            else
                snprintf(why, len, "built, no device found (%s)", reason);
        }
        dtnn_backend_free(be);
#else
        if (usable)
            *usable = 0;
        if (why && len)
            snprintf(why, len, "not built into this dtnn (no CUDA toolkit, cuDNN or cuBLAS "
                     "found at configure time, or -DDTNN_CUDA=OFF)");
#endif
        return name;
    }
    dtnn_error err;
    dtnn_backend *be = dtnn_backend_create(name, 0, &err);
    if (usable)
        *usable = be != NULL;
    if (why && len)
        snprintf(why, len, "%s", be ? "usable" : err.message);
    dtnn_backend_free(be);
    return name;
}

void be_upload(dtnn_backend *be, void *dst, const void *src, size_t bytes)
{
    if (bytes)
        be_run(be, upload, dst, src, bytes);
}

void be_download(dtnn_backend *be, void *dst, const void *src, size_t bytes)
{
    if (bytes)
        be_run(be, download, dst, src, bytes);
}

void be_zero(dtnn_backend *be, void *p, size_t bytes)
{
    if (bytes)
        be_run(be, zero, p, bytes);
}

void *be_alloc(dtnn_backend *be, size_t bytes)
{
    be_enter(be);
    void *p = be->op->alloc(be, bytes);
    be_leave(be);
    return p;
}

void be_free(dtnn_backend *be, void *p)
{
    if (p)
        be_run(be, free, p);
}

size_t be_count_nonfinite(dtnn_backend *be, const float *x, size_t n)
{
    be_enter(be);
    size_t bad = be->op->count_nonfinite(be, x, n);
    be_leave(be);
    return bad;
}
