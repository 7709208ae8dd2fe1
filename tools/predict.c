/*
 * predict.c — `dtnn predict`: a model with a checkpoint's weights (or an ONNX file's own) run
 * on a float32 .npy array in batches, the logits written as an .npy file (atomically). The
 * array is in the dataset's units; the checkpoint's normalisation is applied here, as the
 * training loader applied it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_options.h"
#include "dtnn.h"

static cli_opt predict_opts[] = {
    {"model", OPT_STRING, NULL, "zoo model name, model file or .onnx file", 1, NULL, 0},
    {"load", OPT_STRING, NULL, "checkpoint with the weights (required but for an .onnx "
     "--model: its own weights)", 0, NULL, 0},
    {"ema", OPT_FLAG, NULL, "the weights' average a run with --ema saved, not its trained "
     "weights", 0, NULL, 0},
    {"input", OPT_STRING, NULL, "float32 .npy [N, C, H, W] ([N, H, W] for C = 1, [N, F] for "
     "Fx1x1), in the dataset's units; the checkpoint's normalisation is applied", 1, NULL, 0},
    {"output", OPT_STRING, NULL, "float32 .npy of logits [N, classes]", 1, NULL, 0},
    {"classes", OPT_INT, "0", "output classes of a zoo model (0: its own)", 0, NULL, 0},
    {"batch-size", OPT_INT, "256", "inference batch size", 0, NULL, 0},
    {"threads", OPT_INT, "0", "kernel threads (0: the cores given to this process)", 0, NULL, 0},
    CLI_DEVICE_OPTION,
    CLI_PRECISION_OPTION,
    {"allow-nonfinite-weights", OPT_FLAG, NULL, "load weights that hold NaN or Inf (forensics "
     "on a diverged run; refused otherwise)", 0, NULL, 0},
    {"help", OPT_FLAG, NULL, "show this help", 0, NULL, 0},
};

/* The per-sample shape of an .npy array of ndim dimensions: [N, C, H, W], [N, H, W] (C = 1),
 * or [N, features], the Fx1x1 input of a model on feature vectors (an imported MLP). */
static dtnn_status npy_sample_shape(const char *path, const int64_t *dims, int ndim, int *c,
                                    int *h, int *w, dtnn_error *err)
{
    if (ndim < 2 || ndim > 4)
        return dtnn_error_set(err, DTNN_ERR_SHAPE, "%s: expected [N, C, H, W], [N, H, W] or "
                              "[N, features], got %d dimensions", path, ndim);
    *c = ndim == 4 ? (int)dims[1] : ndim == 2 ? (int)dims[1] : 1;
    *h = ndim == 2 ? 1 : (int)dims[ndim - 2];
    *w = ndim == 2 ? 1 : (int)dims[ndim - 1];
    return DTNN_OK;
}

/* x [count, c, h, w] in place into the checkpoint's normalised units (its dataset's mean and
 * standard deviation for up to 4 channels). */
static void normalise_samples(float *x, int64_t count, int c, int h, int w,
                              const dtnn_dataset *norm)
{
    const size_t sample = (size_t)c * h * w;
    for (int64_t i = 0; i < count; i++)
        for (int ch = 0; ch < c; ch++) {
            const float mean = ch < 4 ? norm->mean[ch] : 0.0f;
            float sd = ch < 4 ? norm->std[ch] : 1.0f;
            if (sd == 0.0f)
                sd = 1.0f;
            float *p = x + (size_t)i * sample + (size_t)ch * h * w;
            for (int j = 0; j < h * w; j++)
                p[j] = (p[j] - mean) / sd;
        }
}

/* The logits of count samples of x in forwards of at most batch: *logits malloc'd
 * [count, *classes]. */
static dtnn_status forward_all(dtnn_model *m, const float *x, int64_t count, size_t sample,
                               int batch, float **logits, int *classes, dtnn_error *err)
{
    *classes = 0;
    for (int64_t i = 0; i < count; i += batch) {
        const int nb = (int)(count - i < batch ? count - i : batch);
        if (dtnn_model_forward(m, x + (size_t)i * sample, nb, 0, err))
            return err->code;
        dtnn_model_output_shape(m, NULL, classes);
        if (!*logits && !(*logits = malloc(sizeof(float) * (size_t)count * *classes)))
            return dtnn_error_set(err, DTNN_ERR_NOMEM, "out of memory for %lld x %d logits",
                                  (long long)count, *classes);
        dtnn_model_read_output(m, *logits + (size_t)i * *classes);
    }
    return DTNN_OK;
}

