/*
 * checkpoint.h — what training asks of checkpoint files beyond dtnn.h (checkpoint.c): the
 * weights' average (--ema) saved beside the trained weights and read back on resume.
 */
#ifndef DTNN_CHECKPOINT_H
#define DTNN_CHECKPOINT_H

#include <stdint.h>

#include "dtnn.h"

/* Host copies laid out as the model's regions: params [dtnn_model_params_padded] floats,
 * buffers [dtnn_model_buffer_bytes] bytes; count: the updates averaged. */
typedef struct {
    const float *params;
    const void *buffers;
    int64_t count;
} ckpt_average;

/* dtnn_checkpoint_save, with avg (NULL: none) as the tensors "ema.<name>" and the metadata
 * "ema_count". Loads of the trained weights skip those tensors. */
dtnn_status ckpt_save_with_average(const char *path, dtnn_model *m, dtnn_optimizer *opt,
                                   const dtnn_train_state *ts, const dtnn_dataset *norm,
                                   const ckpt_average *avg, dtnn_error *err);
/* The average a checkpoint holds, into host copies laid out as m's regions; DTNN_ERR_FORMAT
 * when it holds none, DTNN_ERR_SHAPE when it is of another model. */
dtnn_status ckpt_read_average(const char *path, dtnn_model *m, void *params, void *buffers,
                              int64_t *count, dtnn_error *err);

#endif
