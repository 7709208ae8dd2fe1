/*
 * monitor.c — what a training run decides at an epoch's end from its metrics, the same on
 * every rank (the metrics are all-reduced first) and kept in the training state, which
 * checkpoints save, so a resumed run decides as the uninterrupted one would:
 *   ReduceLROnPlateau (--lr-schedule plateau:PATIENCE[:FACTOR]) as PyTorch's in mode "min":
 *     an epoch improves when its loss < best (1 - 1e-4) (threshold_mode "rel"); after more
 *     than PATIENCE epochs in a row without improvement the rate is cut by FACTOR and the
 *     count restarts (no cooldown, no floor);
 *   early stopping (--early-stop PATIENCE) as the common callbacks' (Lightning's
 *     EarlyStopping, min_delta 0): the run ends once PATIENCE epochs in a row brought no
 *     lower loss;
 *   a target accuracy (--stop-at-accuracy X, MLPerf's rule): the run ends after the first
 *     epoch whose test top-1 accuracy reaches X.
 */
#include <math.h>
#include <stdio.h>

#include "monitor.h"

static int plateau_improves(double loss, double best) { return loss < best * (1.0 - 1e-4); }

int train_monitor_epoch(const dtnn_train_params *p, dtnn_train_state *ts, double loss,
                        int has_acc, double acc, char *why, size_t len)
{
    /* A non-finite loss (an epoch of skipped steps, --skip-nonfinite) is no gain and never
     * the best: PyTorch's comparisons with NaN are false too. */
    const int finite = isfinite(loss), first = ts->monitored == 0;
    if (finite && (first || plateau_improves(loss, ts->plateau_best))) {
        ts->plateau_best = loss;
        ts->plateau_bad = 0;
    } else if (++ts->plateau_bad > p->sched.patience && p->sched.kind == DTNN_SCHED_PLATEAU) {
        ts->plateau_cuts++;
        ts->plateau_bad = 0;
    }
    if (finite && (first || loss < ts->early_best)) {
        ts->early_best = loss;
        ts->early_bad = 0;
    } else {
        ts->early_bad++;
    }
    ts->monitored += finite;
    if (p->stop_at_accuracy > 0.0f && has_acc && acc >= (double)p->stop_at_accuracy) {
        snprintf(why, len, "test accuracy %.2f%% reached the target %.2f%%", 100.0 * acc,
                 100.0 * (double)p->stop_at_accuracy);
        return 1;
    }
    if (p->early_stop > 0 && ts->early_bad >= p->early_stop) {
        snprintf(why, len, "%lld epochs without a lower loss than %.6g (--early-stop %d)",
                 (long long)ts->early_bad, ts->early_best, p->early_stop);
        return 1;
    }
    return 0;
}

double train_monitor_lr_factor(const dtnn_train_params *p, const dtnn_train_state *ts)
{
    return p->sched.kind == DTNN_SCHED_PLATEAU ? pow((double)p->sched.gamma,
                                                     (double)ts->plateau_cuts)
                                               : 1.0;
}
