/*
 * export.c — the ONNX commands. `dtnn export`: builds a model (zoo name or model file) for
 * inference, loads a checkpoint's weights into it and writes its graph as an ONNX file
 * (dtnn_onnx_export, which documents what the graph holds). `dtnn import`: the reverse, an ONNX
 * file as a plain-text model file and a safetensors file of its weights (dtnn_onnx_import).
 * They only parse flags and report; the conversions are the library's.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_options.h"
#include "dtnn.h"


static cli_opt export_opts[] = {
    {"model", OPT_STRING, NULL, "zoo model name or model file", 1, NULL, 0},
    {"load", OPT_STRING, NULL, "checkpoint with the weights (.safetensors)", 1, NULL, 0},
    {"ema", OPT_FLAG, NULL, "the weights' average a run with --ema saved, not its trained "
     "weights", 0, NULL, 0},
    {"output", OPT_STRING, NULL, "ONNX file to write", 1, NULL, 0},
    {"opset", OPT_INT, "13", "ONNX operator set, 11 to 17", 0, NULL, 0},
    {"classes", OPT_INT, "0", "output classes of a zoo model (0: its own), as trained", 0, NULL,
     0},
    {"input", OPT_STRING, NULL, "CxHxW of a zoo model's input, as trained (default: the "
     "model's)", 0, NULL, 0},
    CLI_DEVICE_OPTION,
    {"help", OPT_FLAG, NULL, "show this help", 0, NULL, 0},
};

int cmd_export(int argc, char **argv)
{
    cli_opt *o = export_opts;
    const int n = N_OPTS(export_opts);
    const char *cmd = "export";
    int early = cli_start(cmd, "Writes a model with a checkpoint's weights as an ONNX file "
                          "(inference graph: batch norm with running statistics, no dropout, "
                          "batch dimension N).", o, n, argc, argv);
    if (early >= 0)
        return early;
    const char *out = cli_str(o, n, "output");
    const cli_path files[] = {
        {"--model", cli_str(o, n, "model"), 0},
        {"--load", cli_str(o, n, "load"), 0},
        {"--output", out, 1},
    };
    if ((early = cli_distinct_paths(cmd, files, N_OPTS(files))) >= 0)
        return early;
    int64_t opset = cli_int(o, n, "opset");
    if (opset < 11 || opset > 17)
        return cli_usage_error(cmd, "--opset must be 11 to 17 (the operator sets the exporter "
                               "writes), not %s", cli_str(o, n, "opset"));
    int c = 0, h = 0, w = 0;
    if (cli_given(o, n, "input") && cli_parse_chw(cli_str(o, n, "input"), &c, &h, &w))
        return cli_usage_error(cmd, "--input must be CxHxW, not '%s'", cli_str(o, n, "input"));
    dtnn_error err = {0};
    if (!dtnn_onnx_available()) {
        dtnn_onnx_export(NULL, out, (int)opset, &err);
        return cli_fail(cmd, &err);
    }
    int device_rc = 2;
    const char *device = cli_device(cmd, o, n, &device_rc);
    if (!device)
        return device_rc;
    if (dtnn_file_check_output(out, "ONNX file", &err))
        return cli_fail(cmd, &err);
    dtnn_model *m = dtnn_model_from_spec(cli_str(o, n, "model"), (int)cli_int(o, n, "classes"),
                                         c, h, w, &err);
    dtnn_build_params bp;
    dtnn_build_params_default(&bp);
    bp.max_batch = 1;
    bp.training = 0;
    bp.threads = 1;     /* nothing is computed: the build only lays out the weights */
    bp.device = device;
    if (!m || dtnn_model_build(m, &bp, &err) ||
        dtnn_checkpoint_load_weights(cli_str(o, n, "load"), m, NULL, 0, &err) ||
        (cli_flag(o, n, "ema") && dtnn_checkpoint_load_average(cli_str(o, n, "load"), m, &err)) ||
        dtnn_onnx_export(m, out, (int)opset, &err)) {
        dtnn_model_free(m);
        return cli_fail(cmd, &err);
    }
    int classes;
    dtnn_model_input_shape(m, &c, &h, &w);
    dtnn_model_output_shape(m, NULL, &classes);
    printf("wrote %s: %s, input [N, %d, %d, %d], %d layers, %zu parameters, opset %d\n", out,
           cli_str(o, n, "model"), c, h, w, dtnn_model_layer_count(m), dtnn_model_param_count(m),
           (int)opset);
    dtnn_model_free(m);
    return 0;
}

static cli_opt import_opts[] = {
    {"output-model", OPT_STRING, NULL, "plain-text model file to write", 1, NULL, 0},
    {"output-weights", OPT_STRING, NULL, "weights to write (.safetensors, PyTorch names)", 1,
     NULL, 0},
    {"help", OPT_FLAG, NULL, "show this help", 0, NULL, 0},
};

/* dtnn import FILE.onnx --output-model M --output-weights W: the ONNX file comes first. */
int cmd_import(int argc, char **argv)
{
    cli_opt *o = import_opts;
    const int n = N_OPTS(import_opts);
    const char *cmd = "import";
    const char *src = argc > 2 && argv[2][0] != '-' ? argv[2] : NULL;
    int early = cli_start(cmd, "Converts an ONNX model (dtnn import FILE.onnx ...) into a "
                          "plain-text model file and its weights.", o, n, src ? argc - 1 : argc,
                          src ? argv + 1 : argv);
    if (early >= 0)
        return early;
    if (!src)
        return cli_usage_error(cmd, "%s", "the ONNX file comes first: dtnn import FILE.onnx "
                               "--output-model M --output-weights W.safetensors");
    const cli_path files[] = {
        {"the ONNX file", src, 0},
        {"--output-model", cli_str(o, n, "output-model"), 1},
        {"--output-weights", cli_str(o, n, "output-weights"), 1},
    };
    if ((early = cli_distinct_paths(cmd, files, N_OPTS(files))) >= 0)
        return early;
    dtnn_error err = {0};
    if (dtnn_file_check_output(cli_str(o, n, "output-model"), "model file", &err) ||
        dtnn_file_check_output(cli_str(o, n, "output-weights"), "checkpoint", &err))
        return cli_fail(cmd, &err);
    char *text = dtnn_onnx_import_text(src, &err);
    dtnn_model *m = text ? dtnn_model_parse_string(text, src, &err) : NULL;
    dtnn_build_params bp;
    dtnn_build_params_default(&bp);
    bp.max_batch = 1;
    bp.training = 0;
    bp.threads = 1;     /* nothing is computed: the build only lays out the weights */
    int rc = 0;
    if (!m || dtnn_model_build(m, &bp, &err) || dtnn_onnx_load_weights(src, m, &err) ||
        dtnn_file_write(cli_str(o, n, "output-model"), "model file", text, strlen(text), &err) ||
        dtnn_checkpoint_save(cli_str(o, n, "output-weights"), m, NULL, NULL, NULL, &err)) {
        rc = cli_fail(cmd, &err);
    } else {
        int c, h, w, classes;
        dtnn_model_input_shape(m, &c, &h, &w);
        dtnn_model_output_shape(m, NULL, &classes);
        printf("wrote %s and %s: input %dx%dx%d, %d outputs, %d layers, %zu parameters\n",
               cli_str(o, n, "output-model"), cli_str(o, n, "output-weights"), c, h, w, classes,
               dtnn_model_layer_count(m), dtnn_model_param_count(m));
    }
    free(text);
    dtnn_model_free(m);
    return rc;
}
