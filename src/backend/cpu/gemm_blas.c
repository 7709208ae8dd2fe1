/*
 * gemm_blas.c — GEMM through the CBLAS of the BLAS this build links (OpenBLAS or BLIS, chosen
 * by CMake; never the reference libblas) or, built with DTNN_BLAS=none, plain C loops, and the
 * thread setting. The generic kernel set's GEMM (the fast sets run their own, gemm_packed.c,
 * and come here only when its buffers cannot be had), and the cross-check of the tests.
 *
 * Threading: there is exactly one thread pool, OpenMP's. The BLAS always runs single-threaded
 * and cpu_gemm_blas splits a large product into one block of rows or columns per OpenMP thread.
 * OpenBLAS's own pthreads next to OpenMP's spinning workers made 2 threads train far slower
 * than 1 on the 2-core machine: the two pools fought over the cores (measurements:
 * docs/perf-notes.md). With one pool they cannot. Each block of C is computed by one
 * thread with the same partition for the same thread count, so results stay deterministic.
 */
#include <stdio.h>

#include "cpu_kernels.h"
#include "dtnn.h"

#if defined(DTNN_BLAS_BLIS)
#include <blis.h>
#elif !defined(DTNN_BLAS_NONE)
#include <cblas.h>
#endif
#ifdef _OPENMP
#include <omp.h>
#endif

#if defined(DTNN_BLAS_NONE)
/* Without a BLAS (DTNN_BLAS=none): row by row, each row of C a sum over k in order; beta 0
 * overwrites, as a BLAS does (a NaN in C does not survive). */
static void gemm_block(int trans_a, int trans_b, int m, int n, int k, float alpha,
                       const float *a, int lda, const float *b, int ldb, float beta, float *c,
                       int ldc)
{
    for (int i = 0; i < m; i++) {
        float *ci = c + (size_t)i * ldc;
        for (int j = 0; j < n; j++)
            ci[j] = beta == 0.0f ? 0.0f : beta * ci[j];
        for (int p = 0; p < k; p++) {
            const float av = alpha * (trans_a ? a[(size_t)p * lda + i] : a[(size_t)i * lda + p]);
            if (trans_b)
                for (int j = 0; j < n; j++)
                    ci[j] += av * b[(size_t)j * ldb + p];
            else
                for (int j = 0; j < n; j++)
                    ci[j] += av * b[(size_t)p * ldb + j];
        }
    }
}
#else
static void gemm_block(int trans_a, int trans_b, int m, int n, int k, float alpha,
                       const float *a, int lda, const float *b, int ldb, float beta, float *c,
                       int ldc)
{
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                trans_b ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, lda, b, ldb, beta, c,
                ldc);
}
#endif

void cpu_gemm_blas(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a,
                   int lda, const float *b, int ldb, float beta, float *c, int ldc)
{
    if (m <= 0 || n <= 0)
        return;
    int threads = 1;
#ifdef _OPENMP
    /* Below ~1 MFLOP a fork/join costs more than it saves. */
    if (!omp_in_parallel() && 2.0 * m * n * k >= 1e6)
        threads = omp_get_max_threads();
#endif
    if (threads <= 1) {
        gemm_block(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
        return;
    }
    /* Split the larger of M and N into 16-aligned blocks, one per thread. */
    int split_n = n >= m;
    int len = split_n ? n : m;
    int block = (len + threads - 1) / threads;
    block = (block + 15) / 16 * 16;
#pragma omp parallel for schedule(static) num_threads(threads)
    for (int t = 0; t < threads; t++) {
        int lo = t * block, hi = lo + block < len ? lo + block : len;
        if (lo >= hi)
            continue;
        if (split_n)
            gemm_block(trans_a, trans_b, m, hi - lo, k, alpha, a, lda,
                       trans_b ? b + (size_t)lo * ldb : b + lo, ldb, beta, c + lo, ldc);
        else
            gemm_block(trans_a, trans_b, hi - lo, n, k, alpha,
                       trans_a ? a + lo : a + (size_t)lo * lda, lda, b, ldb, beta,
                       c + (size_t)lo * ldc, ldc);
    }
}

void dtnn_set_threads(int threads)
{
#if defined(DTNN_BLAS_BLIS)
    bli_thread_set_num_threads(1);
#elif !defined(DTNN_BLAS_NONE)
    openblas_set_num_threads(1);
#endif
#ifdef _OPENMP
    if (threads > 0)
        omp_set_num_threads(threads);
#endif
}

const char *dtnn_blas_name(char *buf, size_t len)
{
#if defined(DTNN_BLAS_BLIS)
    snprintf(buf, len, "blis %s", bli_info_get_version_str());
#elif defined(DTNN_BLAS_NONE)
    snprintf(buf, len, "none (plain C loops, DTNN_BLAS=none)");
#else
    snprintf(buf, len, "%s (core %s)", openblas_get_config(), openblas_get_corename());
#endif
    return buf;
}

void cpu_gemm_strided_blas(int count, int trans_a, int trans_b, int m, int n, int k,
                           float alpha, const float *a, int lda, size_t stride_a,
                           const float *b, int ldb, size_t stride_b, float beta, float *c,
                           int ldc, size_t stride_c)
{
    for (int i = 0; i < count; i++)
        cpu_gemm_blas(trans_a, trans_b, m, n, k, alpha, a + i * stride_a, lda, b + i * stride_b,
                      ldb, stride_c || i == 0 ? beta : 1.0f, c + i * stride_c, ldc);
}
