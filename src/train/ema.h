/*
 * ema.h — an exponential moving average of a model's weights (ema.c), for trainer.c.
 */
#ifndef DTNN_TRAIN_EMA_H
#define DTNN_TRAIN_EMA_H

#include "dtnn.h"

typedef struct train_ema train_ema;

/* An average of m's parameters and buffers in m's backend, taking m's values at its first
 * update. NULL with the error when out of memory. */
train_ema *train_ema_create(dtnn_model *m, float decay, dtnn_error *err);
void train_ema_free(train_ema *e);
/* One update: avg = decay avg + (1 - decay) w, or a copy of w when restart is set or nothing
 * was averaged yet. */
void train_ema_update(train_ema *e, int restart);
/* Exchanges the model's parameters and buffers with the average (twice: back as before), to
 * evaluate or save the average with the model's own code. */
void train_ema_swap(train_ema *e);
/* Updates taken so far (torchvision's n_averaged). */
int64_t train_ema_count(const train_ema *e);
/* Host copies of the average (malloc'd, laid out as the model's regions; the caller frees
 * both), and the average set from such copies with its count (a resume). */
dtnn_status train_ema_to_host(train_ema *e, float **params, void **buffers, dtnn_error *err);
void train_ema_from_host(train_ema *e, const float *params, const void *buffers, int64_t count);

#endif
