/*
 * test_half_transport.c — the backend operations that carry gradients in half precision
 * (half_pack, half_unpack: --comm-dtype fp16 | bf16, train/grad_sync.c), on $DTNN_DEVICE (cpu
 * by default; the guarded pass runs cpu-guarded; scripts/gpu-check.sh runs cuda). Every
 * backend must give core/half.h's bits exactly, since ranks on different backends sum each
 * other's values: packing (scaled, rounded to nearest even, overflow to infinity, subnormals,
 * signed zeros, NaN), widening, fp16's overflow flag (the gradient left untouched so the sum
 * can be redone in fp32) and its largest value, bf16 widened whatever it holds. Sizes: 1, 3
 * and 70001 values (past the CPU's threading threshold and a GPU's single block). Then the
 * gradient all-reduce's fp16 rules on top of them (check_fp16_scaling).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "core/half.h"
#include "testutil.h"

/* Values with every case the conversions treat apart, then a pseudo-random rest. */
static void gradients(float *g, size_t n)
{
    test_fill(g, n, 7);
    const float special[] = {0.0f, -0.0f, 1.0f, -2.5e-3f, 1e-9f, -6.1e-5f, 3e-8f, 65504.0f,
                             65519.0f, 65520.0f, 1e30f, INFINITY, -INFINITY, NAN, 1.0009765625f,
                             1.00048828125f, 3.3895e38f};
    const size_t k = sizeof special / sizeof special[0];
    for (size_t i = 0; i < n && i < k; i++)
        g[i] = special[i];
    for (size_t i = k; i < n; i += 97)
        g[i] *= 1e-6f;  /* small gradients, which the scale lifts out of fp16's subnormals */
}

/* n values of dtype packed with scale, on the backend, against half.h. */
static void check_pack(dtnn_backend *be, dtnn_comm_dtype dtype, size_t n, float scale)
{
    float *g = malloc(sizeof(float) * n);
    uint16_t *want = malloc(sizeof(uint16_t) * n), *got = malloc(sizeof(uint16_t) * n);
    gradients(g, n);
    for (size_t i = 0; i < n; i++)
        want[i] = dtype == DTNN_COMM_F16 ? f32_to_f16(g[i] * scale) : f32_to_bf16(g[i] * scale);
    float *dg = be_alloc(be, sizeof(float) * n);
    uint16_t *dh = be_alloc(be, sizeof(uint16_t) * n);
    be_upload(be, dg, g, sizeof(float) * n);
    be_run(be, half_pack, dtype, n, dg, scale, dh);
    be_download(be, got, dh, sizeof(uint16_t) * n);
    char label[96];
    snprintf(label, sizeof label, "pack %s, %zu values, scale %g", dtype == DTNN_COMM_F16 ?
             "fp16" : "bf16", n, scale);
    tu_same_bits(label, got, want, sizeof(uint16_t) * n);
    be_free(be, dg);
    be_free(be, dh);
    free(g);
    free(want);
    free(got);
}

/* Widening of n packed values (an infinity at `bad` when bad < n) into a gradient that holds
 * a marker, on the backend, against half.h; the stats too for fp16. */
static void check_unpack(dtnn_backend *be, dtnn_comm_dtype dtype, size_t n, float inv, size_t bad)
{
    const int fp16 = dtype == DTNN_COMM_F16;
    uint16_t *h = malloc(sizeof(uint16_t) * n);
    float *g = malloc(sizeof(float) * n), *want = malloc(sizeof(float) * n);
    float *got = malloc(sizeof(float) * n);
    gradients(g, n);
    for (size_t i = 0; i < n; i++) {
        /* finite sums: the specials' infinities and NaN stand for an overflow only at `bad` */
        const float v = isfinite(g[i]) && fabsf(g[i]) < 6e4f ? g[i] : 0.5f;
        h[i] = fp16 ? f32_to_f16(v * 1024.0f) : f32_to_bf16(v);
    }
    if (bad < n)
        h[bad] = fp16 ? 0x7c00u : 0xff80u;      /* +inf in fp16, -inf in bf16 */
    float largest = 0.0f;
    for (size_t i = 0; i < n; i++) {
        want[i] = fp16 ? f16_to_f32(h[i]) * inv : bf16_to_f32(h[i]) * inv;
        largest = fmaxf(largest, fabsf(want[i]));
    }
    const int overflow = fp16 && bad < n;
    if (overflow)
        for (size_t i = 0; i < n; i++)
            want[i] = -7.0f;                    /* the marker: nothing written */
    for (size_t i = 0; i < n; i++)
        got[i] = -7.0f;
    uint16_t *dh = be_alloc(be, sizeof(uint16_t) * n);
    float *dg = be_alloc(be, sizeof(float) * n), *dstats = be_alloc(be, 2 * sizeof(float));
    be_upload(be, dh, h, sizeof(uint16_t) * n);
    be_upload(be, dg, got, sizeof(float) * n);
    be_run(be, half_unpack, dtype, n, dh, inv, dg, fp16 ? dstats : NULL);
    be_download(be, got, dg, sizeof(float) * n);
    char label[128];
    snprintf(label, sizeof label, "unpack %s, %zu values, 1/scale %g%s", fp16 ? "fp16" : "bf16",
             n, inv, bad < n ? ", one infinite" : "");
    tu_same_bits(label, got, want, sizeof(float) * n);
    if (fp16) {
        float stats[2];
        be_download(be, stats, dstats, sizeof stats);
        const float want_stats[2] = {overflow ? 1.0f : 0.0f, overflow ? 0.0f : largest};
        snprintf(label, sizeof label, "  its stats {%g, %g}", (double)stats[0], (double)stats[1]);
        tu_same_bits(label, stats, want_stats, sizeof stats);
    }
    be_free(be, dh);
    be_free(be, dg);
    be_free(be, dstats);
    free(h);
    free(g);
    free(want);
    free(got);
}

