/*
 * test_ema.c — the weights' average (--ema, src/train/ema.c) against its definition, torchvision's
 * ExponentialMovingAverage (an AveragedModel with use_buffers=True): the first update and a
 * restart copy the model, later ones give avg = decay avg + (1 - decay) w for every parameter
 * and float buffer, computed here in double over changing weights; integer buffers (batch
 * counts) are copied. A swap exchanges model and average exactly, twice restores both; host
 * copies round-trip. On every backend that runs here (cpu, cpu-guarded).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../src/train/ema.h"
#include "testutil.h"

static dtnn_model *small_bn_model(const char *device)
{
    dtnn_error err;
    dtnn_model *m = dtnn_model_create(2, 4, 4);
    CHECK(dtnn_model_add(m, "conv2d", "conv", "filters=3 kernel=3 padding=1", NULL, 0, &err) >= 0);
    CHECK(dtnn_model_add(m, "batchnorm", "bn", "", NULL, 0, &err) >= 0);
    CHECK(dtnn_model_add(m, "flatten", "flat", "", NULL, 0, &err) >= 0);
    CHECK(dtnn_model_add(m, "linear", "fc", "outputs=5", NULL, 0, &err) >= 0);
    dtnn_build_params bp;
    dtnn_build_params_default(&bp);
    bp.max_batch = 2;
    bp.training = 1;
    bp.device = device;
    CHECK_OK(dtnn_model_build(m, &bp, &err), &err);
    return m;
}

/* Writes fresh values into every float tensor (parameters and buffers) and step into the
 * batch count, through the public API (the memory may be a device's). */
static void set_weights(dtnn_model *m, unsigned seed, int64_t count)
{
    dtnn_error err;
    for (int i = 0; i < dtnn_model_tensor_count(m); i++) {
        const dtnn_tensor_info *t = dtnn_model_tensor(m, i);
        if (t->dtype == DTNN_I64) {
            int64_t *v = malloc(sizeof(int64_t) * t->count);
            for (size_t k = 0; k < t->count; k++)
                v[k] = count;
            CHECK_OK(dtnn_model_tensor_write(m, t, v, &err), &err);
            free(v);
            continue;
        }
        float *v = malloc(sizeof(float) * t->count);
        test_fill(v, t->count, seed + 31u * (unsigned)i);
        CHECK_OK(dtnn_model_tensor_write(m, t, v, &err), &err);
        free(v);
    }
}

/* The model's values, every tensor in order, as doubles (integers too). */
static double *read_all(dtnn_model *m, size_t *n)
{
    dtnn_error err;
    size_t total = 0;
    for (int i = 0; i < dtnn_model_tensor_count(m); i++)
        total += dtnn_model_tensor(m, i)->count;
    double *out = malloc(sizeof(double) * total);
    size_t at = 0;
    for (int i = 0; i < dtnn_model_tensor_count(m); i++) {
        const dtnn_tensor_info *t = dtnn_model_tensor(m, i);
        void *v = malloc(t->count * 8);
        CHECK_OK(dtnn_model_tensor_read(m, t, v, &err), &err);
        for (size_t k = 0; k < t->count; k++)
            out[at++] = t->dtype == DTNN_I64 ? (double)((int64_t *)v)[k] : ((float *)v)[k];
        free(v);
    }
    *n = total;
    return out;
}

static void run(const char *device)
{
    dtnn_error err;
    printf("==== %s\n", device);
    dtnn_model *m = small_bn_model(device);
    const float decay = 0.8f;
    train_ema *e = train_ema_create(m, decay, &err);
    CHECK(e != NULL);
    if (!e) {
        dtnn_model_free(m);
        return;
    }
    size_t n;
    set_weights(m, 1, 3);
    train_ema_update(e, 0); /* the first update copies */
    double *want = read_all(m, &n);
    for (int step = 0; step < 5; step++) {
        set_weights(m, 10u + (unsigned)step, 4 + step);
        double *w = read_all(m, &n);
        const int restart = step == 2; /* a warm-up epoch's update: a copy again */
        train_ema_update(e, restart);
        for (size_t k = 0; k < n; k++)
            want[k] = restart ? w[k] : (double)decay * want[k] + (1.0 - (double)decay) * w[k];
        /* batch counts are copied, not averaged */
        size_t at = 0;
        for (int i = 0; i < dtnn_model_tensor_count(m); i++) {
            const dtnn_tensor_info *t = dtnn_model_tensor(m, i);
            for (size_t k = 0; k < t->count; k++, at++)
                if (t->dtype == DTNN_I64)
                    want[at] = w[at];
        }
        free(w);
    }
    CHECK(train_ema_count(e) == 3);
    double *before = read_all(m, &n);
    train_ema_swap(e);
    double *avg = read_all(m, &n);
    /* float: a few roundings of decay, 1 - decay and the sum per update */
    double worst = 0.0;
    for (size_t k = 0; k < n; k++)
        worst = fmax(worst, fabs(avg[k] - want[k]) / fmax(1.0, fabs(want[k])));
    printf("average after 5 updates (one a restart): max rel error %.3g over %zu values\n",
           worst, n);
    CHECK(worst < 1e-6);
    train_ema_swap(e);
    double *back = read_all(m, &n);
    CHECK(!memcmp(back, before, sizeof(double) * n));
    /* host copies round-trip, count included */
    float *params;
    void *buffers;
    CHECK_OK(train_ema_to_host(e, &params, &buffers, &err), &err);
    train_ema_update(e, 1);
    train_ema_from_host(e, params, buffers, 3);
    CHECK(train_ema_count(e) == 3);
    train_ema_swap(e);
    double *again = read_all(m, &n);
    CHECK(!memcmp(again, avg, sizeof(double) * n));
    free(params);
    free(buffers);
    free(want);
    free(before);
    free(avg);
    free(back);
    free(again);
    train_ema_free(e);
    dtnn_model_free(m);
}

int main(void)
{
    run("cpu");
    run("cpu-guarded");
    return test_finish("test_ema");
}
