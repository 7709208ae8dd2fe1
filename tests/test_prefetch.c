/*
 * test_prefetch.c — batches uploaded ahead (dtnn_model_prefetch, model/model_prefetch.c) on a
 * backend whose memory the host cannot touch: $DTNN_DEVICE where it is one (cuda: the copy
 * stream), else cpu-guarded (whose uploads are synchronous, so the bookkeeping runs without a
 * GPU). A prefetched batch gives the forward of that batch the
 * same output as uploading it there; micro-batches covering it take their parts; a forward of
 * another batch ignores the prefetched one; once used, a batch is forgotten, so new contents
 * at the same address are uploaded, not the old ones; batches alternate between the two
 * device inputs without one overwriting the other; a host backend (cpu) and an inference
 * model do nothing. Training through the trainer with prefetching is compared with cpu bit for
 * bit by the guarded pass of the suite (test_e2e_guarded, cli_*_guarded).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

enum { BATCH = 6, CLASSES = 5 };

static dtnn_model *net(const char *device, int training)
{
    dtnn_error err;
    dtnn_model *m = dtnn_model_create(2, 6, 6);
    CHECK(dtnn_model_add(m, "conv2d", "conv", "filters=3 kernel=3", NULL, 0, &err) >= 0);
    CHECK(dtnn_model_add(m, "relu", NULL, "", NULL, 0, &err) >= 0);
    CHECK(dtnn_model_add(m, "flatten", NULL, "", NULL, 0, &err) >= 0);
    CHECK(dtnn_model_add(m, "linear", "fc", "outputs=5", NULL, 0, &err) >= 0);
    dtnn_build_params bp;
    dtnn_build_params_default(&bp);
    bp.max_batch = BATCH;
    bp.training = training;
    bp.device = device;
    CHECK_OK(dtnn_model_build(m, &bp, &err), &err);
    return m;
}

/* The logits of a forward of x (n samples), in training mode. */
static void logits(dtnn_model *m, const float *x, int n, float *out)
{
    dtnn_error err;
    CHECK_OK(dtnn_model_forward(m, x, n, 1, &err), &err);
    dtnn_model_read_output(m, out);
}

int main(void)
{
    const int sample = 2 * 6 * 6;
    float *x1 = malloc(sizeof(float) * BATCH * sample), *x2 = malloc(sizeof(float) * BATCH * sample);
    float want1[BATCH * CLASSES], want2[BATCH * CLASSES], got[BATCH * CLASSES];
    test_fill(x1, (size_t)BATCH * sample, 1);
    test_fill(x2, (size_t)BATCH * sample, 2);
    dtnn_error err;

    const char *device = strcmp(tu_device(), "cpu") ? tu_device() : "cpu-guarded";
    printf("device: %s\n", device);
    dtnn_model *m = net(device, 1);
    CHECK(dtnn_model_prefetches(m));
    logits(m, x1, BATCH, want1);
    logits(m, x2, BATCH, want2);

    CHECK_OK(dtnn_model_prefetch(m, x1, BATCH, &err), &err);
    logits(m, x1, BATCH, got);
    tu_same_bits("prefetched batch", got, want1, sizeof(float) * BATCH * CLASSES);

    /* the next two alternate slots: x2 prefetched while x1's slot is current */
    CHECK_OK(dtnn_model_prefetch(m, x2, BATCH, &err), &err);
    logits(m, x2, BATCH, got);
    tu_same_bits("the next prefetched batch, in the other slot", got, want2,
                 sizeof(float) * BATCH * CLASSES);
    CHECK_OK(dtnn_model_prefetch(m, x1, BATCH, &err), &err);
    logits(m, x1, BATCH, got);
    tu_same_bits("and back in the first", got, want1, sizeof(float) * BATCH * CLASSES);

    /* Micro-batches covering the prefetched batch once. They are compared with the same
     * micro-batches uploaded directly, not with the whole batch's logits: a GEMM over 2 rows
     * and one over 6 may block and sum differently (OpenBLAS does, by CPU core), so only the
     * same shapes on the same data are equal by construction. */
    float want_micro[BATCH * CLASSES];
    logits(m, x2, 2, want_micro);
    logits(m, x2 + 2 * sample, BATCH - 2, want_micro + 2 * CLASSES);
    CHECK_OK(dtnn_model_prefetch(m, x2, BATCH, &err), &err);
    logits(m, x2, 2, got);
    logits(m, x2 + 2 * sample, BATCH - 2, got + 2 * CLASSES);
    tu_same_bits("micro-batches of a prefetched batch", got, want_micro,
                 sizeof(float) * BATCH * CLASSES);

    /* a forward of another batch: the prefetched one is not used for it */
    CHECK_OK(dtnn_model_prefetch(m, x1, BATCH, &err), &err);
    logits(m, x2, BATCH, got);
    tu_same_bits("another batch than the prefetched one", got, want2,
                 sizeof(float) * BATCH * CLASSES);

    /* used once, then forgotten: new contents at the same address are uploaded */
    CHECK_OK(dtnn_model_prefetch(m, x1, BATCH, &err), &err);
    logits(m, x1, BATCH, got);
    float *saved = malloc(sizeof(float) * BATCH * sample);
    memcpy(saved, x1, sizeof(float) * BATCH * sample);
    memcpy(x1, x2, sizeof(float) * BATCH * sample);
    logits(m, x1, BATCH, got);
    tu_same_bits("new contents at a prefetched address, after its use", got, want2,
                 sizeof(float) * BATCH * CLASSES);
    memcpy(x1, saved, sizeof(float) * BATCH * sample);

    /* the caller's buffer may change as soon as prefetch returns */
    CHECK_OK(dtnn_model_prefetch(m, x1, BATCH, &err), &err);
    memcpy(saved, x1, sizeof(float) * BATCH * sample);
    test_fill(x1, (size_t)BATCH * sample, 99);
    logits(m, x1, BATCH, got);
    tu_same_bits("caller's buffer overwritten after prefetch", got, want1,
                 sizeof(float) * BATCH * CLASSES);
    memcpy(x1, saved, sizeof(float) * BATCH * sample);

    CHECK(dtnn_model_prefetch(m, x1, BATCH + 1, &err) == DTNN_ERR_ARG);
    dtnn_model_free(m);

    /* nothing to do on the host's memory, or for inference */
    dtnn_model *c = net("cpu", 1), *inf = net(device, 0);
    CHECK(!dtnn_model_prefetches(c) && !dtnn_model_prefetches(inf));
    float want_cpu[BATCH * CLASSES];
    logits(c, x1, BATCH, want_cpu);
    CHECK_OK(dtnn_model_prefetch(c, x2, BATCH, &err), &err);
    logits(c, x1, BATCH, got);
    tu_same_bits("cpu: prefetch is a no-op", got, want_cpu, sizeof(float) * BATCH * CLASSES);
    dtnn_model_free(c);
    dtnn_model_free(inf);
    free(x1), free(x2), free(saved);
    return test_finish("test_prefetch");
}
