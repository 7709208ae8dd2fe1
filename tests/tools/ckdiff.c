/*
 * ckdiff.c — test helper: compares the model tensors of two checkpoints (safetensors) and
 * prints the largest absolute difference, and the tensor where it is. Exit 0 when every value
 * is within atol, 1 otherwise, 2 on a bad file. Tensors under "optimizer." are compared too,
 * unless --weights-only is given.
 *   ckdiff A.safetensors B.safetensors ATOL [--weights-only]
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/safetensors.h"

int main(int argc, char **argv)
{
    if (argc != 4 && !(argc == 5 && !strcmp(argv[4], "--weights-only"))) {
        fprintf(stderr, "usage: ckdiff A B ATOL [--weights-only]\n");
        return 2;
    }
    int weights_only = argc == 5;
    double atol = atof(argv[3]);
    st_file a, b;
    dtnn_error err;
    if (st_read(argv[1], &a, &err) || st_read(argv[2], &b, &err)) {
        fprintf(stderr, "ckdiff: %s\n", err.message);
        return 2;
    }
    double worst = 0.0;
    const char *where = "";
    int mismatched = 0;
    for (int i = 0; i < a.n_tensors; i++) {
        const st_tensor *ta = &a.tensors[i], *tb = st_find(&b, ta->name);
        if (weights_only && !strncmp(ta->name, "optimizer.", 10))
            continue;
        if (!tb || tb->bytes != ta->bytes || strcmp(ta->dtype, tb->dtype)) {
            fprintf(stderr, "ckdiff: tensor %s differs in presence, size or type\n", ta->name);
            mismatched = 1;
            continue;
        }
        if (strcmp(ta->dtype, "F32")) {
            if (memcmp(a.data + ta->offset, b.data + tb->offset, ta->bytes)) {
                fprintf(stderr, "ckdiff: %s differs\n", ta->name);
                mismatched = 1;
            }
            continue;
        }
        const float *x = (const float *)(const void *)(a.data + ta->offset);
        const float *y = (const float *)(const void *)(b.data + tb->offset);
        for (size_t j = 0; j < ta->bytes / 4; j++) {
            double d = fabs((double)x[j] - (double)y[j]);
            if (d > worst || d != d) {
                worst = d;
                where = ta->name;
            }
        }
    }
    printf("ckdiff: max abs difference %.3g (in %s), tolerance %.3g\n", worst, where, atol);
    int ok = !mismatched && worst <= atol;
    st_free(&a);
    st_free(&b);
    return ok ? 0 : 1;
}
