/*
 * gemm_blas.c — GEMM through the CBLAS of the BLAS this build links (OpenBLAS or BLIS, chosen
 * by CMake; never the reference libblas), and the thread setting for BLAS and OpenMP together
 * so the two never oversubscribe the cores given to the process.
 */
#include <stdio.h>

#include "cpu_kernels.h"
#include "dtnn.h"

#if defined(DTNN_BLAS_BLIS)
#include <blis.h>
#else
#include <cblas.h>
#endif
#ifdef _OPENMP
#include <omp.h>
#endif

void cpu_gemm(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a,
              int lda, const float *b, int ldb, float beta, float *c, int ldc)
{
    if (m <= 0 || n <= 0)
        return;
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                trans_b ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, lda, b, ldb, beta, c,
                ldc);
}

void dtnn_set_threads(int threads)
{
    if (threads <= 0)
        return;
#if defined(DTNN_BLAS_BLIS)
    bli_thread_set_num_threads(threads);
#else
    openblas_set_num_threads(threads);
#endif
#ifdef _OPENMP
    omp_set_num_threads(threads);
#endif
}

const char *dtnn_blas_name(char *buf, size_t len)
{
#if defined(DTNN_BLAS_BLIS)
    snprintf(buf, len, "blis %s", bli_info_get_version_str());
#else
    snprintf(buf, len, "%s (core %s)", openblas_get_config(), openblas_get_corename());
#endif
    return buf;
}
