/*
 * test_conv_paths.c — every fast convolution path against the reference (conv2d algo=im2col)
 * on odd shapes: kernels 1x1 to 7x7, stride 1 and 2, padding 0 to 3, dilation, batch 1,
 * channel counts that are no multiple of 8 (or of the direct kernel's 4-channel blocks),
 * non-square inputs, images narrower than a vector, batches split into several chunks, with
 * and without bias. The
 * same layer is built with the same seed (so the same weights) with algo=auto (Winograd where
 * it applies), algo=direct (the direct kernels there instead) and algo=im2col; forward output,
 * input gradient and parameter gradients of both fast builds must agree with the reference.
 *
 * Tolerance: 1e-5 absolute + 1e-4 relative. The paths sum the same products in a different
 * order in float32; with values of order 1 that differs by a few ulps (observed worst: printed
 * per case). The absolute part grows with the number of terms of a sum from 256 on (below):
 * rounding errors grow with it, not with the (often small, cancelling) result. Winograd's
 * F(4x4, 3x3) (the forward pass and input gradient where a row of tiles is whole groups of 4)
 * runs through transforms with coefficients up to 8 and is ~10x less exact than direct
 * summation: worst seen 2.0e-5 with 128 x 9 terms, within this bound (4.5e-5).
 */
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#define ATOL 1e-5
#define RTOL 1e-4

typedef struct {
    int c, h, w, n;
    const char *opts;   /* conv2d options without algo= */
    const char *method; /* the path algo=auto must take (dtnn_layer_info.method), if given */
} conv_case;

static dtnn_model *build_threads(const conv_case *cc, const char *algo, int threads,
                                 size_t workspace_limit)
{
    dtnn_error err;
    dtnn_model *m = dtnn_model_create(cc->c, cc->h, cc->w);
    char opts[256];
    snprintf(opts, sizeof opts, "%s algo=%s", cc->opts, algo);
    if (!m || dtnn_model_add(m, "conv2d", "conv", opts, NULL, 0, &err) < 0) {
        fprintf(stderr, "FAIL conv2d %s: %s\n", opts, m ? err.message : "out of memory");
        test_failures++;
        dtnn_model_free(m);
        return NULL;
    }
    dtnn_build_params bp;
    dtnn_build_params_default(&bp);
    bp.max_batch = cc->n;
    bp.training = 1;
    bp.input_grad = 1;
    bp.seed = 77;
    bp.threads = threads;
    bp.workspace_limit = workspace_limit;
    if (dtnn_model_build(m, &bp, &err) != DTNN_OK) {
        fprintf(stderr, "FAIL building conv2d %s: %s\n", opts, err.message);
        test_failures++;
        dtnn_model_free(m);
        return NULL;
    }
    return m;
}

static dtnn_model *build_one(const conv_case *cc, const char *algo)
{
    return build_threads(cc, algo, 0, 0);
}

/* Forward x, output gradient probe, backward; returns the output size per sample. */
static size_t run(dtnn_model *m, const float *x, int n, const float *probe)
{
    dtnn_error err;
    CHECK_OK(dtnn_model_forward(m, x, n, 1, &err), &err);
    int rows, cols;
    tu_output(m, &rows, &cols);
    memcpy(tu_output_grad(m), probe, sizeof(float) * (size_t)rows * cols);
    dtnn_model_zero_grad(m);
    CHECK_OK(dtnn_model_backward(m, &err), &err);
    return (size_t)cols;
}

/* A batch of cc's inputs filled from seed and, after a forward pass of m to learn its output
 * size, an output-gradient probe filled from seed + 1 (both malloc'd). */
