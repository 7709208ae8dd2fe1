/*
 * parity_optim.c — the losses and optimizers of test_backend_parity: cross-entropy (plain and
 * label-smoothed), BCE and MSE, each also mixed, with their sums, top-1 and top-5 counts, with
 * and without the gradient; SGD (momentum, then Nesterov), AdamW and Adam, RMSProp (centered
 * with momentum, then plain), NAdam, LARS, LAMB's direction, axpby and segmented sums of
 * squares, each against the cpu backend. Tolerances as at the top of test_backend_parity.c:
 * 1e-6 for the element-wise updates, 1e-12 for the double sums.
 */
#include <math.h>
#include <stdlib.h>

#include "parity.h"

void test_losses(void)
{
    const int n = 300, k = 10;     /* more samples than the kernel's threads */
    buf z = make((size_t)n * k, 101, 3.0f), dz = make((size_t)n * k, 102, 1.0f);
    /* [2n]: the mixed cases' partner labels follow */
    int32_t *labels = malloc(sizeof(int32_t) * 2 * n),
            *dlabels = be_alloc(other, sizeof(int32_t) * 2 * n);
    for (int i = 0; i < n; i++) {
        labels[i] = (i * 7 + 3) % k;
        labels[n + i] = (i * 3 + 1) % k;
    }
    be_upload(other, dlabels, labels, sizeof(int32_t) * 2 * n);
    /* ties, for the ranks: a sample whose logits are all equal */
    for (int j = 0; j < k; j++)
        z.h[j] = 0.5f;
    be_upload(other, z.d, z.h, sizeof(float) * n * k);
    double *dout = dev_doubles(3);
    const loss_desc cases[] = {
        {DTNN_LOSS_CROSS_ENTROPY, 0.0f, 1.0f}, {DTNN_LOSS_CROSS_ENTROPY, 0.1f, 1.0f},
        {DTNN_LOSS_BCE, 0.0f, 1.0f},           {DTNN_LOSS_MSE, 0.0f, 1.0f},
        {DTNN_LOSS_CROSS_ENTROPY, 0.1f, 0.3f}, {DTNN_LOSS_BCE, 0.0f, 0.7f},
        {DTNN_LOSS_MSE, 0.0f, 0.3f}};
    static const char *const names[] = {"cross-entropy", "cross-entropy smoothed 0.1", "bce",
                                        "mse", "cross-entropy smoothed, mixed", "bce mixed",
                                        "mse mixed"};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        double out[3];
        char label[96];
        be_run(cpu, loss, &cases[c], n, k, z.h, labels, dz.h, 1.0f / n, out);
        be_run(other, loss, &cases[c], n, k, z.d, dlabels, dz.d, 1.0f / n, dout);
        snprintf(label, sizeof label, "loss %s: dz", names[c]);
        check(label, &dz, 1e-6);
        snprintf(label, sizeof label, "loss %s: sum, top-1, top-5", names[c]);
        check_doubles(label, dout, out, 3, 1e-12);
    }
    double out[3];
    be_run(other, loss, &cases[0], n, k, z.d, dlabels, NULL, 1.0f, dout);
    be_run(cpu, loss, &cases[0], n, k, z.h, labels, NULL, 1.0f, out);
    check_doubles("loss without gradient", dout, out, 3, 1e-12);
    free(labels);
    be_free(other, dlabels);
    be_free(other, dout);
    drop(&z), drop(&dz);
}

