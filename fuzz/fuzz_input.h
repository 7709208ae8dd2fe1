/*
 * fuzz_input.h — what every libFuzzer harness of dtnn shares: the parsers read files, so each
 * input is written to a per-process file in /dev/shm (or /tmp) first.
 */
#ifndef DTNN_FUZZ_INPUT_H
#define DTNN_FUZZ_INPUT_H

#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

/* Writes data to a file named after this process and suffix; 0 on success. */
static inline int fuzz_to_file(const uint8_t *data, size_t size, const char *suffix, char *path,
                               size_t len)
{
    const char *dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    snprintf(path, len, "%s/dtnn-fuzz-%ld%s", dir, (long)getpid(), suffix);
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    int bad = size && fwrite(data, 1, size, f) != size;
    return fclose(f) != 0 || bad ? -1 : 0;
}

#endif
