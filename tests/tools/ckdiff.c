/*
 * ckdiff.c — test helper: compares the model tensors of two checkpoints (safetensors) and
 * prints the largest absolute difference, and the tensor where it is. Exit 0 when every value
 * is within atol, 1 otherwise, 2 on a bad file. Tensors under "optimizer." are compared too,
 * unless --weights-only is given. With --init C RTOL a tensor may also differ by RTOL times
 * its largest change from checkpoint C (the run's start): for two trainings that should differ
 * by rounding only, what matters is the difference against how far training moved a tensor,
 * and the tensors that moved little would pass any absolute tolerance large enough for those
 * that moved most. The worst such ratio is printed too.
 *   ckdiff A B ATOL [--weights-only] [--init C RTOL]
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/safetensors.h"

static int usage(void)
{
    fprintf(stderr, "usage: ckdiff A B ATOL [--weights-only] [--init C RTOL]\n");
    return 2;
}

int main(int argc, char **argv)
{
    if (argc < 4)
        return usage();
    int weights_only = 0;
    const char *init_path = NULL;
    double rtol = 0.0;
    for (int i = 4; i < argc; i++) {
        if (!strcmp(argv[i], "--weights-only"))
            weights_only = 1;
        else if (!strcmp(argv[i], "--init") && i + 2 < argc)
            init_path = argv[i + 1], rtol = atof(argv[i + 2]), i += 2;
        else
            return usage();
    }
    double atol = atof(argv[3]);
    st_file a, b, c = {0};
    dtnn_error err;
    if (st_read(argv[1], &a, &err) || st_read(argv[2], &b, &err) ||
        (init_path && st_read(init_path, &c, &err))) {
        fprintf(stderr, "ckdiff: %s\n", err.message);
        return 2;
    }
    double worst = 0.0, worst_ratio = 0.0;
    const char *where = "", *where_ratio = "";
    int mismatched = 0, beyond = 0;
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
        const st_tensor *tc = init_path ? st_find(&c, ta->name) : NULL;
        if (init_path && (!tc || tc->bytes != ta->bytes || strcmp(tc->dtype, ta->dtype))) {
            fprintf(stderr, "ckdiff: tensor %s differs in presence, size or type in %s\n",
                    ta->name, init_path);
            mismatched = 1;
            continue;
        }
        const float *x = (const float *)(const void *)(a.data + ta->offset);
        const float *y = (const float *)(const void *)(b.data + tb->offset);
        const float *z = tc ? (const float *)(const void *)(c.data + tc->offset) : NULL;
        double tensor_worst = 0.0, moved = 0.0;
        for (size_t j = 0; j < ta->bytes / 4; j++) {
            double d = fabs((double)x[j] - (double)y[j]);
            if (d > tensor_worst || d != d)
                tensor_worst = d;
            if (z && fabs((double)x[j] - (double)z[j]) > moved)
                moved = fabs((double)x[j] - (double)z[j]);
        }
        if (tensor_worst > worst || tensor_worst != tensor_worst) {
            worst = tensor_worst;
            where = ta->name;
        }
        if (z && moved > 0 && tensor_worst / moved > worst_ratio) {
            worst_ratio = tensor_worst / moved;
            where_ratio = ta->name;
        }
        if (!(tensor_worst <= atol + rtol * moved))
            beyond = 1;
    }
    printf("ckdiff: max abs difference %.3g (in %s), tolerance %.3g\n", worst, where, atol);
    if (init_path)
        printf("ckdiff: max difference / change since %s %.3g (in %s), tolerance %.3g\n",
               init_path, worst_ratio, where_ratio, rtol);
    int ok = !mismatched && !beyond;
    st_free(&a);
    st_free(&b);
    if (init_path)
        st_free(&c);
    return ok ? 0 : 1;
}
