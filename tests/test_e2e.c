/*
 * test_e2e.c — the library end to end on synthetic data: dtnn_train lowers the loss; the saved
 * checkpoint, loaded into a fresh model built for inference, gives bit-identical outputs; the
 * same seed and threads give the same weights; a model file and the C API give the same model.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"

static dtnn_model *built(const char *spec, int training, int max_batch, dtnn_error *err)
{
    dtnn_model *m = dtnn_model_from_spec(spec, 10, 3, 32, 32, err);
    if (!m)
        return NULL;
    dtnn_build_params bp;
    dtnn_build_params_default(&bp);
    bp.max_batch = max_batch;
    bp.training = training;
    bp.seed = 5;
    bp.device = tu_device();
    if (dtnn_model_build(m, &bp, err)) {
        dtnn_model_free(m);
        return NULL;
    }
    return m;
}

static void train_some(const char *spec, const char *save, float **out_params, size_t *np,
                       double *first_loss, double *last_loss)
{
    dtnn_error err;
    dtnn_data_params dp;
    dtnn_data_params_default(&dp);
    dp.name = "synthetic";
    dp.synthetic_n = 96; /* 3 epochs x 3 steps: enough to see the loss fall, quick under ASan */
    dtnn_dataset d;
    memset(&d, 0, sizeof d);
    CHECK_OK(dtnn_dataset_load(&d, &dp, &err), &err);
    dtnn_model *m = built(spec, 1, 32, &err);
    CHECK(m != NULL);
    if (!m)
        return;
    dtnn_opt_params op;
    dtnn_opt_params_default(&op, DTNN_OPT_ADAM);
    dtnn_optimizer *opt = dtnn_optimizer_create(m, &op, &err);
    dtnn_train_params tp;
    dtnn_train_params_default(&tp);
    tp.epochs = 3;
    tp.batch_size = 32;
    tp.sched.base_lr = 1e-3f;
    tp.save_path = save;
    dtnn_train_state ts;
    memset(&ts, 0, sizeof ts);
    dtnn_comm *comm = dtnn_comm_create_single();
    dtnn_metrics before, after;
    CHECK_OK(dtnn_evaluate(m, &d.train, 32, &tp.loss, NULL, &before, &err), &err);
    CHECK_OK(dtnn_train(m, opt, &d, comm, &tp, &ts, NULL, NULL, &err), &err);
    CHECK_OK(dtnn_evaluate(m, &d.train, 32, &tp.loss, NULL, &after, &err), &err);
    *first_loss = before.loss_sum / (double)before.count;
    *last_loss = after.loss_sum / (double)after.count;
    CHECK(ts.epoch == 3 && ts.step == 9);
    *np = dtnn_model_param_count(m);
    *out_params = malloc(sizeof(float) * dtnn_model_param_count(m) + 64);
    /* copy by tensor, so padding does not matter */
    size_t k = 0;
    for (int i = 0; i < dtnn_model_tensor_count(m); i++) {
        const dtnn_tensor_info *t = dtnn_model_tensor(m, i);
        if (t->kind != DTNN_TENSOR_PARAM)
            continue;
        CHECK_OK(dtnn_model_tensor_read(m, t, *out_params + k, &err), &err);
        k += t->count;
    }

    /* save -> load -> predict: identical outputs in eval mode. */
    CHECK_OK(dtnn_model_forward(m, d.test.x, 16, 0, &err), &err);
    float want[160], got[160];
    dtnn_model_read_output(m, want);
    dtnn_model *fresh = built(spec, 0, 16, &err);
    CHECK(fresh != NULL);
    CHECK_OK(dtnn_checkpoint_load(save, fresh, NULL, NULL, NULL, &err), &err);
    CHECK_OK(dtnn_model_forward(fresh, d.test.x, 16, 0, &err), &err);
    dtnn_model_read_output(fresh, got);
    CHECK(memcmp(want, got, sizeof want) == 0);
    printf("%s on %s: loss %.4f -> %.4f; reload gives identical outputs: %s\n", spec,
           tu_device(), *first_loss, *last_loss, memcmp(want, got, sizeof want) ? "no" : "yes");
    dtnn_model_free(fresh);
    dtnn_optimizer_free(opt);
    dtnn_model_free(m);
    dtnn_comm_free(comm);
    dtnn_dataset_free(&d);
}

int main(void)
{
    char dir[] = "/tmp/dtnn_e2e_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char path[256];
    snprintf(path, sizeof path, "%s/ck.safetensors", dir);
    const char *specs[] = {"lenet5", "resnet20", "models/small_bn_dropout.model",
                           "models/mobile_blocks.model"};
    for (size_t s = 0; s < sizeof specs / sizeof specs[0]; s++) {
        float *p1 = NULL, *p2 = NULL;
        size_t n1 = 0, n2 = 0;
        double l0, l1, m0, m1;
        train_some(specs[s], path, &p1, &n1, &l0, &l1);
        CHECK(l1 < l0);
        train_some(specs[s], path, &p2, &n2, &m0, &m1);
        CHECK(n1 == n2 && p1 && p2 && memcmp(p1, p2, sizeof(float) * n1) == 0);
        free(p1);
        free(p2);
    }
    remove(path);
    rmdir(dir);

    /* A model file and the C API describe the same network: same names, shapes and init. */
    dtnn_error err;
    const char *text = "[input]\nshape = 1x28x28\n"
                       "[conv2d]\nname = conv1\nfilters = 6\nkernel = 5\npadding = 2\n[relu]\n"
                       "[maxpool]\nkernel = 2\n[conv2d]\nname = conv2\nfilters = 16\nkernel = 5\n"
                       "[relu]\n[maxpool]\nkernel = 2\n[flatten]\n[linear]\nname = fc1\n"
                       "outputs = 120\n[relu]\n[linear]\nname = fc2\noutputs = 84\n[relu]\n"
                       "[linear]\nname = fc3\noutputs = 10\n";
    dtnn_model *a = dtnn_model_parse_string(text, "lenet.model", &err);
    dtnn_model *b = dtnn_zoo_create("lenet5", 10, 0, 0, 0, &err);
    CHECK(a && b);
    dtnn_build_params bp;
    dtnn_build_params_default(&bp);
    bp.device = tu_device();
    CHECK_OK(dtnn_model_build(a, &bp, &err), &err);
    CHECK_OK(dtnn_model_build(b, &bp, &err), &err);
    CHECK(dtnn_model_param_count(a) == 61706 && dtnn_model_param_count(b) == 61706);
    CHECK(dtnn_model_tensor_count(a) == dtnn_model_tensor_count(b));
    for (int i = 0; i < dtnn_model_tensor_count(a); i++)
        CHECK(!strcmp(dtnn_model_tensor(a, i)->name, dtnn_model_tensor(b, i)->name));
    const size_t bytes = sizeof(float) * dtnn_model_params_padded(a);
    float *pa = malloc(bytes), *pb = malloc(bytes);
    CHECK_OK(dtnn_model_read(a, DTNN_REGION_PARAMS, 0, pa, bytes, &err), &err);
    CHECK_OK(dtnn_model_read(b, DTNN_REGION_PARAMS, 0, pb, bytes, &err), &err);
    CHECK(memcmp(pa, pb, sizeof(float) * dtnn_model_param_count(a)) == 0);
    free(pa);
    free(pb);
    dtnn_model_free(a);
    dtnn_model_free(b);
    return test_finish("test_e2e");
}
