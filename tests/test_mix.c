/*
 * test_mix.c — MixUp, CutMix (--mixup, --cutmix) and repeated augmentation
 * (--repeated-augment) in the loader, and the loss on their two-label targets:
 *  - the Beta draws: mean and variance of 200000 draws against the distribution's, for the
 *    alphas the recipes use and a small one (no 0 / 0 below 1);
 *  - a mixed batch is, bit for bit, torchvision's v2 arithmetic applied to the unmixed batch
 *    of the same seed: MixUp fl(fl(x[i-1] (1 - lam)) + fl(x[i] lam)) in float32 with the
 *    batch rolled by one, CutMix the box copied from x[i-1], lam = 1 - box area / image area;
 *  - every rank count (1 to 4) and thread count gives the same global batch, draws and
 *    partner labels, the partner of a rank's first sample decoded by that rank too;
 *  - repeated augmentation: each sample K times in a row, each repeat augmented anew;
 *  - dtnn_model_loss_mixed against cross-entropy with probability targets as PyTorch defines
 *    it, -sum_j t'_j log softmax(z)_j with t' = (1 - e) t + e / K, and its gradient p - t',
 *    computed here from that definition in double (not from the library's formula).
 * The comparison with torchvision's own v2.MixUp / v2.CutMix on the same draws is
 * python/tests/test_mix.py.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "data/mix.h"
#include "testutil.h"

enum { N = 45, C = 3, H = 8, W = 10, CLASSES = 6, BATCH = 16 };

static void test_beta(void)
{
    static const double alphas[][2] = {{0.2, 0.2}, {1.0, 1.0}, {0.05, 0.05}, {2.0, 5.0}};
    const int draws = 200000;
    for (size_t a = 0; a < sizeof alphas / sizeof alphas[0]; a++) {
        const double p = alphas[a][0], q = alphas[a][1];
        dtnn_rng r;
        dtnn__rng_seed(&r, 7 + a);
        double sum = 0.0, sum2 = 0.0;
        int bad = 0;
        for (int i = 0; i < draws; i++) {
            const double x = dtnn__rng_beta(&r, p, q);
            bad += !(x >= 0.0 && x <= 1.0);
            sum += x;
            sum2 += x * x;
        }
        const double mean = sum / draws, var = sum2 / draws - mean * mean;
        const double mu = p / (p + q), sigma2 = p * q / ((p + q) * (p + q) * (p + q + 1.0));
        /* The sample mean's standard error is sqrt(sigma2 / draws); the sample variance's is
         * below sqrt(mu4 / draws) <= sqrt(sigma2 / draws) for a variable in [0, 1]. The
         * draws are fixed by the seed: 6 standard errors is not a bet on luck. */
        const double se = sqrt(sigma2 / draws);
        CHECK(bad == 0);
        if (fabs(mean - mu) > 6 * se || fabs(var - sigma2) > 6 * se) {
            fprintf(stderr, "FAIL Beta(%g, %g): mean %.5f var %.5f, want %.5f %.5f (se %.2g)\n",
                    p, q, mean, var, mu, sigma2, se);
            test_failures++;
        }
        printf("Beta(%g, %g): mean %.4f (%.4f), variance %.4f (%.4f)\n", p, q, mean, mu, var,
               sigma2);
    }
}

static dtnn_loader *make_loader(const dtnn_dataset *d, int rank, int ranks, float mixup,
                                float cutmix, int repeats, unsigned augment, int threads)
{
    dtnn_loader_params lp;
    dtnn_loader_params_default(&lp);
    lp.batch_size = BATCH;
    lp.rank = rank;
    lp.ranks = ranks;
    lp.seed = 11;
    lp.augment = augment;
    lp.crop_padding = 2;
    lp.random_erase = augment ? 0.3f : 0.0f;
    lp.mixup_alpha = mixup;
    lp.cutmix_alpha = cutmix;
    lp.repeated_augment = repeats;
    lp.threads = threads;
    dtnn_error err;
    dtnn_loader *l = dtnn_loader_create(d, 0, &lp, &err);
    CHECK_OK(l ? DTNN_OK : err.code, &err);
    return l;
}

typedef struct {
    float x[BATCH * C * H * W];
    int32_t y[BATCH], y2[BATCH];
    int n;
    dtnn_batch_mix mix;
} batch;

