/*
 * guarded.c — the "cpu-guarded" backend: the CPU kernels, on memory the host cannot touch
 * outside backend calls. Every allocation is its own anonymous mapping, kept PROT_NONE; a
 * call's enter opens all of them (PROT_READ | PROT_WRITE) and its leave closes them again. A
 * host access anywhere else (a layer file reading a tensor, a checkpoint writing parameters
 * without a download, MPI reducing gradients in place) is a SIGSEGV at the faulting line,
 * instead of code that works by accident on the CPU and fails on a device. Host-side staging
 * (host_alloc) is ordinary memory. It reports host_memory = 0, so the engine takes the same
 * paths it takes for a GPU (staged all-reduce, downloads for checkpoints): the suite run on
 * this backend tests them on any machine, and its results must equal the cpu backend's bit
 * for bit, since the arithmetic is the same code.
 *
 * Not for speed: each call costs two mprotect calls per allocation.
 */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS */
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../../core/internal.h"
#include "../backend.h"

typedef struct {
    void *p;
    size_t bytes;       /* mapped, page-rounded */
} region;

typedef struct {
    dtnn_backend_ops ops;   /* the CPU's, with memory and enter / leave replaced */
    const dtnn_backend_ops *cpu;
    region *regions;
    int n_regions, cap;
    int depth;              /* nested enters: only the outermost opens and closes */
} guarded_state;

static guarded_state *state_of(dtnn_backend *be) { return be->state; }

static void protect_all(guarded_state *g, int prot)
{
    for (int i = 0; i < g->n_regions; i++)
        DTNN_ASSERT(mprotect(g->regions[i].p, g->regions[i].bytes, prot) == 0);
}

static void guarded_enter(dtnn_backend *be)
{
    guarded_state *g = state_of(be);
    if (g->depth++ == 0) {
        protect_all(g, PROT_READ | PROT_WRITE);
        g->cpu->enter(be);
    }
}

static void guarded_leave(dtnn_backend *be)
{
    guarded_state *g = state_of(be);
    DTNN_ASSERT(g->depth > 0);
    if (--g->depth == 0) {
        g->cpu->leave(be);
        protect_all(g, PROT_NONE);
    }
}

static size_t page_round(size_t bytes)
{
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    return dtnn__round_up(bytes ? bytes : 1, page);
}

/* Called inside enter: the new mapping is opened now and closed with the others on leave. */
static void *guarded_alloc(dtnn_backend *be, size_t bytes)
{
    guarded_state *g = state_of(be);
    if (g->n_regions == g->cap) {
        int cap = g->cap ? 2 * g->cap : 16;
        region *r = realloc(g->regions, sizeof *r * (size_t)cap);
        if (!r)
            return NULL;
        g->regions = r;
        g->cap = cap;
    }
    const size_t mapped = page_round(bytes);
    void *p = mmap(NULL, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    g->regions[g->n_regions++] = (region){p, mapped};
    return p;
}

static void guarded_free(dtnn_backend *be, void *p)
{
    guarded_state *g = state_of(be);
    for (int i = 0; i < g->n_regions; i++) {
        if (g->regions[i].p != p)
            continue;
        munmap(p, g->regions[i].bytes);
        g->regions[i] = g->regions[--g->n_regions];
        return;
    }
    DTNN_ASSERT(!"cpu-guarded: freeing memory it did not allocate");
}

static void guarded_destroy(dtnn_backend *be)
{
    guarded_state *g = state_of(be);
    for (int i = 0; i < g->n_regions; i++)
        munmap(g->regions[i].p, g->regions[i].bytes);
    free(g->regions);
    free(g);
    free(be);
}

/* The cpu backend's table is taken from a cpu backend made through the registry (so its
 * kernel-set check and thread set-up run as for cpu), then that instance is freed: its table
 * is static, its state empty. */
static dtnn_backend *guarded_create(int threads, dtnn_error *err)
{
    dtnn_backend *cpu = dtnn__backend_create("cpu", threads, err);
    if (!cpu)
        return NULL;
    const dtnn_backend_ops *cpu_ops = cpu->op;
    const char *arithmetic = cpu->arithmetic;
    dtnn__backend_free(cpu);
    dtnn_backend *be = calloc(1, sizeof *be);
    guarded_state *g = calloc(1, sizeof *g);
    if (!be || !g) {
        free(be);
        free(g);
        dtnn_error_set(err, DTNN_ERR_NOMEM, "out of memory creating the cpu-guarded backend");
        return NULL;
    }
    g->cpu = cpu_ops;
    g->ops = *cpu_ops;
    g->ops.enter = guarded_enter;
    g->ops.leave = guarded_leave;
    g->ops.destroy = guarded_destroy;
    g->ops.alloc = guarded_alloc;
    g->ops.free = guarded_free;
    be->op = &g->ops;
    be->name = "cpu-guarded";
    be->arithmetic = arithmetic;
    be->host_memory = 0;
    be->threads = threads;
    be->state = g;
    return be;
}

const backend_registration guarded_registration = {"cpu-guarded", guarded_create, NULL};