int cmd_predict(int argc, char **argv)
{
    cli_opt *o = predict_opts;
    const int n = N_OPTS(predict_opts);
    const char *cmd = "predict";
    int early = cli_start(cmd, "Runs inference on an .npy array and writes the logits.", o, n,
                          argc, argv);
    if (early >= 0 || (early = cli_need_load(o, n, cmd)) >= 0)
        return early;
    const cli_path files[] = {
        {"--model", cli_str(o, n, "model"), 0}, {"--load", cli_str(o, n, "load"), 0},
        {"--input", cli_str(o, n, "input"), 0}, {"--output", cli_str(o, n, "output"), 1},
    };
    if ((early = cli_distinct_paths(cmd, files, N_OPTS(files))) >= 0)
        return early;
    int batch = (int)cli_int(o, n, "batch-size");
    if (batch <= 0 || batch > 1 << 20)
        return cli_usage_error(cmd, "--batch-size must be in [1, 1048576], got %s",
                           cli_str(o, n, "batch-size"));
    int threads = cli_threads(cmd, o, n, NULL), device_rc = 2;
    const char *device = threads > 0 ? cli_device(cmd, o, n, &device_rc) : NULL;
    if (!device)
        return device_rc;
    dtnn_precision precision = DTNN_PRECISION_FP32;
    if (cli_precision(cmd, o, n, &precision))
        return 2;
    dtnn_error err = {0};
    float *x = NULL, *logits = NULL;
    dtnn_model *m = NULL;
    int rc = 1;
    int64_t dims[8];
    int ndim = 0, c = 0, h = 0, w = 0;
    if (dtnn_file_check_output(cli_str(o, n, "output"), ".npy file", &err) ||
        dtnn_npy_load_f32(cli_str(o, n, "input"), &x, dims, &ndim, &err) ||
        npy_sample_shape(cli_str(o, n, "input"), dims, ndim, &c, &h, &w, &err))
        goto out;
    const int64_t count = dims[0];
    m = dtnn_model_from_spec(cli_str(o, n, "model"), (int)cli_int(o, n, "classes"), c, h, w,
                             &err);
    if (!m)
        goto out;
    int mc, mh, mw;
    dtnn_model_input_shape(m, &mc, &mh, &mw);
    if (mc != c || mh != h || mw != w) {
        dtnn_error_set(&err, DTNN_ERR_SHAPE, "%s holds %dx%dx%d samples but the model takes "
                       "%dx%dx%d", cli_str(o, n, "input"), c, h, w, mc, mh, mw);
        goto out;
    }
    dtnn_build_params bp;
    dtnn_build_params_default(&bp);
    bp.max_batch = (int)(count < batch ? (count > 0 ? count : 1) : batch);
    bp.training = 0;
    bp.threads = threads;
    bp.device = device;
    bp.precision = precision;
    bp.allow_nonfinite_weights = cli_flag(o, n, "allow-nonfinite-weights");
    dtnn_dataset norm;
    memset(&norm, 0, sizeof norm);
    if (dtnn_model_build(m, &bp, &err) || cli_load_weights(o, n, m, &norm, &err))
        goto out;
    normalise_samples(x, count, c, h, w, &norm);
    int classes;
    if (forward_all(m, x, count, (size_t)c * h * w, batch, &logits, &classes, &err))
        goto out;
    int64_t odims[2] = {count, classes};
    if (dtnn_npy_save_f32(cli_str(o, n, "output"), logits, odims, 2, &err))
        goto out;
    printf("wrote %s: %lld x %d logits\n", cli_str(o, n, "output"), (long long)count, classes);
    rc = 0;
out:
    if (rc)
        cli_fail(cmd, &err);
    free(x);
    free(logits);
    dtnn_model_free(m);
    return rc;
}
