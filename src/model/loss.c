/*
 * loss.c — losses on the model output (logits) against integer labels, fused with their
 * gradient, and the top-1 / top-5 metrics:
 *   cross-entropy  softmax + NLL in one pass (log-sum-exp), optional label smoothing as
 *                  torch.nn.CrossEntropyLoss(label_smoothing=e):
 *                  loss = -(1 - e) log p_y - e/K sum_j log p_j;  dz_j = p_j - (1 - e)[j = y] - e/K
 *   bce            sigmoid + binary cross-entropy against one-hot targets, computed stably as
 *                  BCEWithLogitsLoss: max(z, 0) - z t + log(1 + exp(-|z|)), mean over all
 *                  elements; dz = (sigmoid(z) - t) / K
 *   mse            mean over all elements of (z - onehot)^2; dz = 2 (z - t) / K
 * Per-sample losses are summed into metrics in double; gradients are scaled by grad_scale so the
 * caller decides the mean (1/n locally, 1/global batch under data parallelism).
 */
#include <math.h>
#include <string.h>

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

/* Rank of the true class: how many logits beat it (ties go to the lower index, as argmax). */
static int label_rank(const float *z, int k, int y)
{
    int rank = 0;
    for (int j = 0; j < k; j++)
        if (z[j] > z[y] || (z[j] == z[y] && j < y))
            rank++;
    return rank;
}

static double sample_loss(const dtnn_loss_params *lp, const float *z, int k, int y, float *dz,
                          float scale)
{
    double loss = 0.0;
    if (lp->kind == DTNN_LOSS_CROSS_ENTROPY) {
        float mx = z[0];
        for (int j = 1; j < k; j++)
            mx = z[j] > mx ? z[j] : mx;
        double sum = 0.0;
        for (int j = 0; j < k; j++)
            sum += exp((double)z[j] - mx);
        double lse = mx + log(sum);
        double e = lp->label_smoothing, mean_logp = 0.0;
        for (int j = 0; j < k; j++)
            mean_logp += (z[j] - lse) / k;
        loss = -(1.0 - e) * (z[y] - lse) - e * mean_logp;
        if (dz)
            for (int j = 0; j < k; j++) {
                double p = exp(z[j] - lse);
                dz[j] = (float)((p - (1.0 - e) * (j == y) - e / k) * scale);
            }
        return loss;
    }
    for (int j = 0; j < k; j++) {
        double t = j == y ? 1.0 : 0.0, zj = z[j];
        if (lp->kind == DTNN_LOSS_BCE) {
            loss += (zj > 0 ? zj : 0.0) - zj * t + log1p(exp(-fabs(zj)));
            if (dz)
                dz[j] = (float)((1.0 / (1.0 + exp(-zj)) - t) / k * scale);
        } else {
            loss += (zj - t) * (zj - t);
            if (dz)
                dz[j] = (float)(2.0 * (zj - t) / k * scale);
        }
    }
    return loss / k;
}

dtnn_status dtnn_model_loss(dtnn_model *m, const int32_t *labels, int n,
                            const dtnn_loss_params *lp, float grad_scale, dtnn_metrics *metrics,
                            dtnn_error *err)
{
    if (!m->forward_done)
        return dtnn_error_set(err, DTNN_ERR_ARG, "loss needs a forward pass first");
    if (n != m->n)
        return dtnn_error_set(err, DTNN_ERR_ARG, "loss over %d labels, but the last forward "
                              "had %d samples", n, m->n);
    if (lp->label_smoothing < 0.0f || lp->label_smoothing > 1.0f)
        return dtnn_error_set(err, DTNN_ERR_ARG, "label smoothing %g is not in [0, 1]",
                              lp->label_smoothing);
    int rows, k;
    const float *z = dtnn_model_output(m, &rows, &k);
    for (int i = 0; i < n; i++)
        if (labels[i] < 0 || labels[i] >= k)
            return dtnn_error_set(err, DTNN_ERR_ARG, "label %d of sample %d is outside the "
                                  "model's %d classes", labels[i], i, k);
    float *dz = (m->bp.training && m->training) ? m->layers[m->n_layers - 1]->dy : NULL;
    double loss_sum = 0.0;
    int64_t top1 = 0, top5 = 0;
    for (int i = 0; i < n; i++) {
        const float *zi = z + (size_t)i * k;
        loss_sum += sample_loss(lp, zi, k, labels[i], dz ? dz + (size_t)i * k : NULL,
                                grad_scale);
        int rank = label_rank(zi, k, labels[i]);
        top1 += rank == 0;
        top5 += rank < 5;
    }
    if (metrics) {
        metrics->loss_sum += loss_sum;
        metrics->top1 += top1;
        metrics->top5 += top5;
        metrics->count += n;
    }
    m->loss_done = dz != NULL;
    return DTNN_OK;
}
