/*
 * conv_pointwise.c — 1x1 convolutions (stride 1, no padding, one group) as products with the
 * filters W [K, C]: an image [C, H*W] already is its own column matrix.
 *
 * Two ways, chosen per layer by cpu_conv_pointwise_chunk:
 *   per image  one GEMM per image, reading x and writing y in place (no copy, no scratch):
 *              right for planes of hundreds of pixels (ResNet-50's 56x56 and 28x28 stages).
 *   gathered   `chunk` images copied side by side into one matrix [C, chunk * H*W], one GEMM
 *              for all of them, the result scattered back. On small planes a product per image
 *              has as few columns as the plane has pixels (7x7: 49; ConvNeXt's and
 *              EfficientNetV2's last stages at 32x32 input: 4 and 1), below the register
 *              tile's width, so most of each tile computes padding and every image repacks
 *              its columns. Gathered, the product has chunk * H*W columns; the copies move
 *              (C + K) floats per pixel against the product's C * K multiply-adds.
 * Backward gathers dy too: dw += dy_g x_g^T is one product whose inner dimension is every
 * pixel of the chunk, and dx = W^T dy_g is scattered (or added) into dx.
 *
 * The rounding: each output of the forward and of dx sums over C (K) in the GEMM's KC blocks
 * in order either way; dw sums the pixels of a chunk in one product instead of image by image,
 * a different order of the same terms.
 */
#include "cpu_kernels.h"

/* Planes below this many pixels take the gathered products: a plane of 64 or more fills the
 * AVX-512 tile's 32 columns at least twice over, and there a product per image lost little
 * to padding while the copies still cost (measurements: docs/perf-notes.md). */
enum { GATHER_BELOW_PIXELS = 64 };

/* Scratch per image of a chunk: x's (or dx's) copy and y's (or dy's). */
static size_t per_image_bytes(const conv_geom *g)
{
    return sizeof(float) * (size_t)(g->C + g->K) * g->P * g->Q;
}

int cpu_conv_pointwise_chunk(const conv_geom *g, int max_batch, size_t workspace_limit)
{
    if (g->P * g->Q >= GATHER_BELOW_PIXELS || max_batch < 2)
        return 0;
    /* Chunks of up to 8 MiB of copies: a product of hundreds of columns or more, whatever the
     * channels, without a scratch of the whole batch (256 images of ResNet-50's 7x7 stage
     * would copy 128 MiB); within the workspace limit (0: none), as the other paths. */
    const size_t per = per_image_bytes(g);
    size_t nb = ((size_t)8 << 20) / per;
    if (workspace_limit > 0)
        nb = DTNN_MIN(nb, workspace_limit / per);
    /* fewer than 2 images a chunk gathers nothing: the per-image product, without copies */
    return nb < 2 ? 0 : (int)DTNN_MIN(nb, (size_t)max_batch);
}

size_t cpu_conv_pointwise_workspace(const conv_geom *g, int chunk)
{
    return chunk > 0 ? per_image_bytes(g) * (size_t)chunk : 0;
}

void cpu_conv_pointwise_forward(const conv_geom *g, int n, int chunk, const float *x,
                                const float *w, const float *b, float *y, float *workspace,
                                int flags)
{
    const int PQ = g->P * g->Q;
    const size_t in = (size_t)g->C * PQ, out = (size_t)g->K * PQ;
    if (chunk <= 0) {
        /* one call for the batch: the filters packed once, not once an image */
        cpu_gemm_strided(n, 0, 0, g->K, PQ, g->C, 1.0f, w, g->C, 0, x, PQ, in, 0.0f, y, PQ, out,
                         flags);
        for (int i = 0; b && i < n; i++)
            for (int k = 0; k < g->K; k++)
                for (int j = 0; j < PQ; j++)
                    y[i * out + (size_t)k * PQ + j] += b[k];
        return;
    }
    for (int n0 = 0; n0 < n; n0 += chunk) {
        const int nb = DTNN_MIN(chunk, n - n0), ld = nb * PQ;
        float *xg = workspace, *yg = xg + (size_t)g->C * ld;
        cpu_gather_images(x + n0 * in, nb, g->C, PQ, in, xg);
        cpu_gemm_strided(1, 0, 0, g->K, ld, g->C, 1.0f, w, g->C, 0, xg, ld, 0, 0.0f, yg, ld, 0,
                         flags);
        cpu_scatter_images(yg, nb, g->K, PQ, out, b, 0, y + n0 * out);
    }
}

void cpu_conv_pointwise_backward(const conv_geom *g, int n, int chunk, const float *x,
                                 const float *dy, const float *w, float *dw, float *dx,
                                 int accumulate, float *workspace, int flags)
{
    const int PQ = g->P * g->Q;
    const size_t in = (size_t)g->C * PQ, out = (size_t)g->K * PQ;
    if (chunk <= 0) {
        /* one call each for the batch: W^T packed once; dw the sum of the images' products */
        if (dw)
            cpu_gemm_strided(n, 0, 1, g->K, g->C, PQ, 1.0f, dy, PQ, out, x, PQ, in, 1.0f, dw,
                             g->C, 0, flags);
        if (dx)
            cpu_gemm_strided(n, 1, 0, g->C, PQ, g->K, 1.0f, w, g->C, 0, dy, PQ, out,
                             accumulate ? 1.0f : 0.0f, dx, PQ, in, flags);
        return;
    }
    for (int n0 = 0; n0 < n; n0 += chunk) {
        const int nb = DTNN_MIN(chunk, n - n0), ld = nb * PQ;
        float *xg = workspace, *dyg = xg + (size_t)g->C * ld;
        cpu_gather_images(dy + n0 * out, nb, g->K, PQ, out, dyg);
        if (dw) {
            cpu_gather_images(x + n0 * in, nb, g->C, PQ, in, xg);
            cpu_gemm_strided(1, 0, 1, g->K, g->C, ld, 1.0f, dyg, ld, 0, xg, ld, 0, 1.0f, dw,
                             g->C, 0, flags);
        }
        if (dx) {
            /* x's copy is spent: dx's takes its place */
            cpu_gemm_strided(1, 1, 0, g->C, ld, g->K, 1.0f, w, g->C, 0, dyg, ld, 0, 0.0f, xg, ld,
                             0, flags);
            cpu_scatter_images(xg, nb, g->C, PQ, in, NULL, accumulate, dx + n0 * in);
        }
    }
}
