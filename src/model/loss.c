/*
 * loss.c — losses on the model output (logits) against integer labels, or the two-label soft
 * targets of MixUp and CutMix (t = lam onehot(y) + (1 - lam) onehot(y2): each formula below with
 * that t in place of the one-hot), fused with their gradient, and the top-1 / top-5 metrics:
 *   cross-entropy  softmax + NLL in one pass (log-sum-exp), optional label smoothing as
 *                  torch.nn.CrossEntropyLoss(label_smoothing=e):
 *                  loss = -(1 - e) log p_y - e/K sum_j log p_j;  dz_j = p_j - (1 - e)[j = y] - e/K
 *   bce            sigmoid + binary cross-entropy against one-hot targets, computed stably as
 *                  BCEWithLogitsLoss: max(z, 0) - z t + log(1 + exp(-|z|)), mean over all
 *                  elements; dz = (sigmoid(z) - t) / K
 *   mse            mean over all elements of (z - onehot)^2; dz = 2 (z - t) / K
 * Per-sample losses are summed into metrics in double; gradients are scaled by grad_scale so the
 * caller decides the mean (1/n locally, 1/global batch under data parallelism). The arithmetic
 * is the backend's (backend/cpu/loss.c on the CPU); here the checks and the copies.
 */
#include <string.h>

#include "../core/trace.h"
#include "model_internal.h"

void dtnn_loss_params_default(dtnn_loss_params *p)
{
    memset(p, 0, sizeof *p);
    p->kind = DTNN_LOSS_CROSS_ENTROPY;
}

dtnn_status dtnn_loss_parse(const char *name, dtnn_loss_kind *kind, dtnn_error *err)
{
    if (!strcmp(name, "cross-entropy") || !strcmp(name, "ce"))
        *kind = DTNN_LOSS_CROSS_ENTROPY;
    else if (!strcmp(name, "bce"))
        *kind = DTNN_LOSS_BCE;
    else if (!strcmp(name, "mse"))
        *kind = DTNN_LOSS_MSE;
    else
        return dtnn_error_set(err, DTNN_ERR_ARG, "unknown loss '%s' (cross-entropy, bce, mse)",
                              name);
    return DTNN_OK;
}

dtnn_status dtnn_model_loss(dtnn_model *m, const int32_t *labels, int n,
                            const dtnn_loss_params *lp, float grad_scale, dtnn_metrics *metrics,
                            dtnn_error *err)
{
    return dtnn_model_loss_mixed(m, labels, NULL, 1.0f, n, lp, grad_scale, metrics, err);
}

static dtnn_status check_labels(const int32_t *labels, int n, int k, const char *what,
                                dtnn_error *err)
{
    for (int i = 0; i < n; i++)
        if (labels[i] < 0 || labels[i] >= k)
            return dtnn_error_set(err, DTNN_ERR_ARG, "%slabel %d of sample %d is outside the "
                                  "model's %d classes", what, labels[i], i, k);
    return DTNN_OK;
}

dtnn_status dtnn_model_loss_mixed(dtnn_model *m, const int32_t *labels, const int32_t *labels2,
                                  float lam, int n, const dtnn_loss_params *lp, float grad_scale,
                                  dtnn_metrics *metrics, dtnn_error *err)
{
    if (!m->forward_done)
        return dtnn_error_set(err, DTNN_ERR_ARG, "loss needs a forward pass first");
    if (n != m->n)
        return dtnn_error_set(err, DTNN_ERR_ARG, "loss over %d labels, but the last forward "
                              "had %d samples", n, m->n);
    if (lp->label_smoothing < 0.0f || lp->label_smoothing > 1.0f)
        return dtnn_error_set(err, DTNN_ERR_ARG, "label smoothing %g is not in [0, 1]",
                              lp->label_smoothing);
    if (!(lam >= 0.0f && lam <= 1.0f))
        return dtnn_error_set(err, DTNN_ERR_ARG, "mixing weight %g is not in [0, 1]", lam);
    if (!labels2)
        lam = 1.0f;
    const layer *last = m->layers[m->n_layers - 1];
    const int k = (int)shape_size(last->out);
    dtnn_status st = check_labels(labels, n, k, "", err);
    if (!st && lam != 1.0f)
        st = check_labels(labels2, n, k, "partner ", err);
    if (st)
        return st;
    float *dz = (m->bp.training && m->training) ? last->dy : NULL;
    const loss_desc d = {lp->kind, lp->label_smoothing, lam};
    double sums[3], t0 = trace_clock(m->trace);
    be_upload(m->be, m->labels, labels, sizeof(int32_t) * (size_t)n);
    if (lam != 1.0f)
        be_upload(m->be, m->labels + n, labels2, sizeof(int32_t) * (size_t)n);
    be_run(m->be, loss, &d, n, k, last->y, m->labels, dz, grad_scale, m->loss_out);
    be_download(m->be, sums, m->loss_out, sizeof sums);
    trace_span(m->trace, TRACE_LOSS, "loss", t0, -1);
    st = be_check(m->be, err);
    if (st != DTNN_OK)
        return st;
    if (metrics) {
        metrics->loss_sum += sums[0];
        metrics->top1 += (int64_t)sums[1];
        metrics->top5 += (int64_t)sums[2];
        metrics->count += n;
    }
    m->loss_done = dz != NULL;
    return DTNN_OK;
}