/* The global batch of (epoch, step) gathered from every rank's part, decoded by dtnn_loader_batch
 * (threads 0) or by the loader's threads through dtnn_loader_start / next. */
static void global_batch(const dtnn_dataset *d, int ranks, int threads, float mixup,
                         float cutmix, int64_t epoch, int64_t step, batch *b)
{
    memset(b, 0, sizeof *b);
    const size_t sample = (size_t)C * H * W;
    for (int r = 0; r < ranks; r++) {
        dtnn_loader *l = make_loader(d, r, ranks, mixup, cutmix, 0, DTNN_AUG_CROP | DTNN_AUG_FLIP,
                                     threads);
        dtnn_error err;
        float *x = b->x + (size_t)b->n * sample;
        int n = 0;
        if (threads) {
            const float *lx;
            const int32_t *ly;
            CHECK_OK(dtnn_loader_start(l, epoch, step, step + 1, &err), &err);
            CHECK_OK(dtnn_loader_next(l, &lx, &ly, &n, NULL, &err), &err);
            memcpy(x, lx, sizeof(float) * sample * (size_t)n);
            memcpy(b->y + b->n, ly, sizeof(int32_t) * (size_t)n);
        } else {
            CHECK_OK(dtnn_loader_batch(l, epoch, step, x, b->y + b->n, &n, &err), &err);
        }
        dtnn_batch_mix mix;
        dtnn_loader_mix(l, &mix);
        if (mix.y2)
            memcpy(b->y2 + b->n, mix.y2, sizeof(int32_t) * (size_t)n);
        mix.y2 = NULL;
        if (r == 0)
            b->mix = mix;
        else
            CHECK(!memcmp(&mix, &b->mix, sizeof mix));
        b->n += n;
        dtnn_loader_free(l);
    }
}

static void test_ranks(const dtnn_dataset *d)
{
    int same = 1;
    for (int64_t step = 0; step < 3; step++) {
        batch *one = malloc(sizeof *one), *b = malloc(sizeof *b);
        global_batch(d, 1, 0, 0.4f, 1.0f, 1, step, one);
        CHECK(one->mix.kind != DTNN_MIX_NONE && one->n == (step < 2 ? BATCH : N - 2 * BATCH));
        for (int ranks = 1; ranks <= 4; ranks++)
            for (int threads = 0; threads <= 2; threads += 2) {
                global_batch(d, ranks, threads, 0.4f, 1.0f, 1, step, b);
                same &= b->n == one->n && !memcmp(&b->mix, &one->mix, sizeof b->mix) &&
                        !memcmp(b->x, one->x, sizeof(float) * C * H * W * (size_t)one->n) &&
                        !memcmp(b->y, one->y, sizeof(int32_t) * (size_t)one->n) &&
                        !memcmp(b->y2, one->y2, sizeof(int32_t) * (size_t)one->n);
            }
        free(one);
        free(b);
    }
    CHECK(same);
    printf("mixed batches: 1 to 4 ranks, 0 and 2 threads: the same global batch and draws\n");
}

