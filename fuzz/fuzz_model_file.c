/*
 * fuzz_model_file.c — libFuzzer harness for the model-file parser: the bytes as a .model file,
 * parsed (and its shapes inferred) for a small input. Building, which allocates what the file
 * asks for, is left out: a file may legitimately ask for more memory than a fuzzer has.
 */
#include "dtnn.h"
#include "fuzz_input.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[256];
    if (fuzz_to_file(data, size, ".model", path, sizeof path))
        return 0;
    dtnn_error err;
    dtnn_model *m = dtnn_model_from_spec(path, 10, 3, 8, 8, &err);
    dtnn_model_free(m);
    remove(path);
    return 0;
}
