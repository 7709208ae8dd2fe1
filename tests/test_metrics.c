/*
 * test_metrics.c — the top-1 / top-5 counts of dtnn_model_loss on logits chosen by hand: ties
 * go to the lower index (as argmax), and non-finite logits never count as a hit by accident.
 * The model is a lone flatten layer, so its logits are its input, NaN included (a layer with
 * weights would spread one NaN to every logit). Runs on $DTNN_DEVICE (the guarded pass too).
 */
#include <math.h>
#include <string.h>

#include "testutil.h"

enum { CLASSES = 7 };

typedef struct {
    const char *what;
    float z[CLASSES];
    int label;
    int top1, top5;
} metrics_case;

int main(void)
{
    const float nan = NAN, inf = INFINITY;
    const metrics_case cases[] = {
        {"clear winner", {0, 1, 2, 9, 3, 4, 5}, 3, 1, 1},
        {"fifth", {6, 7, 8, 9, 5, 1, 0}, 4, 0, 1},
        {"sixth", {6, 7, 8, 9, 5, 4.5f, 0}, 5, 0, 0},
        {"tie, lower index wins", {2, 2, 0, 0, 0, 0, 0}, 0, 1, 1},
        {"tie, higher index loses", {2, 2, 0, 0, 0, 0, 0}, 1, 0, 1},
        {"all NaN", {nan, nan, nan, nan, nan, nan, nan}, 2, 0, 0},
        {"NaN true logit", {0, 0, nan, 0, 0, 0, 0}, 2, 0, 0},
        {"a NaN beats the true logit", {nan, 0, 9, 0, 0, 0, 0}, 2, 0, 1},
        {"six NaNs beat it", {nan, nan, nan, 9, nan, nan, nan}, 3, 0, 0},
        {"+Inf true logit wins", {0, 0, inf, 0, 0, 0, 0}, 2, 1, 1},
        {"-Inf true logit", {0, 0, -inf, 0, 0, 0, 0}, 2, 0, 0},
    };
    const int n = (int)(sizeof cases / sizeof cases[0]);
    dtnn_error err;
    dtnn_model *m = dtnn_model_create(CLASSES, 1, 1);
    CHECK(dtnn_model_add(m, "flatten", NULL, "", NULL, 0, &err) >= 0);
    dtnn_build_params bp;
    dtnn_build_params_default(&bp);
    bp.max_batch = 1;
    bp.training = 0;
    bp.device = tu_device();
    CHECK_OK(dtnn_model_build(m, &bp, &err), &err);
    dtnn_loss_params lp;
    dtnn_loss_params_default(&lp);
    for (int i = 0; i < n; i++) {
        dtnn_metrics met;
        memset(&met, 0, sizeof met);
        int32_t label = cases[i].label;
        CHECK_OK(dtnn_model_forward(m, cases[i].z, 1, 0, &err), &err);
        CHECK_OK(dtnn_model_loss(m, &label, 1, &lp, 1.0f, &met, &err), &err);
        int ok = met.count == 1 && met.top1 == cases[i].top1 && met.top5 == cases[i].top5;
        printf("%-32s top1 %lld top5 %lld (want %d %d)%s\n", cases[i].what, (long long)met.top1,
               (long long)met.top5, cases[i].top1, cases[i].top5, ok ? "" : "  FAIL");
        if (!ok) {
            fprintf(stderr, "FAIL %s: top1 %lld top5 %lld, want %d %d\n", cases[i].what,
                    (long long)met.top1, (long long)met.top5, cases[i].top1, cases[i].top5);
            test_failures++;
        }
    }
    dtnn_model_free(m);
    return test_finish("test_metrics");
}
