/*
 * fuzz_idx.c — libFuzzer harness for the IDX reader (MNIST format, raw or gzip): the same
 * bytes as an image file and as a label file. Anything may fail; nothing may crash or leak.
 */
#include <stdlib.h>

#include "dtnn.h"
#include "fuzz_input.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[256];
    if (fuzz_to_file(data, size, ".idx", path, sizeof path))
        return 0;
    dtnn_error err;
    float *x = NULL;
    int64_t n;
    int h, w;
    if (dtnn_idx_load_images(path, &x, &n, &h, &w, &err) == DTNN_OK)
        free(x);
    int32_t *y = NULL;
    if (dtnn_idx_load_labels(path, &y, &n, &err) == DTNN_OK)
        free(y);
    remove(path);
    return 0;
}