static void make_inputs(const conv_case *cc, dtnn_model *m, unsigned seed, float **x,
                        float **probe)
{
    const size_t in_count = (size_t)cc->n * cc->c * cc->h * cc->w;
    *x = malloc(sizeof(float) * in_count);
    test_fill(*x, in_count, seed);
    int rows, cols;
    CHECK_OK(dtnn_model_forward(m, *x, cc->n, 1, &(dtnn_error){0}), &(dtnn_error){0});
    tu_output(m, &rows, &cols);
    const size_t out_count = (size_t)rows * cols;
    *probe = malloc(sizeof(float) * out_count);
    test_fill(*probe, out_count, seed + 1);
}

/* whether the CPU kernels running have the direct and Winograd convolutions (the AVX2 set) */
static int fast_kernels(void) { return strcmp(dtnn_cpu_kernels_name(), "generic") != 0; }

/* the absolute tolerance of a sum of `terms` products of values of order 1 */
static double atol_for(double terms) { return ATOL * (terms > 256 ? terms / 256 : 1); }

/* The fast build within workspace_limit bytes of scratch (0: none). */
static void check_case(const conv_case *cc, const char *algo, size_t workspace_limit)
{
    dtnn_model *fast = build_threads(cc, algo, 0, workspace_limit);
    dtnn_model *ref = build_one(cc, "im2col");
    if (!fast || !ref) {
        dtnn_model_free(fast);
        dtnn_model_free(ref);
        return;
    }
    /* the case must exercise the path it is listed for: auto its method, direct no Winograd.
     * The generic CPU kernels (DTNN_CPU=generic, or a CPU without AVX2 + FMA) have no direct
     * or Winograd kernels; there auto takes im2col, so the listed method is not checked. */
    dtnn_layer_info info;
    dtnn_model_layer_info(fast, 0, &info);
    const int is_auto = !strcmp(algo, "auto");
    const int check_method = is_auto && cc->method && fast_kernels();
    if ((check_method && strcmp(info.method, cc->method)) ||
        (!is_auto && !strncmp(info.method, "winograd", 8))) {
        fprintf(stderr, "FAIL %dx%dx%dx%d %s algo=%s: runs '%s', expected '%s'\n", cc->n, cc->c,
                cc->h, cc->w, cc->opts, algo, info.method,
                is_auto ? cc->method : "no Winograd");
        test_failures++;
    }
    const size_t in_count = (size_t)cc->n * cc->c * cc->h * cc->w;
    float *x, *probe;
    make_inputs(cc, fast, 11, &x, &probe);
    int rows, cols;
    tu_output(fast, &rows, &cols);
    const size_t out_count = (size_t)rows * cols;
    run(fast, x, cc->n, probe);
    run(ref, x, cc->n, probe);

    char label[160];
    snprintf(label, sizeof label, "%dx%dx%dx%d %s algo=%s: y", cc->n, cc->c, cc->h, cc->w,
             cc->opts, algo);
    const float *yf = tu_output(fast, NULL, NULL), *yr = tu_output(ref, NULL, NULL);
    /* an output sums C / groups * R * S products (its FLOPs / 2), an input gradient at most
     * K / groups * R * S */
    const double terms_y = info.flops / 2 / ((double)info.c * info.h * info.w);
    test_compare(label, yf, yr, out_count, atol_for(terms_y), RTOL);
    label[strlen(label) - 1] = '\0';
    strncat(label, "dx", sizeof label - strlen(label) - 1);
    test_compare(label, tu_input_grad(fast), tu_input_grad(ref), in_count,
                 atol_for(terms_y * info.c / cc->c), RTOL);
    label[strlen(label) - 2] = '\0';
    strncat(label, "dparams", sizeof label - strlen(label) - 1);
    /* A weight gradient sums n * P * Q products (at most n * (H + 2 * padding)^2 of them; n * H
     * * W, close enough, for this tolerance), most of them cancelling:
     * its rounding error grows with that count, not with the (small) result, so the absolute
     * part of its tolerance grows with it too, from 256 terms on. */
    test_compare(label, tu_grads(fast), tu_grads(ref),
                 dtnn_model_param_count(fast), atol_for((double)cc->n * cc->h * cc->w), RTOL);
    free(x);
    free(probe);
    dtnn_model_free(fast);
    dtnn_model_free(ref);
}