/* The mixed batch against v2's arithmetic on the unmixed one of the same seed. */
static void test_definition(const dtnn_dataset *d)
{
    const size_t sample = (size_t)C * H * W, plane = (size_t)H * W;
    int kinds[3] = {0, 0, 0}, wrong = 0;
    for (int64_t step = 0; step < 24; step++) {
        batch *u = malloc(sizeof *u), *m = malloc(sizeof *m);
        const int64_t epoch = step / 3, s = step % 3;
        global_batch(d, 1, 0, 0.0f, 0.0f, epoch, s, u);
        global_batch(d, 2, 0, 0.2f, 1.0f, epoch, s, m);
        CHECK(u->n == m->n && u->mix.kind == DTNN_MIX_NONE);
        kinds[m->mix.kind]++;
        const float own = (float)m->mix.draw, other_w = (float)(1.0 - m->mix.draw);
        const int *box = m->mix.box;
        if (m->mix.kind == DTNN_MIX_CUTMIX) {
            const double area = (double)(box[2] - box[0]) * (box[3] - box[1]);
            wrong += m->mix.lam != (float)(1.0 - area / (H * W));
            /* v2.CutMix.make_params: half-sizes int(0.5 sqrt(1 - lam) W) around the centre */
            const double half = 0.5 * sqrt(1.0 - m->mix.draw);
            const int rw = (int)(half * W), rh = (int)(half * H);
            wrong += box[0] != (m->mix.cx - rw > 0 ? m->mix.cx - rw : 0) ||
                     box[2] != (m->mix.cx + rw < W ? m->mix.cx + rw : W) ||
                     box[1] != (m->mix.cy - rh > 0 ? m->mix.cy - rh : 0) ||
                     box[3] != (m->mix.cy + rh < H ? m->mix.cy + rh : H);
        } else {
            wrong += m->mix.lam != own;
        }
        for (int i = 0; i < u->n; i++) {
            const int prev = (i + u->n - 1) % u->n;
            wrong += m->y[i] != u->y[i] || m->y2[i] != u->y[prev];
            const float *a = u->x + (size_t)prev * sample, *b = u->x + (size_t)i * sample;
            const float *got = m->x + (size_t)i * sample;
            for (size_t j = 0; j < sample; j++) {
                float want;
                if (m->mix.kind == DTNN_MIX_MIXUP) {
                    const float pa = a[j] * other_w;
                    const float pb = b[j] * own;
                    want = pa + pb;
                } else {
                    const int y = (int)((j % plane) / W), x = (int)(j % W);
                    want = x >= box[0] && x < box[2] && y >= box[1] && y < box[3] ? a[j] : b[j];
                }
                wrong += memcmp(&want, &got[j], sizeof want) != 0;
            }
        }
        free(u);
        free(m);
    }
    CHECK(wrong == 0 && kinds[DTNN_MIX_MIXUP] > 0 && kinds[DTNN_MIX_CUTMIX] > 0);
    printf("24 batches (%d MixUp, %d CutMix) as v2's arithmetic on the unmixed batch: %d "
           "differences\n", kinds[DTNN_MIX_MIXUP], kinds[DTNN_MIX_CUTMIX], wrong);
}

static void test_repeats(const dtnn_dataset *d)
{
    const size_t sample = (size_t)C * H * W;
    dtnn_error err;
    int wrong = 0, differ = 0;
    for (int aug = 0; aug < 2; aug++) {
        dtnn_loader *l = make_loader(d, 0, 1, 0.0f, 0.0f, 3, aug ? DTNN_AUG_CROP : 0, 0);
        float *x = malloc(sizeof(float) * sample * BATCH);
        int32_t y[BATCH];
        int n;
        CHECK_OK(dtnn_loader_batch(l, 2, 1, x, y, &n, &err), &err);
        /* positions 16..31 of the epoch: 16 is the second repeat of the 6th sample */
        for (int i = 0; i < n; i++) {
            const int64_t q = BATCH + i, first = q - q % 3 - BATCH;
            if (first < 0)
                continue;
            const int same = !memcmp(x + (size_t)i * sample, x + (size_t)first * sample,
                                     sizeof(float) * sample);
            wrong += y[i] != y[first] || (!aug && !same);
            differ += aug && !same;
        }
        free(x);
        dtnn_loader_free(l);
    }
    CHECK(wrong == 0 && differ >= 8);
    printf("repeated augmentation x3: repeats hold one sample; %d of the augmented ones differ "
           "from their first\n", differ);
}

