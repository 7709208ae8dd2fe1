/*
 * cpu_isa_names.h — the one list of the CPU kernels' external names. CMake compiles every file
 * of src/kernels/ (but cpu_select.c) twice on x86-64: portable, and with -mavx2 -mfma and
 * -DDTNN_CPU_ISA=avx2. In that second compile each name below gets the suffix, cpu_im2col
 * becoming cpu_im2col_avx2, so both sets link into one library and cpu_select.c picks one
 * table at run time. The portable compile keeps the plain names.
 *
 * A new external function or object in src/kernels/ needs its line here; the isa_symbols test
 * (tests/isa_symbols.sh) fails, naming it, while one is missing. Names of public functions
 * (dtnn_*) are listed too: their AVX2 copies are never called, but must not clash. A function
 * that only the AVX2 compile defines (its code is AVX2 intrinsics, under #if __AVX2__) is
 * listed with CPU_ISA_ONLY instead, which renames alike and tells that test it is expected
 * in that compile alone.
 */
#ifndef DTNN_CPU_ISA_NAMES_H
#define DTNN_CPU_ISA_NAMES_H

#ifdef DTNN_CPU_ISA
/* Two steps, so that DTNN_CPU_ISA is replaced by its value before the paste. */
#define CPU_ISA_PASTE_(name, isa) name##_##isa
#define CPU_ISA_PASTE(name, isa) CPU_ISA_PASTE_(name, isa)
#define CPU_ISA_NAME(name) CPU_ISA_PASTE(name, DTNN_CPU_ISA)
#define CPU_ISA_ONLY(name) CPU_ISA_PASTE(name, DTNN_CPU_ISA)

#define cpu_backend_table CPU_ISA_NAME(cpu_backend_table)

#define cpu_conv_plan_create CPU_ISA_NAME(cpu_conv_plan_create)
#define cpu_conv_plan_free CPU_ISA_NAME(cpu_conv_plan_free)
#define cpu_conv_workspace CPU_ISA_NAME(cpu_conv_workspace)
#define cpu_conv_method CPU_ISA_NAME(cpu_conv_method)
#define cpu_conv_forward CPU_ISA_NAME(cpu_conv_forward)
#define cpu_conv_backward CPU_ISA_NAME(cpu_conv_backward)
#define cpu_linear_forward CPU_ISA_NAME(cpu_linear_forward)
#define cpu_linear_backward CPU_ISA_NAME(cpu_linear_backward)
#define cpu_linear_workspace CPU_ISA_NAME(cpu_linear_workspace)
#define cpu_round_bf16 CPU_ISA_NAME(cpu_round_bf16)
#define cpu_store_bf16 CPU_ISA_NAME(cpu_store_bf16)
#define cpu_add_forward CPU_ISA_NAME(cpu_add_forward)
#define cpu_add_backward CPU_ISA_NAME(cpu_add_backward)
#define cpu_copy_rows CPU_ISA_NAME(cpu_copy_rows)
#define cpu_fill CPU_ISA_NAME(cpu_fill)
#define cpu_binary_forward CPU_ISA_NAME(cpu_binary_forward)
#define cpu_binary_backward CPU_ISA_NAME(cpu_binary_backward)
#define cpu_pad_forward CPU_ISA_NAME(cpu_pad_forward)
#define cpu_pad_backward CPU_ISA_NAME(cpu_pad_backward)
#define cpu_dropout_forward CPU_ISA_NAME(cpu_dropout_forward)
#define cpu_dropout_backward CPU_ISA_NAME(cpu_dropout_backward)
#define cpu_count_nonfinite CPU_ISA_NAME(cpu_count_nonfinite)
#define cpu_half_pack CPU_ISA_NAME(cpu_half_pack)
#define cpu_half_unpack CPU_ISA_NAME(cpu_half_unpack)
#define cpu_bn_param_grads CPU_ISA_NAME(cpu_bn_param_grads)
#define cpu_shortcut_forward CPU_ISA_NAME(cpu_shortcut_forward)
#define cpu_shortcut_backward CPU_ISA_NAME(cpu_shortcut_backward)
#define cpu_loss CPU_ISA_NAME(cpu_loss)
#define cpu_sgd_step CPU_ISA_NAME(cpu_sgd_step)
#define cpu_adam_step CPU_ISA_NAME(cpu_adam_step)
#define cpu_rmsprop_step CPU_ISA_NAME(cpu_rmsprop_step)
#define cpu_gemm CPU_ISA_NAME(cpu_gemm)
#define dtnn_set_threads CPU_ISA_NAME(dtnn_set_threads)
#define dtnn_blas_name CPU_ISA_NAME(dtnn_blas_name)
#define dtnn_sgemm CPU_ISA_NAME(dtnn_sgemm)

