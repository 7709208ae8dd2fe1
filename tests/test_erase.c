/*
 * test_erase.c — random erasing (--random-erase, torchvision's RandomErasing with value 0)
 * against torchvision: the box size of one try from fixed draws against
 * RandomErasing.get_params of torchvision 0.14 called with its draws replaced (the table, from
 * tools/gen_erase_reference.py;
 * torchvision keeps the draws in float32, dtnn in double, which changes a size only where it
 * is within rounding of a half), the erase itself, and in the loader: the coin, a box of the
 * allowed sizes, set to 0 in every channel, the same for the same (seed, epoch, sample).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "data/transform.h"
#include "testutil.h"

/* h, w, the two draws, torchvision's height and width (0 x 0: the try did not fit) */
static const struct {
    int h, w;
    double u_scale, u_ratio;
    int eh, ew;
} torchvision_sizes[] = {
    {32, 32, 0.0, 0.0, 2, 8},       {32, 32, 0.5, 0.5, 13, 13},     {32, 32, 0.999, 0.5, 18, 18},
    {28, 28, 0.25, 0.9, 14, 5},     {28, 28, 0.75, 0.1, 9, 23},     {224, 224, 0.1, 0.3, 40, 64},
    {224, 224, 0.9, 0.99, 220, 68}, {7, 9, 0.3, 0.2, 2, 4},         {10, 40, 0.6, 0.05, 5, 16},
    {40, 10, 0.6, 0.95, 16, 5},     {5, 5, 0.01, 0.5, 1, 1},        {3, 3, 0.9, 0.5, 2, 2},
    {4, 4, 0.95, 0.02, 0, 0},       {6, 6, 0.99, 0.999, 0, 0},
};

static void test_sizes(void)
{
    for (size_t i = 0; i < sizeof torchvision_sizes / sizeof torchvision_sizes[0]; i++) {
        const int h = torchvision_sizes[i].h, w = torchvision_sizes[i].w;
        int eh, ew;
        const int fits = dtnn__erase_size(h, w, torchvision_sizes[i].u_scale,
                                          torchvision_sizes[i].u_ratio, &eh, &ew);
        const int want_fit = torchvision_sizes[i].eh > 0 || torchvision_sizes[i].ew > 0;
        if (fits != want_fit || (fits && (eh != torchvision_sizes[i].eh ||
                                          ew != torchvision_sizes[i].ew))) {
            fprintf(stderr, "FAIL %dx%d draws %g %g: %dx%d (fits %d), torchvision %dx%d\n", h,
                    w, torchvision_sizes[i].u_scale, torchvision_sizes[i].u_ratio, eh, ew, fits,
                    torchvision_sizes[i].eh, torchvision_sizes[i].ew);
            test_failures++;
        }
    }
    printf("erase sizes: %zu cases as torchvision 0.14's get_params\n",
           sizeof torchvision_sizes / sizeof torchvision_sizes[0]);
}

static void test_boxes(void)
{
    /* many draws: inside the image, strictly smaller, area and aspect in range up to
     * rounding, every position reached on a small image */
    int corners = 0;
    for (uint64_t seed = 0; seed < 2000; seed++) {
        dtnn_rng r;
        dtnn__augment_rng(&r, seed, 0, 0);
        int box[4];
        if (!dtnn__random_erase_box(12, 16, &r, box))
            continue;
        CHECK(box[0] >= 0 && box[1] >= 0 && box[2] < 12 && box[3] < 16 &&
              box[0] + box[2] <= 12 && box[1] + box[3] <= 16);
        corners += box[0] == 0 && box[1] == 0;
        dtnn_rng again;
        int box2[4];
        dtnn__augment_rng(&again, seed, 0, 0);
        CHECK(dtnn__random_erase_box(12, 16, &again, box2) && !memcmp(box, box2, sizeof box));
    }
    CHECK(corners > 0);
    float img[2 * 4 * 5];
    for (int i = 0; i < 40; i++)
        img[i] = (float)(i + 1);
    const int box[4] = {1, 2, 2, 3};
    dtnn__erase_chw(img, 2, 4, 5, box);
    for (int c = 0; c < 2; c++)
        for (int y = 0; y < 4; y++)
            for (int x = 0; x < 5; x++) {
                const int inside = y >= 1 && y < 3 && x >= 2 && x < 5;
                const float v = img[(c * 4 + y) * 5 + x];
                CHECK(inside ? v == 0.0f : v == (float)((c * 4 + y) * 5 + x + 1));
            }
}

/* The loader: with p = 1 every sample of the synthetic set gets one zero box (its values are
 * never exactly 0 otherwise), with p = 0 none; the same batch again for the same epoch. */
static void test_loader(void)
{
    dtnn_error err;
    dtnn_data_params dp;
    dtnn_data_params_default(&dp);
    dp.name = "synthetic";
    dp.synthetic_n = 64;
    dp.c = 3;
    dp.h = 16;
    dp.w = 16;
    dtnn_dataset d;
    CHECK_OK(dtnn_dataset_load(&d, &dp, &err), &err);
    for (int pass = 0; pass < 2; pass++) {
        dtnn_loader_params lp;
        dtnn_loader_params_default(&lp);
        lp.batch_size = 16;
        lp.random_erase = pass ? 1.0f : 0.0f;
        dtnn_loader *l = dtnn_loader_create(&d, 0, &lp, &err);
        CHECK(l != NULL);
        if (!l)
            break;
        const float *x, *x2;
        const int32_t *y;
        int n;
        float *first = malloc(sizeof(float) * 16 * 3 * 16 * 16);
        CHECK_OK(dtnn_loader_start(l, 0, 0, 1, &err), &err);
        int64_t global_n;
        CHECK_OK(dtnn_loader_next(l, &x, &y, &n, &global_n, &err), &err);
        memcpy(first, x, sizeof(float) * (size_t)n * 768);
        int erased = 0;
        for (int i = 0; i < n; i++) {
            int zeros = 0;
            for (int k = 0; k < 768; k++)
                zeros += x[(size_t)i * 768 + k] == 0.0f;
            erased += zeros > 0 && zeros % 3 == 0; /* the box in all three channels */
        }
        CHECK(erased == (pass ? n : 0));
        CHECK_OK(dtnn_loader_start(l, 0, 0, 1, &err), &err);
        CHECK_OK(dtnn_loader_next(l, &x2, &y, &n, &global_n, &err), &err);
        CHECK(!memcmp(first, x2, sizeof(float) * (size_t)n * 768));
        printf("loader, p = %d: %d of %d samples erased\n", pass, erased, n);
        free(first);
        dtnn_loader_free(l);
    }
    dtnn_loader_params lp;
    dtnn_loader_params_default(&lp);
    lp.random_erase = 1.5f;
    CHECK(dtnn_loader_create(&d, 0, &lp, &err) == NULL && strstr(err.message, "random erasing"));
    dtnn_dataset_free(&d);
}

int main(void)
{
    test_sizes();
    test_boxes();
    test_loader();
    return test_finish("test_erase");
}
