/*
 * fuzz_npy.c — libFuzzer harness for the .npy reader: the same bytes as a float array and as a
 * label vector.
 */
#include <stdlib.h>

#include "dtnn.h"
#include "fuzz_input.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[256];
    if (fuzz_to_file(data, size, ".npy", path, sizeof path))
        return 0;
    dtnn_error err;
    float *x = NULL;
    int64_t dims[DTNN_NPY_MAX_DIMS], n;
    int ndim;
    if (dtnn_npy_load_f32(path, &x, dims, &ndim, &err) == DTNN_OK)
        free(x);
    int32_t *y = NULL;
    if (dtnn_npy_load_labels(path, &y, &n, &err) == DTNN_OK)
        free(y);
    remove(path);
    return 0;
}