/* y, dx and dparams of `m` against `ref`'s: outputs and input gradients bit-identical, the
 * weight gradient within twice the reference tolerance (per-thread sums added up in another
 * order: each side is within the tolerance of the exact sums). */
static void compare_runs(const conv_case *cc, const char *what, dtnn_model *m, dtnn_model *ref)
{
    int rows, cols;
    tu_output(ref, &rows, &cols);
    const size_t in_count = (size_t)cc->n * cc->c * cc->h * cc->w;
    char label[200];
    snprintf(label, sizeof label, "%dx%dx%dx%d %s, %s: y", cc->n, cc->c, cc->h, cc->w, cc->opts,
             what);
    test_compare(label, tu_output(m, NULL, NULL), tu_output(ref, NULL, NULL),
                 (size_t)rows * cols, 0.0, 0.0);
    label[strlen(label) - 1] = '\0';
    strncat(label, "dx", sizeof label - strlen(label) - 1);
    test_compare(label, tu_input_grad(m), tu_input_grad(ref), in_count, 0.0, 0.0);
    label[strlen(label) - 2] = '\0';
    strncat(label, "dparams", sizeof label - strlen(label) - 1);
    test_compare(label, tu_grads(m), tu_grads(ref), dtnn_model_param_count(ref),
                 2 * atol_for((double)cc->n * cc->h * cc->w), 2 * RTOL);
}

/* The same layer built on 1 thread and on 3, then the latter run on 3 and on 2 threads (fewer
 * than it planned scratch for), and built on 3 within a 1-byte workspace limit (one scratch
 * slot planned: every chunk on the whole team): the direct kernels and Winograd's narrow
 * passes give each thread whole chunks of images of its own where there are enough images
 * and slots, else run every chunk on the whole team (as the im2col path always does).
 * Leaves 2 threads. */
static void check_threads(const conv_case *cc)
{
    dtnn_model *one = build_threads(cc, "auto", 1, 0), *three = build_threads(cc, "auto", 3, 0);
    dtnn_model *tight = build_threads(cc, "auto", 3, 1);
    if (!one || !three || !tight) {
        dtnn_model_free(one);
        dtnn_model_free(three);
        dtnn_model_free(tight);
        return;
    }
    float *x, *probe;
    dtnn_set_threads(1);
    make_inputs(cc, one, 21, &x, &probe);
    run(one, x, cc->n, probe);
    dtnn_set_threads(3);
    run(three, x, cc->n, probe);
    compare_runs(cc, "1 vs 3 threads", three, one);
    run(tight, x, cc->n, probe);
    compare_runs(cc, "1 vs 3 threads, one slot", tight, one);
    dtnn_set_threads(2);
    run(three, x, cc->n, probe);
    compare_runs(cc, "1 vs 2 threads (planned for 3)", three, one);
    free(x);
    free(probe);
    dtnn_model_free(one);
    dtnn_model_free(three);
    dtnn_model_free(tight);
}