/* grad_sync's fp16 transport on one process (its sum is the rank's own values), one bucket,
 * its scale followed over four steps whose gradients peak at 100, 100, 450 and 2500: the
 * first overflows at the starting scale 1024, so it is redone in fp32 and the scale drops to
 * 4; the second travels at 4 and sets the scale from its largest value (2^floor(log2(16384 /
 * largest)): 128); the third fits at 128 but would overflow at twice that; the fourth
 * overflows at the third's 32 but would not at half of it. So a scale off by a factor of two
 * either way shows. Each step against the same rules applied on the host with half.h,
 * exactly. On cpu the communicator works on the backend's memory in place; on cpu-guarded (a
 * GPU's path) it goes through host copies. */
static void check_fp16_scaling(void)
{
    dtnn_error err;
    dtnn_model *m = tu_small_net(tu_device());
    if (!m)
        return;
    dtnn_comm *c = dtnn_comm_create_single();
    dtnn_grad_sync *gs = dtnn_grad_sync_create(c, m, DTNN_ALLREDUCE_BLOCKING, 1.0,
                                               DTNN_COMM_F16, &err);
    CHECK_OK(gs ? DTNN_OK : err.code, &err);
    const size_t n = dtnn_model_grads_length(m);
    float *g = malloc(sizeof(float) * n), *want = malloc(sizeof(float) * n);
    float *got = malloc(sizeof(float) * n);
    tu_small_net_grads(m, NULL, 1.0f, g);
    float unit = 0.0f;
    for (size_t i = 0; i < n; i++)
        unit = fmaxf(unit, fabsf(g[i]));
    const float peaks[] = {100.0f, 100.0f, 450.0f, 2500.0f};
    const int overflows[] = {1, 0, 0, 1};
    float scale = 1024.0f;
    for (int step = 0; step < 4 && gs; step++) {
        const float loss_scale = peaks[step] / unit;
        tu_small_net_grads(m, NULL, loss_scale, g);
        int overflow = 0;
        float top = 0.0f;
        for (size_t i = 0; i < n; i++)
            overflow |= (f32_to_f16(g[i] * scale) & 0x7c00u) == 0x7c00u;
        for (size_t i = 0; i < n; i++) {
            want[i] = overflow ? g[i] : f16_to_f32(f32_to_f16(g[i] * scale)) * (1.0f / scale);
            top = fmaxf(top, fabsf(want[i]));
        }
        tu_small_net_grads(m, gs, loss_scale, got);
        char label[96];
        snprintf(label, sizeof label, "grad_sync fp16, step %d at scale %g%s", step + 1,
                 (double)scale, overflow ? ": overflow, redone in fp32" : "");
        tu_same_bits(label, got, want, sizeof(float) * n);
        CHECK(overflow == overflows[step]);
        scale = overflow ? scale / 256.0f
                         : fminf(ldexpf(1.0f, (int)floorf(log2f(16384.0f / top))), 16777216.0f);
    }
    free(g);
    free(want);
    free(got);
    dtnn_grad_sync_free(gs);
    dtnn_comm_free(c);
    dtnn_model_free(m);
}

int main(void)
{
    dtnn_error err;
    dtnn_backend *be = dtnn__backend_create(tu_device(), 0, &err);
    if (!be) {
        printf("SKIP: %s\n", err.message);
        return 77;
    }
    printf("device: %s\n", be->name);
    const size_t sizes[] = {1, 3, 70001};
    for (int s = 0; s < 3; s++) {
        const size_t n = sizes[s];
        check_pack(be, DTNN_COMM_F16, n, 1024.0f);
        check_pack(be, DTNN_COMM_F16, n, 1.0f / 64.0f);
        check_pack(be, DTNN_COMM_BF16, n, 1.0f);
        check_unpack(be, DTNN_COMM_F16, n, 1.0f / 1024.0f, (size_t)-1);
        check_unpack(be, DTNN_COMM_F16, n, 1.0f / 1024.0f, n - 1);
        check_unpack(be, DTNN_COMM_BF16, n, 1.0f, (size_t)-1);
        check_unpack(be, DTNN_COMM_BF16, n, 1.0f, n / 2);
    }
    CHECK_OK(be_check(be, &err), &err);
    dtnn__backend_free(be);
    check_fp16_scaling();
    return test_finish("test_half_transport");
}