/* dtnn_model_loss_mixed on logits (a lone flatten layer: its input) against the definition. */
static void test_loss(void)
{
    enum { K = 5, NS = 3 };
    const float z[NS * K] = {0.5f, -1, 2, 0, 0.25f, 3, 1, -2, 0.5f, 0, -1, -1, 4, 2, 1};
    const int32_t y[NS] = {2, 0, 4}, y2[NS] = {1, 0, 3};
    const float lams[] = {0.3f, 0.75f, 0.0f};
    const float smoothing[] = {0.0f, 0.1f};
    dtnn_error err;
    dtnn_model *m = dtnn_model_create(K, 1, 1);
    CHECK(dtnn_model_add(m, "flatten", NULL, "", NULL, 0, &err) >= 0);
    dtnn_build_params bp;
    dtnn_build_params_default(&bp);
    bp.max_batch = NS;
    bp.input_grad = 1;
    bp.device = tu_device();
    CHECK_OK(dtnn_model_build(m, &bp, &err), &err);
    double worst = 0.0;
    for (size_t a = 0; a < sizeof lams / sizeof lams[0]; a++)
        for (size_t e = 0; e < 2; e++) {
            dtnn_loss_params lp;
            dtnn_loss_params_default(&lp);
            lp.label_smoothing = smoothing[e];
            dtnn_metrics met = {0};
            CHECK_OK(dtnn_model_forward(m, z, NS, 1, &err), &err);
            CHECK_OK(dtnn_model_loss_mixed(m, y, y2, lams[a], NS, &lp, 1.0f, &met, &err), &err);
            CHECK_OK(dtnn_model_backward(m, &err), &err);
            float *dz = tu_copy_input_grad(m);
            double want_sum = 0.0;
            int hits = 0;
            for (int i = 0; i < NS; i++) {
                const float *zi = z + i * K;
                double mx = zi[0], s = 0.0;
                for (int j = 1; j < K; j++)
                    mx = fmax(mx, zi[j]);
                for (int j = 0; j < K; j++)
                    s += exp(zi[j] - mx);
                const int hit_label = lams[a] >= 0.5f ? y[i] : y2[i];
                int best = 0;
                for (int j = 1; j < K; j++)
                    best = zi[j] > zi[best] ? j : best;
                hits += best == hit_label;
                for (int j = 0; j < K; j++) {
                    const double t = lams[a] * (j == y[i]) + (1.0 - lams[a]) * (j == y2[i]);
                    const double ts = (1.0 - smoothing[e]) * t + smoothing[e] / K;
                    const double logp = zi[j] - mx - log(s);
                    want_sum -= ts * logp;
                    /* dz in float: its error is float rounding of values below 1 */
                    worst = fmax(worst, fabs(dz[i * K + j] - (exp(logp) - ts)));
                }
            }
            worst = fmax(worst, fabs(met.loss_sum - want_sum) / fmax(1.0, fabs(want_sum)));
            CHECK(met.top1 == hits && met.count == NS);
            free(dz);
        }
    /* Both sides in double from the same logits: they differ by the order of a few
     * additions (1e-15); dz is rounded to float (6e-8 relative, values below 1). */
    CHECK(worst < 1e-6);
    printf("mixed cross-entropy: loss and gradient as PyTorch's probability targets (worst "
           "%.2g)\n", worst);
    dtnn_error e2;
    CHECK(dtnn_model_forward(m, z, NS, 1, &e2) == DTNN_OK);
    dtnn_loss_params lp;
    dtnn_loss_params_default(&lp);
    const int32_t bad[NS] = {0, 9, 0};
    CHECK(dtnn_model_loss_mixed(m, y, bad, 0.5f, NS, &lp, 1.0f, NULL, &e2) == DTNN_ERR_ARG &&
          strstr(e2.message, "partner label 9"));
    CHECK(dtnn_model_loss_mixed(m, y, y2, 1.5f, NS, &lp, 1.0f, NULL, &e2) == DTNN_ERR_ARG);
    dtnn_model_free(m);
}

int main(void)
{
    test_beta();
    dtnn_data_params dp;
    dtnn_data_params_default(&dp);
    dp.name = "synthetic";
    dp.synthetic_n = N;
    dp.c = C;
    dp.h = H;
    dp.w = W;
    dp.classes = CLASSES;
    dtnn_dataset d;
    dtnn_error err;
    CHECK_OK(dtnn_dataset_load(&d, &dp, &err), &err);
    test_ranks(&d);
    test_definition(&d);
    test_repeats(&d);
    test_loss();
    dtnn_loader_params lp;
    dtnn_loader_params_default(&lp);
    lp.mixup_alpha = -1.0f;
    CHECK(dtnn_loader_create(&d, 0, &lp, &err) == NULL && strstr(err.message, "MixUp alpha"));
    dtnn_loader_params_default(&lp);
    lp.repeated_augment = 65;
    CHECK(dtnn_loader_create(&d, 0, &lp, &err) == NULL && strstr(err.message, "repeated"));
    dtnn_dataset_free(&d);
    return test_finish("test_mix");
}
