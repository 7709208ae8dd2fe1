/*
 * fuzz_checkpoint.c — libFuzzer harness for safetensors checkpoints: the bytes are loaded into
 * a small model with its optimizer, training state and normalisation (every metadata parser
 * runs), and read as a plain safetensors file. With DTNN_FUZZ_SEED=PATH set, it writes a valid
 * checkpoint of that model to PATH instead (the seed corpus) and exits.
 */
#include <stdlib.h>
#include <string.h>

#include "dtnn.h"
#include "fuzz_input.h"
#include "io/safetensors.h"

static dtnn_model *small_model(dtnn_optimizer **opt)
{
    /* Tiny, so that seeds stay small: a convolution, batch norm (I64 and F32 buffers) and a
     * linear layer, 47 parameters. */
    dtnn_error err = {0};
    dtnn_model *m = dtnn_model_create(1, 2, 2);
    if (m && (dtnn_model_add(m, "conv2d", "conv1", "filters=2 kernel=1", NULL, 0, &err) < 0 ||
              dtnn_model_add(m, "batchnorm", "bn1", "", NULL, 0, &err) < 0 ||
              dtnn_model_add(m, "flatten", "flat", "", NULL, 0, &err) < 0 ||
              dtnn_model_add(m, "linear", "fc", "outputs=3", NULL, 0, &err) < 0)) {
        dtnn_model_free(m);
        m = NULL;
    }
    dtnn_build_params bp;
    dtnn_build_params_default(&bp);
    bp.max_batch = 1;
    dtnn_opt_params op;
    dtnn_opt_params_default(&op, DTNN_OPT_ADAM);
    if (!m || dtnn_model_build(m, &bp, &err) || !(*opt = dtnn_optimizer_create(m, &op, &err))) {
        fprintf(stderr, "fuzz_checkpoint: %s\n", err.message);
        abort();
    }
    return m;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    const char *seed = getenv("DTNN_FUZZ_SEED");
    if (!seed)
        return 0;
    dtnn_optimizer *opt = NULL;
    dtnn_model *m = small_model(&opt);
    dtnn_train_state ts = {3, 1, 1, 42, 8, 0, 0, 0.0, 0.0, 0, 0, 0};
    dtnn_dataset norm;
    memset(&norm, 0, sizeof norm);
    snprintf(norm.name, sizeof norm.name, "synthetic");
    norm.mean[0] = 0.5f;
    norm.std[0] = 0.25f;
    dtnn_error err;
    int rc = dtnn_checkpoint_save(seed, m, opt, &ts, &norm, &err) != DTNN_OK;
    dtnn_optimizer_free(opt);
    dtnn_model_free(m);
    exit(rc);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[256];
    if (fuzz_to_file(data, size, ".safetensors", path, sizeof path))
        return 0;
    dtnn_optimizer *opt = NULL;
    dtnn_model *m = small_model(&opt);
    dtnn_train_state ts;
    dtnn_dataset norm;
    memset(&norm, 0, sizeof norm);
    dtnn_error err;
    (void)dtnn_checkpoint_load(path, m, opt, &ts, &norm, &err);
    (void)dtnn_checkpoint_load(path, m, NULL, NULL, NULL, &err);
    st_file f;
    if (st_read(path, &f, &err) == DTNN_OK)
        st_free(&f);
    dtnn_optimizer_free(opt);
    dtnn_model_free(m);
    remove(path);
    return 0;
}
