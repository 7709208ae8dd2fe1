/*
 * cuda_absent.c — the "cuda" registration of a build without CUDA (CMakeLists.txt compiles it
 * instead of this folder's backend): listed, so that `dtnn devices` and --device cuda say it
 * is not built in and how to build it, rather than that no such device exists.
 */
#include <stdio.h>

#include "../backend.h"

static int cuda_absent_probe(char *why, size_t len)
{
    snprintf(why, len, "not built into this dtnn (no CUDA toolkit, cuDNN or cuBLAS found at "
             "configure time, or -DDTNN_CUDA=OFF; configure with them installed, or "
             "-DDTNN_CUDA=ON to be told what is missing)");
    return 0;
}

const backend_registration cuda_registration = {"cuda", NULL, cuda_absent_probe};
