/*
 * monitor.h — the epoch-end decisions of a training run from its metrics (monitor.c), for
 * trainer.c.
 */
#ifndef DTNN_TRAIN_MONITOR_H
#define DTNN_TRAIN_MONITOR_H

#include <stddef.h>

#include "dtnn.h"

/* Takes an epoch's monitored loss (and its test top-1 accuracy where has_acc) into ts's
 * monitor state; returns 1 when the run ends here, with the reason in why. */
int train_monitor_epoch(const dtnn_train_params *p, dtnn_train_state *ts, double loss,
                        int has_acc, double acc, char *why, size_t len);
/* The factor the plateau's cuts put on the schedule's learning rate (1 for other kinds). */
double train_monitor_lr_factor(const dtnn_train_params *p, const dtnn_train_state *ts);

#endif
