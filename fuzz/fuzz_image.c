/*
 * fuzz_image.c — libFuzzer harness for image decoding: the bytes as a JPEG or PNG (whichever
 * their signature says; libjpeg-turbo and libpng through dtnn's setjmp error handlers), decoded
 * twice into the same dtnn_image so the reuse of its buffers is exercised too. Anything may
 * fail; nothing may crash, leak or exit.
 */
#include "dtnn.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    dtnn_image img = {0};
    dtnn_error err;
    for (int i = 0; i < 2; i++)
        if (dtnn_image_decode(data, size, "fuzz", &img, &err) == DTNN_OK && img.w * img.h > 0)
            (void)img.pixels[(size_t)img.w * img.h * 3 - 1];
    dtnn_image_free(&img);
    return 0;
}
