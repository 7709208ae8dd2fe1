/*
 * fuzz_shards.c — libFuzzer harness for what a sharded dataset reads: the same bytes as a tar
 * shard (its table of samples) and as a folder's index.json (dtnn__shards_open, whose listed
 * shards do not exist). Anything may fail; nothing may crash or leak.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "data/shards.h"
#include "data/tar.h"
#include "fuzz_input.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[256];
    if (fuzz_to_file(data, size, ".tar", path, sizeof path))
        return 0;
    dtnn_error err;
    tar_sample *samples;
    int64_t n, bytes = 0;
    if (dtnn__tar_scan(path, &samples, &n, &bytes, &err) == DTNN_OK)
        free(samples);
    remove(path);
    char dir[256], index[300];
    snprintf(dir, sizeof dir, "%.*s.d", (int)(strlen(path) - 4), path);
    snprintf(index, sizeof index, "%s/index.json", dir);
    mkdir(dir, 0700);
    FILE *f = fopen(index, "wb");
    if (f) {
        const int bad = size && fwrite(data, 1, size, f) != size;
        if (!fclose(f) && !bad) {
            dtnn_shards s;
            if (dtnn__shards_open(&s, dir, "train", &err) == DTNN_OK)
                dtnn__shards_free(&s);
        }
        remove(index);
    }
    rmdir(dir);
    return 0;
}
