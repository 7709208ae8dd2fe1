/*
 * replicas.h — the ranks of data-parallel training kept one model (replicas.c), for
 * trainer.c.
 */
#ifndef DTNN_TRAIN_REPLICAS_H
#define DTNN_TRAIN_REPLICAS_H

#include "dtnn.h"

/* Ranks must agree on the model, the settings, the data and the kernel set, or training
 * silently diverges (or hangs in a collective of another size): each rank hashes them and
 * rank 0's are compared. */
dtnn_status train_check_agreement(dtnn_model *m, dtnn_optimizer *opt, dtnn_loader *train,
                                  dtnn_loader *test, dtnn_comm *comm,
                                  const dtnn_train_params *p, const dtnn_train_state *ts,
                                  dtnn_error *err);
/* Rank 0's values of a model region for every rank. */
dtnn_status train_broadcast_region(dtnn_model *m, dtnn_comm *comm, dtnn_region r,
                                   dtnn_error *err);
/* An error unless every rank holds bitwise rank 0's parameters and buffers. */
dtnn_status train_check_replicas(dtnn_model *m, dtnn_comm *comm, int64_t epoch,
                                 dtnn_error *err);
/* Averages the float buffers (batch-norm running statistics) over the ranks. */
dtnn_status train_average_buffers(dtnn_model *m, dtnn_comm *comm, dtnn_error *err);

#endif
