/*
 * cli_info.c — the commands that describe rather than run: `dtnn models` (the zoo, or the layer
 * types), `dtnn info` (a model's layers, shapes, parameters, FLOPs and the memory training
 * needs) and `dtnn devices` (the backends and whether each runs here).
 */
#include <stdio.h>
#include <string.h>

#include "cli_options.h"
#include "dtnn.h"


int cmd_models(int argc, char **argv)
{
    int layers = argc > 2 && !strcmp(argv[2], "--layers");
    if (argc > 2 && !layers) {
        if (!strcmp(argv[2], "--help")) {
            printf("usage: dtnn models [--layers]\nLists the model zoo, or the layer types.\n");
            return 0;
        }
        return cli_usage_error("models", "unexpected argument '%s' (only --layers)", argv[2]);
    }
    if (layers) {
        for (int i = 0; dtnn_layer_type_name(i); i++)
            printf("%s\n", dtnn_layer_type_name(i));
        return 0;
    }
    const char *desc;
    for (int i = 0; dtnn_zoo_name(i, &desc); i++)
        printf("%-14s %s\n", dtnn_zoo_name(i, NULL), desc);
    return 0;
}

static cli_opt info_opts[] = {
    {"model", OPT_STRING, NULL, "zoo model name, model file or .onnx file", 1, NULL, 0},
    {"input", OPT_STRING, NULL, "CxHxW of a zoo model's input (default: the model's)", 0, NULL, 0},
    {"classes", OPT_INT, "0", "output classes of a zoo model (0: its own)", 0, NULL, 0},
    {"batch-size", OPT_INT, "64", "batch size of the memory figure (per rank)", 0, NULL, 0},
    {"optimizer-slots", OPT_INT, "1", "optimizer state buffers of the memory figure (SGD with "
     "momentum 1, Adam 2)", 0, NULL, 0},
    {"help", OPT_FLAG, NULL, "show this help", 0, NULL, 0},
};

int cmd_info(int argc, char **argv)
{
    cli_opt *o = info_opts;
    const int n = N_OPTS(info_opts);
    int early = cli_start("info", "Prints every layer's output shape, parameters and forward "
                          "FLOPs, and the memory training needs.", o, n, argc, argv);
    if (early >= 0)
        return early;
    int c = 0, h = 0, w = 0;
    if (cli_given(o, n, "input") && cli_parse_chw(cli_str(o, n, "input"), &c, &h, &w))
        return cli_usage_error("info", "--input must be CxHxW, not '%s'", cli_str(o, n, "input"));
    int64_t batch = cli_int(o, n, "batch-size"), slots = cli_int(o, n, "optimizer-slots");
    if (batch <= 0 || batch > 1 << 20 || slots < 0 || slots > 3)
        return cli_usage_error("info", "%s", "--batch-size must be in [1, 1048576] and "
                               "--optimizer-slots in [0, 3]");
    dtnn_error err = {0};
    dtnn_model *m = dtnn_model_from_spec(cli_str(o, n, "model"), (int)cli_int(o, n, "classes"),
                                         c, h, w, &err);
    dtnn_build_params bp;
    dtnn_build_params_default(&bp);
    bp.max_batch = (int)batch;
    bp.training = 1;
    bp.optimizer_slots = (int)slots;
    if (!m || dtnn_model_build(m, &bp, &err)) {
        dtnn_model_free(m);
        return cli_fail("info", &err);
    }
    dtnn_model_input_shape(m, &c, &h, &w);
    printf("%-28s %-14s %-14s %12s %14s\n", "layer", "type", "output", "params", "fwd FLOPs");
    printf("%-28s %-14s %-14s\n", "input", "", "");
    double flops = 0;
    for (int i = 0; i < dtnn_model_layer_count(m); i++) {
        dtnn_layer_info li;
        dtnn_model_layer_info(m, i, &li);
        char shape[48];
        snprintf(shape, sizeof shape, "%dx%dx%d", li.c, li.h, li.w);
        printf("%-28s %-14s %-14s %12zu %14.0f\n", li.name, li.type, shape, li.params, li.flops);
        flops += li.flops;
    }
    printf("total: %zu parameters, %.4g forward FLOPs per %dx%dx%d sample (training ~3x)\n",
           dtnn_model_param_count(m), flops, c, h, w);
    dtnn_memory mem;
    dtnn_model_memory(m, &mem);
    const double mib = 1048576.0;
    printf("memory to train at batch %lld with %lld optimizer slot%s: %.1f MiB (parameters %.1f, "
           "gradients %.1f, optimizer %.1f, buffers %.1f, activations %.1f, workspace %.1f); "
           "%.1f MiB available\n", (long long)batch, (long long)slots, slots == 1 ? "" : "s",
           mem.total / mib, mem.params / mib, mem.grads / mib, mem.optimizer / mib,
           mem.buffers / mib, mem.activations / mib, mem.workspace / mib,
           dtnn_memory_available() / mib);
    printf("cpu kernels: %s (%s)\n", dtnn_cpu_kernels_name(), dtnn_cpu_kernels_reason());
    char gemm[128], blas[128];
    printf("gemm: %s; blas linked: %s\n", dtnn_cpu_gemm_name(gemm, sizeof gemm),
           dtnn_blas_name(blas, sizeof blas));
    dtnn_model_free(m);
    return 0;
}

/* The backends this build knows and whether each is usable on this machine. */
int cmd_devices(int argc, char **argv)
{
    if (argc > 2 && (!strcmp(argv[2], "--help") || !strcmp(argv[2], "-h"))) {
        printf("usage: dtnn devices\nLists the backends --device takes and whether each can "
               "run here.\n");
        return 0;
    }
    if (argc > 2)
        return cli_usage_error("devices", "unexpected argument '%s' (it takes none)", argv[2]);
    for (int i = 0; i < dtnn_device_count(); i++) {
        int usable;
        char why[256];
        const char *name = dtnn_device_name(i, &usable, why, sizeof why);
        if (!strcmp(name, "cpu") || !strcmp(name, "cpu-guarded"))
            printf("%-12s %s (cpu kernels: %s)\n", name, why, dtnn_cpu_kernels_name());
        else
            printf("%-12s %s\n", name, why);
    }
    return 0;
}
