/*
 * optim.cu — the optimizer updates over the flat buffers, one launch each over all n values,
 * with kernels/optim.c's float arithmetic in its order (no FMA contraction, IEEE division and
 * square root), so a step gives the CPU's weights bit for bit.
 */
#include "cuda_launch.cuh"

static __global__ void sgd_k(sgd_args a, size_t n, float *w, const float *grad, float *buf)
{
    CU_LOOP(i, n)
    {
        float d = grad[i];
        if (a.weight_decay != 0.0f)
            d = d + a.weight_decay * w[i];
        if (a.use_momentum) {
            const float b = a.first ? d : a.momentum * buf[i] + a.keep * d;
            buf[i] = b;
            d = a.nesterov ? d + a.momentum * b : b;
        }
        w[i] = w[i] - a.lr * d;
    }
}

static __global__ void adam_k(adam_args a, size_t n, float *w, const float *grad, float *m1,
                              float *m2)
{
    CU_LOOP(i, n)
    {
        float p = w[i];
        if (a.do_shrink)
            p = p * a.shrink;
        float g = grad[i];
        if (a.l2 != 0.0f)
            g = g + a.l2 * p;
        const float m = a.beta1 * m1[i] + a.one_minus_beta1 * g;
        const float v = a.beta2 * m2[i] + a.one_minus_beta2 * g * g;
        m1[i] = m;
        m2[i] = v;
        const float denom = sqrtf(v) / a.bc2_sqrt + a.eps;
        w[i] = p - a.step_size * m / denom;
    }
}

static __global__ void rmsprop_k(rmsprop_args a, size_t n, float *w, const float *grad,
                                 float *sq, float *buf, float *ga)
{
    CU_LOOP(i, n)
    {
        float g = grad[i];
        if (a.weight_decay != 0.0f)
            g = g + a.weight_decay * w[i];
        const float s = a.alpha * sq[i] + a.one_minus_alpha * g * g;
        sq[i] = s;
        float avg;
        if (ga) {
            const float m = a.alpha * ga[i] + a.one_minus_alpha * g;
            ga[i] = m;
            const float var = s - m * m;
            avg = sqrtf(var > 0.0f ? var : 0.0f) + a.eps;
        } else {
            avg = sqrtf(s) + a.eps;
        }
        if (buf) {
            const float b = a.momentum * buf[i] + g / avg;
            buf[i] = b;
            w[i] = w[i] - a.lr * b;
        } else {
            w[i] = w[i] - a.lr * g / avg;
        }
    }
}

extern "C" void cuda_sgd_step(dtnn_backend *be, const sgd_args *a, size_t n, float *w,
                              const float *g, float *buf)
{
    CU_SKIP_IF_FAILED(be);
    CU_LAUNCH(be, "sgd step kernel", sgd_k, n, *a, n, w, g, buf);
}

extern "C" void cuda_adam_step(dtnn_backend *be, const adam_args *a, size_t n, float *w,
                               const float *g, float *m1, float *m2)
{
    CU_SKIP_IF_FAILED(be);
    CU_LAUNCH(be, "adam step kernel", adam_k, n, *a, n, w, g, m1, m2);
}

extern "C" void cuda_rmsprop_step(dtnn_backend *be, const rmsprop_args *a, size_t n, float *w,
                                  const float *g, float *square_avg, float *momentum_buf,
                                  float *grad_avg)
{
    CU_SKIP_IF_FAILED(be);
    CU_LAUNCH(be, "rmsprop step kernel", rmsprop_k, n, *a, n, w, g, square_avg, momentum_buf,
              grad_avg);
}
