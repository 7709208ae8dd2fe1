/*
 * fuzz_onnx.c — libFuzzer harness for the ONNX importer: the bytes as a .onnx file, unpacked by
 * protobuf-c, converted into a model file (every operator's checks and the constant folding)
 * and that parsed. Building and loading the weights, which allocate what the file asks for,
 * are left out: a file may legitimately ask for more memory than a fuzzer has. Seed: dtnn
 * export of tests/models/onnx_all_layers.model (6 KB, every layer type the exporter writes;
 * lenet5's 250 KB of weights would only slow the fuzzer down).
 */
#include <stdlib.h>

#include "dtnn.h"
#include "fuzz_input.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[256];
    if (fuzz_to_file(data, size, ".onnx", path, sizeof path))
        return 0;
    dtnn_error err;
    char *text = dtnn_onnx_import_text(path, &err);
    if (text)
        dtnn_model_free(dtnn_model_parse_string(text, path, &err));
    free(text);
    remove(path);
    return 0;
}
