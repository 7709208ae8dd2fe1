/*
 * optimizer.h — what checkpoints may ask of an optimizer beyond dtnn.h: whose it is, its state
 * slots (PyTorch's state keys, in its creation order) and their flat buffer, and its step
 * count. The struct stays in optimizer_internal.h, for src/optim/ only.
 */
#ifndef DTNN_OPTIMIZER_H
#define DTNN_OPTIMIZER_H

#include "dtnn.h"

const dtnn_model *optimizer_model(const dtnn_optimizer *o);
dtnn_opt_kind optimizer_kind(const dtnn_optimizer *o);
/* The state: slot_count slots of length values each, one after another ([slots, length],
 * backend memory); slot s's values line up with the model's gradient. */
int optimizer_slot_count(const dtnn_optimizer *o);
const char *optimizer_slot_name(const dtnn_optimizer *o, int slot);
/* Index of the slot called name, or -1. */
int optimizer_slot(const dtnn_optimizer *o, const char *name);
size_t optimizer_length(const dtnn_optimizer *o);
float *optimizer_state(const dtnn_optimizer *o);
/* Steps taken (PyTorch's state['step']). */
int64_t optimizer_step(const dtnn_optimizer *o);
void optimizer_set_step(dtnn_optimizer *o, int64_t step);

#endif
