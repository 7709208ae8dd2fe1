/*
 * test_gpu_nccl.c — the NCCL communicator (comm/comm_nccl.c) on the GPUs this process sees: one
 * rank (a communicator of one process below), or every rank of an MPI launch (`mpirun -np N
 * test_gpu_nccl` on a node with N GPUs). Blocking and non-blocking sums of device memory equal
 * the rank count times every rank's values, exactly (small integers); a non-blocking sum is
 * ordered before what the compute stream queues after its wait; host buffers go to the
 * communicator below; a gradient all-reduce (grad_sync) on it leaves one rank's training as
 * without it; half-precision transport is refused with a message. Skipped (exit 77, one line
 * why) without NCCL in the build or a GPU.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#if !defined(DTNN_HAVE_CUDA) || !defined(DTNN_HAVE_NCCL)
int main(void)
{
    printf("test_gpu_nccl: skipped: this dtnn was built without the cuda backend or NCCL\n");
    return 77;
}
#else

#include "backend/backend.h"
#include "comm/comm_internal.h"
#include "model/model_internal.h"

static dtnn_model *small_model(dtnn_error *err)
{
    dtnn_model *m = dtnn_model_create(1, 8, 8);
    dtnn_model_add(m, "conv2d", "conv", "filters=4 kernel=3", NULL, 0, err);
    dtnn_model_add(m, "flatten", NULL, "", NULL, 0, err);
    dtnn_model_add(m, "linear", "fc", "outputs=3", NULL, 0, err);
    dtnn_build_params bp;
    dtnn_build_params_default(&bp);
    bp.max_batch = 4;
    bp.device = "cuda";
    bp.optimizer_slots = 1;
    CHECK_OK(dtnn_model_build(m, &bp, err), err);
    return m;
}

/* Every element equal to want; prints the first that is not. */
static void expect_all(const char *label, const float *got, size_t n, float want_per_rank,
                       int size)
{
    size_t bad = 0;
    for (size_t i = 0; i < n; i++)
        if (got[i] != want_per_rank * (float)(i % 7 + 1) * (float)size && !bad++)
            fprintf(stderr, "%s: element %zu is %g, want %g\n", label, i, got[i],
                    want_per_rank * (float)(i % 7 + 1) * (float)size);
    printf("%-52s n=%zu %s\n", label, n, bad ? "FAIL" : "exact");
    test_failures += bad != 0;
}

int main(int argc, char **argv)
{
    char why[200];
    if (cuda_backend_device_count(why, sizeof why) <= 0) {
        printf("test_gpu_nccl: skipped: no CUDA device (%s)\n", why);
        return 77;
    }
    dtnn_error err;
    dtnn_comm *below = dtnn_comm_create_auto(&argc, &argv, &err);
    if (!below) {
        fprintf(stderr, "FAIL: %s\n", err.message);
        return 1;
    }
    const int size = dtnn_comm_size(below);
    dtnn_model *m = small_model(&err);
    dtnn_comm *c = dtnn_comm_nccl_create(below, m, &err);
    if (!c) {
        fprintf(stderr, "FAIL: %s\n", err.message);
        return 1;
    }
    printf("communicator: %s, rank %d of %d\n", c->name, c->rank, c->size);
    const size_t n = 100003;
    float *h = malloc(sizeof(float) * n), *got = malloc(sizeof(float) * n);
    float *d = be_alloc(m->be, sizeof(float) * n);
    for (size_t i = 0; i < n; i++)
        h[i] = (float)(i % 7 + 1);
    be_upload(m->be, d, h, sizeof(float) * n);
    CHECK_OK(dtnn_comm_allreduce_sum(c, d, n, &err), &err);
    be_download(m->be, got, d, sizeof(float) * n);
    expect_all("blocking sum of device memory", got, n, 1.0f, size);

    /* non-blocking: the compute stream's fill after the wait comes after the sum */
    be_upload(m->be, d, h, sizeof(float) * n);
    int req = -1, done = 0;
    CHECK_OK(comm_iallreduce(c, d, n, DTNN_COMM_F32, &req, &err), &err);
    CHECK_OK(comm_test(c, req, &done, &err), &err);
    CHECK_OK(comm_wait(c, req, &err), &err);
    be_run(m->be, copy_rows, 1, n, d, n, d, n, 1);  /* d += d on the compute stream */
    be_download(m->be, got, d, sizeof(float) * n);
    expect_all("non-blocking sum, then compute after wait", got, n, 2.0f, size);

    /* host memory goes to the communicator below */
    memcpy(got, h, sizeof(float) * n);
    CHECK_OK(dtnn_comm_allreduce_sum(c, got, n, &err), &err);
    expect_all("host memory (the communicator below)", got, n, 1.0f, size);

    /* a gradient all-reduce on it: one rank's gradients unchanged; several: their mean */
    dtnn_grad_sync *gs = dtnn_grad_sync_create(c, m, DTNN_ALLREDUCE_OVERLAP, 0.001,
                                               DTNN_COMM_F32, &err);
    CHECK(gs != NULL);
    dtnn_grad_sync *half = dtnn_grad_sync_create(c, m, DTNN_ALLREDUCE_OVERLAP, 0.001,
                                                 DTNN_COMM_BF16, &err);
    CHECK(half == NULL && strstr(err.message, "fp32"));
    if (gs) {
        float x[4 * 64];
        int32_t y[4] = {0, 1, 2, 1};
        test_fill(x, 4 * 64, 5);
        dtnn_loss_params lp;
        dtnn_loss_params_default(&lp);
        const size_t ng = dtnn_model_grads_length(m);
        float *before = malloc(sizeof(float) * ng), *after = malloc(sizeof(float) * ng);
        for (int pass = 0; pass < 2; pass++) {
            dtnn_model_zero_grad(m);
            if (pass)
                dtnn_grad_sync_begin(gs);
            CHECK_OK(dtnn_model_forward(m, x, 4, 1, &err), &err);
            CHECK_OK(dtnn_model_loss(m, y, 4, &lp, 1.0f / (float)(4 * size), NULL, &err),
                     &err);
            CHECK_OK(dtnn_model_backward(m, &err), &err);
            if (pass)
                CHECK_OK(dtnn_grad_sync_finish(gs, &err), &err);
            CHECK_OK(dtnn_model_read(m, DTNN_REGION_GRADS, 0, pass ? after : before,
                                     sizeof(float) * ng, &err), &err);
        }
        /* the same data on every rank: the sum over ranks of grads / size is the grads */
        test_compare("gradients after the NCCL all-reduce", after, before, ng, 1e-6, 1e-5);
        printf("buckets: %d\n", dtnn_grad_sync_bucket_count(gs));
        free(before), free(after);
        dtnn_grad_sync_free(gs);
    }
    be_free(m->be, d);
    free(h), free(got);
    dtnn_comm_free(c);
    dtnn_model_free(m);
    const int rc = test_finish("test_gpu_nccl");
    dtnn_comm_free(below);
    return rc;
}
#endif
