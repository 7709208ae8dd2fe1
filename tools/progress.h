/*
 * progress.h — what `dtnn train` shows while it runs: on a terminal a redrawn progress bar with
 * ETA, loss, accuracy and images/s; otherwise (logs, CI) a plain line every tenth of an epoch.
 * Always one summary line per epoch.
 */
#ifndef DTNN_PROGRESS_H
#define DTNN_PROGRESS_H

#include <stdio.h>

#include "dtnn.h"

typedef struct {
    FILE *out;
    int tty;
    int quiet;
    double last_draw;
    int64_t last_tenth;
} progress_state;

void progress_init(progress_state *s, FILE *out, int quiet);
void progress_update(const dtnn_progress *p, void *user);
/* Monotonic seconds (also the bench command's clock). */
double progress_now(void);

#endif