void test_optimizers(void)
{
    const size_t n = 1001;
    buf w = make(n, 111, 1.0f), g = make(n, 112, 1.0f), s1 = make(n, 113, 1.0f);
    buf s2 = make(n, 114, 1.0f), s3 = make(n, 115, 1.0f);
    for (size_t i = 0; i < n; i++)
        s2.h[i] = fabsf(s2.h[i]), s3.h[i] *= 0.1f;
    be_upload(other, s2.d, s2.h, sizeof(float) * n);
    be_upload(other, s3.d, s3.h, sizeof(float) * n);
    for (int first = 1; first >= 0; first--) {
        const sgd_args a = {0.05f, 1e-4f, 0.9f, 0.9f, first, !first, 1};
        be_run(cpu, sgd_step, &a, n, w.h, g.h, s1.h);
        be_run(other, sgd_step, &a, n, w.d, g.d, s1.d);
    }
    check("sgd (momentum, then nesterov) w", &w, 1e-6);
    check("  momentum buffer", &s1, 1e-6);
    const adam_args ad = {0.9f, 0.999f, 0.1f, 0.001f, 1e-8f, 0.01f, 0.3f, 0.0f, 0.999f, 1};
    be_run(cpu, adam_step, &ad, n, w.h, g.h, s1.h, s2.h);
    be_run(other, adam_step, &ad, n, w.d, g.d, s1.d, s2.d);
    const adam_args l2 = {0.9f, 0.999f, 0.1f, 0.001f, 1e-8f, 0.01f, 0.3f, 0.01f, 1.0f, 0};
    be_run(cpu, adam_step, &l2, n, w.h, g.h, s1.h, s2.h);
    be_run(other, adam_step, &l2, n, w.d, g.d, s1.d, s2.d);
    check("adamw then adam (l2) w", &w, 1e-6);
    check("  m1", &s1, 1e-6);
    check("  m2", &s2, 1e-6);
    const rmsprop_args r = {0.99f, 0.01f, 1e-4f, 1e-8f, 0.9f, 0.01f};
    be_run(cpu, rmsprop_step, &r, n, w.h, g.h, s2.h, s1.h, s3.h);
    be_run(other, rmsprop_step, &r, n, w.d, g.d, s2.d, s1.d, s3.d);
    be_run(cpu, rmsprop_step, &r, n, w.h, g.h, s2.h, NULL, NULL);
    be_run(other, rmsprop_step, &r, n, w.d, g.d, s2.d, NULL, NULL);
    check("rmsprop (centered + momentum, then plain) w", &w, 1e-6);
    check("  square_avg", &s2, 1e-6);
    check("  momentum", &s1, 1e-6);
    check("  grad_avg", &s3, 1e-6);
    const nadam_args na = {1e-4f, 0.1f, 0.999f, 0.001f, 0.002f, 1e-8f, -0.01f, -0.08f};
    be_run(cpu, nadam_step, &na, n, w.h, g.h, s1.h, s2.h);
    be_run(other, nadam_step, &na, n, w.d, g.d, s1.d, s2.d);
    check("nadam w", &w, 1e-6);
    check("  m1", &s1, 1e-6);
    check("  m2", &s2, 1e-6);
    for (int nesterov = 0; nesterov < 2; nesterov++) {
        const lars_args la = {0.02f, 5e-4f, 0.9f, nesterov};
        be_run(cpu, lars_step, &la, n, w.h, g.h, s1.h);
        be_run(other, lars_step, &la, n, w.d, g.d, s1.d);
    }
    check("lars (plain, then nesterov) w", &w, 1e-6);
    check("  momentum", &s1, 1e-6);
    const lamb_args lb = {0.1f, 0.999f, 0.001f, 0.19f, 0.0447f, 1e-6f, 0.01f};
    be_run(cpu, lamb_direction, &lb, n, w.h, g.h, s1.h, s2.h, s3.h);
    be_run(other, lamb_direction, &lb, n, w.d, g.d, s1.d, s2.d, s3.d);
    check("lamb direction", &s3, 1e-6);
    check("  m1", &s1, 1e-6);
    check("  m2", &s2, 1e-6);
    be_run(cpu, axpby, n, -0.3f, s3.h, 1.0f, w.h);
    be_run(other, axpby, n, -0.3f, s3.d, 1.0f, w.d);
    be_run(cpu, axpby, n, 0.0f, NULL, 0.7f, w.h);
    be_run(other, axpby, n, 0.0f, NULL, 0.7f, w.d);
    check("axpby (w - 0.3 u, then 0.7 w)", &w, 1e-6);
    /* Sums of squares: three segments, one empty and one past a 4096-value block. */
    const size_t big = 9001;
    buf x = make(big, 116, 1.0f);
    const size_t begin[3] = {0, 10, 10}, end[3] = {10, 10, big};
    double want[3], got[3];
    be_run(cpu, segment_sumsq, 3, begin, end, x.h, want);
    be_run(other, segment_sumsq, 3, begin, end, x.d, got);
    for (int s = 0; s < 3; s++) {
        double exact = 0.0;
        for (size_t i = begin[s]; i < end[s]; i++)
            exact += (double)x.h[i] * x.h[i];
        /* double sums of at most 9001 exact float squares: relative error < 9001 * 2^-53 */
        if (fabs(want[s] - exact) > 1e-12 * exact || fabs(got[s] - exact) > 1e-12 * exact) {
            fprintf(stderr, "FAIL segment_sumsq %d: cpu %.17g, %s %.17g, exact %.17g\n", s,
                    want[s], other->name, got[s], exact);
            test_failures++;
        }
        if (runs_cpu_kernels(other) && got[s] != want[s]) {
            fprintf(stderr, "FAIL segment_sumsq %d: %s differs from cpu\n", s, other->name);
            test_failures++;
        }
    }
    printf("segment_sumsq: %g %g %g\n", want[0], want[1], want[2]);
    drop(&x);
    drop(&w), drop(&g), drop(&s1), drop(&s2), drop(&s3);
}
