/*
 * test_gpu_nccl.c — the NCCL communicator (comm/comm_nccl.c) on the GPUs this process sees: one
 * rank (a communicator of one process below), or every rank of an MPI launch (`mpirun -np N
 * test_gpu_nccl` on a node with N GPUs). Blocking and non-blocking sums of device memory equal
 * the rank count times every rank's values, exactly (small integers); a non-blocking sum is
 * ordered before what the compute stream queues after its wait; host buffers go to the
 * communicator below; a gradient all-reduce (grad_sync) on it leaves one rank's training as
 * without it, in fp32, and in fp16 and bf16 transport (converted on the device: one rank gets
 * exactly core/half.h's round trip); with a stall timeout the same sums are watched, and on
 * several ranks a sum rank 1 never joins is reported on rank 0, naming its bucket and step,
 * and the communicator aborted. Skipped (exit 77, one line why) without NCCL in the
 * build or a GPU.
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
#include "backend/cuda/cuda_backend.h"
#include "comm/comm_internal.h"
#include "core/half.h"
#include "model/model_internal.h"

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

static void check_grad_sync(dtnn_comm *c, dtnn_model *m, dtnn_comm_dtype dtype,
                            const char *name, int size)
{
    dtnn_error err;
    dtnn_grad_sync *gs = dtnn_grad_sync_create(c, m, DTNN_ALLREDUCE_OVERLAP, 0.001, dtype, &err);
    CHECK_OK(gs ? DTNN_OK : err.code, &err);
    if (!gs)
        return;
    const size_t ng = dtnn_model_grads_length(m);
    float *before = malloc(sizeof(float) * ng), *after = malloc(sizeof(float) * ng);
    tu_small_net_grads(m, NULL, 1.0f / (float)(4 * size), before);
    tu_small_net_grads(m, gs, 1.0f / (float)(4 * size), after);
    char label[96];
    snprintf(label, sizeof label, "gradients after the NCCL all-reduce, %s (%d buckets)", name,
             dtnn_grad_sync_bucket_count(gs));
    if (dtype == DTNN_COMM_F32) {
        test_compare(label, after, before, ng, 1e-6, 1e-5);
    } else if (size == 1) {
        for (size_t i = 0; i < ng; i++)
            before[i] = dtype == DTNN_COMM_BF16
                            ? bf16_to_f32(f32_to_bf16(before[i]))
                            : f16_to_f32(f32_to_f16(before[i] * 1024.0f)) * (1.0f / 1024.0f);
        test_compare(label, after, before, ng, 0.0, 0.0);
    } else {
        /* the sum of identical halves, rounded per addition: within a few of bf16's steps */
        test_compare(label, after, before, ng, 1e-6, 2e-2);
    }
    free(before), free(after);
    dtnn_grad_sync_free(gs);
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
    dtnn_model *m = tu_small_net("cuda");
    if (!m)
        return 1;
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

    /* a gradient all-reduce on it, in each transport: one rank's gradients as without it
     * (in fp16 / bf16 exactly half.h's round trip, fp16 at the first step's scale 1024),
     * several ranks' (the same data) their mean */
    const dtnn_comm_dtype dtypes[] = {DTNN_COMM_F32, DTNN_COMM_F16, DTNN_COMM_BF16};
    const char *names[] = {"fp32", "fp16", "bf16"};
    for (int t = 0; t < 3; t++)
        check_grad_sync(c, m, dtypes[t], names[t], size);

    /* with --stall-timeout the host watches each sum: the same results, then a sum that one
     * rank never joins is reported and the communicator aborted (several ranks only) */
    dtnn_comm_set_stall_timeout(c, 60.0);
    be_upload(m->be, d, h, sizeof(float) * n);
    CHECK_OK(comm_iallreduce(c, d, n, DTNN_COMM_F32, &req, &err), &err);
    CHECK_OK(comm_wait(c, req, &err), &err);
    CHECK_OK(dtnn_comm_allreduce_sum(c, d, n, &err), &err);
    be_download(m->be, got, d, sizeof(float) * n);
    expect_all("two sums watched for stalls", got, n, 1.0f, size * size);
    check_grad_sync(c, m, DTNN_COMM_F32, "fp32, watched for stalls", size);
    if (size > 1) {
        dtnn_comm_set_stall_timeout(c, 2.0);
        comm_set_step(c, 7);
        if (c->rank == 0) {
            comm_set_purpose(c, "gradient bucket", 2, 5);
            const dtnn_status st = comm_iallreduce(c, d, n, DTNN_COMM_F32, &req, &err) ? 1
                                   : comm_wait(c, req, &err);
            printf("a sum rank 1 never joins: %s\n", st ? err.message : "no error  FAIL");
            CHECK(st == DTNN_ERR_COMM && strstr(err.message, "stalled") &&
                  strstr(err.message, "gradient bucket 3 of 5") && strstr(err.message, "step 7"));
            CHECK(dtnn_comm_allreduce_sum(c, d, n, &err) == DTNN_ERR_COMM &&
                  strstr(err.message, "aborted"));
        }
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
