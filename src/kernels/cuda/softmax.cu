/*
 * softmax.cu — row-wise softmax and its backward, as kernels/softmax.c: one thread per row,
 * walking the row in the CPU's order (max, then the exponentials summed in double, then the
 * scale), so the results differ from the CPU's only by expf's last bit. Rows are a layer's
 * samples (a few hundred) and columns its classes: not worth a cooperative reduction yet.
 */
#include "cuda_launch.cuh"

static __global__ void softmax_k(int rows, int cols, const float *x, float *y)
{
    CU_LOOP(r, (size_t)rows)
    {
        const float *xr = x + r * cols;
        float *yr = y + r * cols;
        float mx = xr[0];
        for (int j = 1; j < cols; j++)
            mx = xr[j] > mx ? xr[j] : mx;
        double sum = 0.0;
        for (int j = 0; j < cols; j++) {
            yr[j] = expf(xr[j] - mx);
            sum += yr[j];
        }
        const float inv = (float)(1.0 / sum);
        for (int j = 0; j < cols; j++)
            yr[j] *= inv;
    }
}

static __global__ void softmax_grad_k(int rows, int cols, const float *y, const float *dy,
                                      float *dx, int acc)
{
    CU_LOOP(r, (size_t)rows)
    {
        const float *yr = y + r * cols, *dyr = dy + r * cols;
        float *dxr = dx + r * cols;
        double dot = 0.0;
        for (int j = 0; j < cols; j++)
            dot += (double)dyr[j] * yr[j];
        for (int j = 0; j < cols; j++) {
            const float g = yr[j] * (dyr[j] - (float)dot);
            dxr[j] = acc ? dxr[j] + g : g;
        }
    }
}

extern "C" void cuda_softmax_forward(dtnn_backend *be, int rows, int cols, const float *x,
                                     float *y)
{
    CU_SKIP_IF_FAILED(be);
    CU_LAUNCH(be, "softmax forward kernel", softmax_k, (size_t)rows, rows, cols, x, y);
}

extern "C" void cuda_softmax_backward(dtnn_backend *be, int rows, int cols, const float *y,
                                      const float *dy, float *dx, int accumulate)
{
    CU_SKIP_IF_FAILED(be);
    CU_LAUNCH(be, "softmax backward kernel", softmax_grad_k, (size_t)rows, rows, cols, y, dy, dx,
              accumulate);
}
