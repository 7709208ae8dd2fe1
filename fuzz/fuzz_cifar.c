/*
 * fuzz_cifar.c — libFuzzer harness for the CIFAR reader: the same bytes as a CIFAR-10 and as a
 * CIFAR-100 file. Anything may fail; nothing may crash or leak.
 */
#include <stdlib.h>

#include "dtnn.h"
#include "fuzz_input.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[256];
    if (fuzz_to_file(data, size, ".bin", path, sizeof path))
        return 0;
    dtnn_error err;
    for (int classes = 10; classes <= 100; classes += 90) {
        float *x = NULL;
        int32_t *y = NULL;
        int64_t n;
        if (dtnn_cifar_load(path, classes, &x, &y, &n, &err) == DTNN_OK) {
            free(x);
            free(y);
        }
    }
    remove(path);
    return 0;
}