int main(void)
{
    if (tu_kernels_unavailable("test_conv_paths"))
        return 77;
    static const conv_case cases[] = {
        /* depthwise: groups == C == K */
        {5, 9, 7, 3, "filters=5 kernel=3 padding=1 groups=5", "depthwise"},
        {13, 8, 11, 1, "filters=13 kernel=3 stride=2 padding=1 groups=13 bias=0", NULL},
        {6, 10, 9, 2, "filters=6 kernel=5 stride=2 padding=2 groups=6", NULL},
        {3, 12, 13, 2, "filters=3 kernel=7 stride=2 padding=3 groups=3 bias=0", NULL},
        {7, 6, 6, 2, "filters=7 kernel=1 groups=7", NULL},
        {9, 7, 8, 2, "filters=9 kernel=3 padding=0 groups=9", NULL},
        {4, 9, 10, 2, "filters=4 kernel=3 padding=2 dilation=2 groups=4", NULL},
        {5, 7, 9, 2, "filters=5 kernel=3x5 stride=1x2 padding=1x2 groups=5", NULL},
        {6, 5, 5, 3, "filters=6 kernel=5 padding=0 groups=6", NULL},
        /* pointwise: 1x1, stride 1, no padding, one group; below 64 pixels a plane the images
         * gathered into one product (below: also in chunks; ConvNeXt's 1x1 planes at 32x32
         * input) */
        {5, 7, 9, 3, "filters=11 kernel=1", "pointwise-gathered"},
        {96, 1, 1, 5, "filters=70 kernel=1 bias=0", "pointwise-gathered"},
        {13, 1, 1, 1, "filters=3 kernel=1 bias=0", NULL},
        {16, 8, 8, 2, "filters=24 kernel=1 bias=0", NULL},
        /* the batch in one strided GEMM: over a k block (forward: 260 channels; weight
         * gradient: 400 pixels) and a register tile's rows and columns */
        {260, 8, 8, 3, "filters=20 kernel=1", "pointwise"},
        {8, 20, 20, 3, "filters=13 kernel=1 bias=0", "pointwise"},
        /* direct: stride 1, one group, any kernel up to 7x7, padding below the kernel size */
        {1, 28, 28, 3, "filters=6 kernel=5 padding=2", "direct"},     /* LeNet-5 */
        {6, 14, 14, 2, "filters=16 kernel=5", NULL},
        {5, 11, 9, 2, "filters=7 kernel=7 padding=3 bias=0", NULL},
        {3, 9, 10, 2, "filters=5 kernel=3 padding=0", NULL},
        {4, 8, 7, 1, "filters=6 kernel=3 padding=2", NULL},
        {3, 7, 12, 2, "filters=5 kernel=3x5 padding=1x2", NULL},
        {2, 6, 9, 2, "filters=3 kernel=2 padding=1", NULL},
        {5, 10, 6, 2, "filters=4 kernel=5x3 padding=0x1 bias=0", NULL},
        {3, 7, 9, 1, "filters=5 kernel=3 padding=1", NULL},
        /* 16 channels, F(4x4) 8 tiles a row: backward on Winograd too */
        {16, 32, 32, 2, "filters=16 kernel=3 padding=1", "winograd"},
        {13, 1, 1, 2, "filters=6 kernel=3 padding=1 bias=0", NULL},
        {5, 8, 8, 3, "filters=9 kernel=3 padding=1", "direct"},
        {1, 3, 17, 2, "filters=1 kernel=3 padding=1", NULL},
        {7, 11, 5, 2, "filters=4 kernel=3 padding=1 bias=0", NULL},
        /* 5 chunks of 1 image; Winograd's weight gradient 4 + 1 */
        {64, 32, 32, 5, "filters=64 kernel=3 padding=1", "winograd"},
        /* Winograd (auto) forward: 3x3, padding 1, height even, width a multiple of 8, 16
         * channels in and out or more; F(4x4) where the height is a multiple of 4 and the
         * width of 16, or the width 8 and the height a multiple of 8 (two rows of 2 tiles a
         * vector), with it the input gradient; else F(2x2); the backward on Winograd too (its
         * weight gradient F(2x2)), channel counts no multiple of its blocks of 4 filters and
         * 3 inputs */
        {17, 8, 16, 2, "filters=18 kernel=3 padding=1 bias=0", "winograd"},
        {16, 2, 8, 1, "filters=21 kernel=3 padding=1", "winograd"}, /* a row of tiles */
        {20, 6, 24, 2, "filters=19 kernel=3 padding=1", "winograd"}, /* 12 a row */
        {18, 6, 32, 2, "filters=17 kernel=3 padding=1", "winograd"}, /* 16 a row */
        {19, 16, 16, 5, "filters=33 kernel=3 padding=1", "winograd"}, /* 24+ tiles */
        {21, 4, 48, 1, "filters=17 kernel=3 padding=1 bias=0", "winograd"},
        {17, 16, 8, 2, "filters=20 kernel=3 padding=1", "winograd"}, /* 2 a row */
        {33, 24, 8, 2, "filters=36 kernel=3 padding=1 bias=0", "winograd"},
        /* 8 and 4 tiles a row */
        {33, 8, 16, 2, "filters=35 kernel=3 padding=1", "winograd"},
        {40, 4, 8, 3, "filters=32 kernel=3 padding=1 bias=0", "winograd"},
        /* 4 tiles a row and an odd number of rows: one tile row at a time (SSE), the rows
         * above in pairs */
        {32, 6, 8, 2, "filters=32 kernel=3 padding=1", "winograd"},
        /* wide layers (over 64 channels in or out): the products by BLAS; 3 + 2 images per
         * chunk; backward on im2col below 32 channels (its products on register tiles with
         * up to 64 filters) */
        {65, 8, 8, 2, "filters=70 kernel=3 padding=1", "winograd"},
        {128, 32, 32, 5, "filters=128 kernel=3 padding=1", "winograd"},
        {16, 8, 16, 2, "filters=80 kernel=3 padding=1", "winograd/im2col"},
        {130, 4, 8, 3, "filters=24 kernel=3 padding=1 bias=0", "winograd/im2col-tiles"},
        /* wide layers on planes under 16 wide (height a multiple of 4): F(4x4) a tile at a
         * time, 1, 2 or 3 a row (8 wide: two rows of 2 tiles a vector where the tile rows
         * pair up), and the weight gradient's F(2x2) 2 or 6 a row (VGG's 4x4
         * and 8x8 stages at 64x64 input) */
        {72, 4, 4, 3, "filters=80 kernel=3 padding=1", "winograd"},
        {65, 12, 12, 2, "filters=66 kernel=3 padding=1 bias=0", "winograd"},
        {66, 8, 4, 2, "filters=70 kernel=3 padding=1", "winograd"},
        {70, 12, 8, 2, "filters=66 kernel=3 padding=1", "winograd"}, /* 3 tile rows */
        /* sizes Winograd's tiles do not take, in layers wider than the direct kernels take (65
         * channels on): on images extended with zeros (7x7 -> 8x8, F(4x4) a tile at a time;
         * 14x14 -> 16x16, ResNet-50's 28x28 -> 28x32 and 12x28 on F(4x4)); 5x5 -> 6x8 would
         * add more than a third and stays off it; up to 64 channels the direct kernels keep
         * them */
        {65, 7, 7, 2, "filters=66 kernel=3 padding=1", "winograd-extended"},
        {66, 14, 14, 3, "filters=40 kernel=3 padding=1 bias=0", "winograd-extended"},
        {40, 28, 28, 1, "filters=65 kernel=3 padding=1", "winograd-extended"},
        {65, 12, 28, 2, "filters=70 kernel=3 padding=1", "winograd-extended"},
        {65, 5, 5, 2, "filters=65 kernel=3 padding=1", "im2col"},
        {33, 7, 7, 2, "filters=40 kernel=3 padding=1", "direct"},
        /* im2col with up to 64 filters per group: the products on register tiles (row and
         * column counts no multiple of the 4 x 24 tiles, nor of 8 for the dot products) */
        /* stride 2: below 16x16 outputs the forward on the direct kernels over parity planes,
         * the backward on im2col */
        {6, 9, 9, 2, "filters=7 kernel=1 stride=2", "direct/im2col-tiles"},
        {13, 9, 11, 2, "filters=21 kernel=5 stride=2 padding=2 bias=0", "direct/im2col-tiles"},
        {5, 11, 10, 2, "filters=6 kernel=4 stride=2 padding=1", "direct/im2col-tiles"},
        {7, 9, 8, 3, "filters=5 kernel=2 stride=2 bias=0", "direct/im2col-tiles"},
        {3, 15, 17, 2, "filters=9 kernel=7 stride=2 padding=3", "direct/im2col-tiles"},
        /* from 16x16 outputs on all of it direct, the input gradient as one pass per parity
         * class of the input (1x1 and 2x2: classes without taps; 4x4, 5x5, 7x7: 1 to 16 taps
         * each), odd sizes */
        {16, 32, 32, 3, "filters=32 kernel=3 stride=2 padding=1", "direct"},
        {7, 33, 32, 2, "filters=5 kernel=1 stride=2 bias=0", "direct"},
        {6, 32, 34, 2, "filters=9 kernel=2 stride=2", "direct"},
        {3, 34, 36, 1, "filters=5 kernel=4 stride=2 padding=1", "direct"},
        {5, 33, 35, 2, "filters=6 kernel=5 stride=2 padding=2", "direct"},
        {4, 40, 33, 2, "filters=7 kernel=7 stride=2 padding=3 bias=0", "direct"},
        {3, 33, 35, 2, "filters=6 kernel=3 stride=2", "direct"},
        /* several chunks of the direct pass (1 MiB of parity planes: 2 images) */
        {64, 40, 38, 5, "filters=24 kernel=3 stride=2 padding=1", "direct"},
        {10, 8, 8, 1, "filters=64 kernel=3 stride=2 dilation=2 padding=2", "im2col-tiles"},
        /* not a fast path (auto falls back to the reference): must agree trivially */
        {6, 7, 9, 2, "filters=65 kernel=3 stride=2", "im2col"},
        {6, 7, 7, 2, "filters=12 kernel=3 padding=1 groups=6", NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        check_case(&cases[i], "auto", 0);
        check_case(&cases[i], "direct", 0);
    }
    /* pointwise gathered within a workspace of 2 images' copies: chunks of 2, 2, 2, 1 */
    static const conv_case chunked = {40, 3, 3, 7, "filters=24 kernel=1", "pointwise-gathered"};
    check_case(&chunked, "auto", 2 * (40 + 24) * 9 * sizeof(float));
    /* 3 threads: Winograd F(4x4) and F(2x2), one round of 3 chunks and two rounds (32
     * channels at 32x32: chunks of 2 images, the last thread's second round empty), a
     * weight gradient on the dot products and one on BLAS (64 and 64 channels); the direct
     * kernels at stride 1 and 2 (the last: two chunks a thread); im2col's register tiles,
     * which split every chunk across the team (stride 2 below 16x16 outputs, groups) */
    static const conv_case threaded[] = {
        {24, 16, 16, 9, "filters=40 kernel=3 stride=2 padding=1", NULL},
        {6, 7, 7, 6, "filters=12 kernel=3 padding=1 groups=3", NULL},
        {3, 28, 28, 8, "filters=6 kernel=5 padding=2", NULL},
        {16, 32, 32, 7, "filters=32 kernel=3 stride=2 padding=1", NULL},
        {24, 40, 38, 20, "filters=12 kernel=3 stride=2 padding=1 bias=0", NULL},
        {19, 16, 16, 7, "filters=33 kernel=3 padding=1", NULL},
        {40, 4, 8, 6, "filters=32 kernel=3 padding=1 bias=0", NULL},
        {32, 32, 32, 10, "filters=36 kernel=3 padding=1", NULL},
        {64, 8, 8, 9, "filters=64 kernel=3 padding=1", NULL},
        {48, 4, 4, 9, "filters=40 kernel=1", NULL},
    };
    /* The generic kernels have no Winograd, and im2col's BLAS GEMMs split by thread count. */
    if (fast_kernels())
        for (size_t i = 0; i < sizeof threaded / sizeof threaded[0]; i++)
            check_threads(&threaded[i]);
    printf("test_conv_paths: cpu kernels %s\n", dtnn_cpu_kernels_name());
    return test_finish("test_conv_paths");
}
