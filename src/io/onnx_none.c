/*
 * onnx_none.c — the ONNX entry points of a build without ONNX support (CMake DTNN_ONNX=OFF, or
 * AUTO where protoc-c, libprotobuf-c or onnx.proto is missing): they say so and what to
 * install. It replaces onnx_export.c in such builds, so dtnn.h is the same in all of them.
 */
#include "dtnn.h"

int dtnn_onnx_available(void) { return 0; }

dtnn_status dtnn_onnx_export(const dtnn_model *m, const char *path, int opset, dtnn_error *err)
{
    (void)m;
    (void)opset;
    return dtnn_error_set(err, DTNN_ERR_UNSUPPORTED, "cannot write '%s': this dtnn was built "
                          "without ONNX support (install protobuf-c-compiler, "
                          "libprotobuf-c-dev and libonnx-dev, then configure with "
                          "-DDTNN_ONNX=ON)", path ? path : "");
}

static dtnn_status no_import(const char *path, dtnn_error *err)
{
    return dtnn_error_set(err, DTNN_ERR_UNSUPPORTED, "cannot read '%s': this dtnn was built "
                          "without ONNX support (install protobuf-c-compiler, "
                          "libprotobuf-c-dev and libonnx-dev, then configure with "
                          "-DDTNN_ONNX=ON)", path ? path : "");
}

char *dtnn_onnx_import_text(const char *path, dtnn_error *err)
{
    no_import(path, err);
    return NULL;
}

dtnn_model *dtnn_onnx_import(const char *path, dtnn_error *err)
{
    no_import(path, err);
    return NULL;
}

dtnn_status dtnn_onnx_load_weights(const char *path, dtnn_model *m, dtnn_error *err)
{
    (void)m;
    return no_import(path, err);
}
