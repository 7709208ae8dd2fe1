/*
 * reference.h — what test_reference.c and reference_optim.c (one executable) share: reading
 * the tensors of a reference file written by tools/gen_reference.py, and the tokens of its
 * metadata.
 */
#ifndef DTNN_TEST_REFERENCE_H
#define DTNN_TEST_REFERENCE_H

#include "io/safetensors.h"
#include "testutil.h"

/* A malloc'd copy of the reference tensor `name` of dtype "F32" or "I64" with want values
 * (want == 0 accepts any size; *count, where count is not NULL, gets it); NULL, with a failure
 * counted, when it is missing or mismatched. */
void *ref_load(const st_file *f, const char *name, const char *dtype, size_t want,
               size_t *count);
/* Copies the reference tensor `name` into model tensor t; 0 (with a message) if missing. */
int load_tensor(dtnn_model *m, const dtnn_tensor_info *t, const st_file *f, const char *name);
/* Number of reference tensors whose name starts with prefix. */
int count_prefixed(const st_file *f, const char *prefix);
/* Copies the next whitespace-separated token of *s into tok; returns 0 at the end. */
int next_token(const char **s, char *tok, size_t cap);
/* Copies src into dst[cap], truncating. */
void copy_str(char *dst, size_t cap, const char *src);

/* reference_optim.c: every optimizer reference file (5 steps of lenet5 and resnet20). */
void test_optimizer_references(void);

#endif
