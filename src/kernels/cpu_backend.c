/*
 * cpu_backend.c — the CPU backend table: BLAS for GEMM, portable C (OpenMP-parallel where it
 * pays) for everything else. Compiled once per kernel set like every kernel file, so there is
 * one table per set (cpu_backend_table, cpu_backend_table_avx2); dtnn_backend_cpu() is in
 * cpu_select.c, which picks one.
 */
#include "cpu_kernels.h"

const dtnn_backend cpu_backend_table = {
    .name = "cpu",
    .threads = cpu_threads,
    .gemm = cpu_gemm,
    .gemm_tiles_scratch = cpu_gemm_tiles_scratch,
    .gemm_tiles_pack = cpu_gemm_tiles_pack,
    .gemm_tiles = cpu_gemm_tiles,
    .gemm_dots = cpu_gemm_dots,
    .im2col = cpu_im2col,
    .col2im = cpu_col2im,
    .conv_direct_supported = cpu_conv_direct_supported,
    .conv_direct_workspace = cpu_conv_direct_workspace,
    .conv_direct_forward = cpu_conv_direct_forward,
    .conv_direct_backward = cpu_conv_direct_backward,
    .conv_winograd_supported = cpu_conv_winograd_supported,
    .conv_winograd_workspace = cpu_conv_winograd_workspace,
    .conv_winograd_chunk = cpu_conv_winograd_chunk,
    .conv_winograd_forward = cpu_conv_winograd_forward,
    .conv_winograd_backward = cpu_conv_winograd_backward,
    .bias_grad = cpu_bias_grad,
    .dw_conv_forward = cpu_dw_conv_forward,
    .dw_conv_backward_data = cpu_dw_conv_backward_data,
    .dw_conv_backward_weight = cpu_dw_conv_backward_weight,
    .maxpool_forward = cpu_maxpool_forward,
    .maxpool_backward = cpu_maxpool_backward,
    .avgpool_forward = cpu_avgpool_forward,
    .avgpool_backward = cpu_avgpool_backward,
    .act_forward = cpu_act_forward,
    .act_backward = cpu_act_backward,
    .bn_moments = cpu_bn_moments,
    .bn_apply_train = cpu_bn_apply_train,
    .bn_backward_sums = cpu_bn_backward_sums,
    .bn_backward_apply = cpu_bn_backward_apply,
    .bn_train_forward = cpu_bn_train_forward,
    .bn_train_backward = cpu_bn_train_backward,
    .bn_forward_eval = cpu_bn_forward_eval,
    .softmax_forward = cpu_softmax_forward,
    .softmax_backward = cpu_softmax_backward,
};