#define cpu_gemm_tiles_scratch CPU_ISA_NAME(cpu_gemm_tiles_scratch)
#define cpu_gemm_tiles_pack CPU_ISA_NAME(cpu_gemm_tiles_pack)
#define cpu_gemm_tiles CPU_ISA_NAME(cpu_gemm_tiles)
#define cpu_gemm_dots CPU_ISA_NAME(cpu_gemm_dots)
#define cpu_tile_4x24 CPU_ISA_ONLY(cpu_tile_4x24)
#define cpu_tile_4x24_taps CPU_ISA_ONLY(cpu_tile_4x24_taps)
#define cpu_dot_4x3 CPU_ISA_ONLY(cpu_dot_4x3)

#define cpu_im2col CPU_ISA_NAME(cpu_im2col)
#define cpu_col2im CPU_ISA_NAME(cpu_col2im)

#define cpu_conv_direct_supported CPU_ISA_NAME(cpu_conv_direct_supported)
#define cpu_conv_direct_workspace CPU_ISA_NAME(cpu_conv_direct_workspace)
#define cpu_conv_direct_forward CPU_ISA_NAME(cpu_conv_direct_forward)
#define cpu_conv_direct_backward CPU_ISA_NAME(cpu_conv_direct_backward)

#define cpu_conv_winograd_supported CPU_ISA_NAME(cpu_conv_winograd_supported)
#define cpu_conv_winograd_workspace CPU_ISA_NAME(cpu_conv_winograd_workspace)
#define cpu_conv_winograd_chunk CPU_ISA_NAME(cpu_conv_winograd_chunk)
#define cpu_conv_winograd_forward CPU_ISA_NAME(cpu_conv_winograd_forward)
#define cpu_conv_winograd_backward CPU_ISA_NAME(cpu_conv_winograd_backward)

#define cpu_dw_conv_forward CPU_ISA_NAME(cpu_dw_conv_forward)
#define cpu_dw_conv_backward_data CPU_ISA_NAME(cpu_dw_conv_backward_data)
#define cpu_dw_conv_backward_weight CPU_ISA_NAME(cpu_dw_conv_backward_weight)

#define cpu_maxpool_forward CPU_ISA_NAME(cpu_maxpool_forward)
#define cpu_maxpool_backward CPU_ISA_NAME(cpu_maxpool_backward)
#define cpu_avgpool_forward CPU_ISA_NAME(cpu_avgpool_forward)
#define cpu_avgpool_backward CPU_ISA_NAME(cpu_avgpool_backward)

#define cpu_act_forward CPU_ISA_NAME(cpu_act_forward)
#define cpu_act_backward CPU_ISA_NAME(cpu_act_backward)

#define cpu_bias_grad CPU_ISA_NAME(cpu_bias_grad)
#define cpu_bn_moments CPU_ISA_NAME(cpu_bn_moments)
#define cpu_bn_apply_train CPU_ISA_NAME(cpu_bn_apply_train)
#define cpu_bn_backward_sums CPU_ISA_NAME(cpu_bn_backward_sums)
#define cpu_bn_backward_apply CPU_ISA_NAME(cpu_bn_backward_apply)
#define cpu_bn_train_forward CPU_ISA_NAME(cpu_bn_train_forward)
#define cpu_bn_train_backward CPU_ISA_NAME(cpu_bn_train_backward)
#define cpu_bn_forward_eval CPU_ISA_NAME(cpu_bn_forward_eval)
#define cpu_bn_backward_eval CPU_ISA_NAME(cpu_bn_backward_eval)

#define cpu_softmax_forward CPU_ISA_NAME(cpu_softmax_forward)
#define cpu_softmax_backward CPU_ISA_NAME(cpu_softmax_backward)
#endif

#endif
