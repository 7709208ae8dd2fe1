/*
 * test_guarded.c — the cpu-guarded backend really guards: a host read or write of model
 * memory outside a backend call dies with SIGSEGV (checked in a child process), the same
 * access inside a call works, and the public copies work around it. Without this test the
 * guarded pass of the suite could not fail when the guard itself broke.
 */
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "model/model_internal.h"
#include "testutil.h"

static dtnn_model *guarded_model(const char *device)
{
    dtnn_error err;
    dtnn_model *m = dtnn_model_from_spec("lenet5", 10, 0, 0, 0, &err);
    CHECK(m != NULL);
    if (!m)
        return NULL;
    dtnn_build_params bp;
    dtnn_build_params_default(&bp);
    bp.max_batch = 2;
    bp.device = device;
    CHECK_OK(dtnn_model_build(m, &bp, &err), &err);
    return m;
}

enum { FAULTED = 99 };

/* The child's own SIGSEGV handler (a sanitizer's would report and exit otherwise). */
static void on_segv(int sig)
{
    (void)sig;
    _exit(FAULTED);
}

/* Runs fn(m) in a child; returns FAULTED when it took a segmentation fault, else its exit
 * status. */
static int child_status(dtnn_model *m, void (*fn)(dtnn_model *m))
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_segv;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGSEGV, &sa, NULL);
        sigaction(SIGBUS, &sa, NULL);
        fn(m);
        _exit(0);
    }
    int status = 0;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
    if (WIFSIGNALED(status))
        return WTERMSIG(status) == SIGSEGV ? FAULTED : 128 + WTERMSIG(status);
    return WEXITSTATUS(status);
}

static volatile float sink;

static void read_params(dtnn_model *m) { sink = m->params[0]; }
static void write_grads(dtnn_model *m) { m->grads[0] = 1.0f; }
static void read_activations(dtnn_model *m) { sink = m->activations[0]; }

static void read_inside_call(dtnn_model *m)
{
    be_enter(m->be);
    sink = m->params[0];
    be_leave(m->be);
}

int main(void)
{
    dtnn_model *g = guarded_model("cpu-guarded");
    if (!g)
        return test_finish("test_guarded");
    CHECK(!strcmp(dtnn_model_device(g), "cpu-guarded"));
    CHECK(child_status(g, read_params) == FAULTED);
    CHECK(child_status(g, write_grads) == FAULTED);
    CHECK(child_status(g, read_activations) == FAULTED);
    CHECK(child_status(g, read_inside_call) == 0);

    /* The copies reach the same values on both backends (same seed: same initialisation). */
    dtnn_model *c = guarded_model("cpu");
    dtnn_error err;
    const size_t bytes = sizeof(float) * dtnn_model_params_padded(g);
    float *pg = malloc(bytes), *pc = malloc(bytes);
    CHECK_OK(dtnn_model_read(g, DTNN_REGION_PARAMS, 0, pg, bytes, &err), &err);
    CHECK_OK(dtnn_model_read(c, DTNN_REGION_PARAMS, 0, pc, bytes, &err), &err);
    CHECK(!memcmp(pg, pc, bytes));
    CHECK(child_status(c, read_params) == 0);   /* the cpu backend's memory is the host's */

    /* Out of range: an error naming the region, nothing copied. */
    CHECK(dtnn_model_read(g, DTNN_REGION_PARAMS, bytes - 4, pg, 8, &err) == DTNN_ERR_ARG);
    CHECK(strstr(err.message, "parameters") != NULL);
    printf("cpu-guarded: host access outside a call -> SIGSEGV, inside a call and through the "
           "copies -> works\n");
    free(pg);
    free(pc);
    dtnn_model_free(c);
    dtnn_model_free(g);
    return test_finish("test_guarded");
}
