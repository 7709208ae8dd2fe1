/*
 * shard.c — `dtnn shard`: an image folder packed into WebDataset tar shards and an index
 * (dtnn_shards_write), read back by `dtnn train --dataset shards --data-dir OUTPUT` and by the
 * webdataset Python package.
 */
#include <stdio.h>
#include <string.h>

#include "cli_options.h"
#include "dtnn.h"

static cli_opt shard_opts[] = {
    {"dataset", OPT_STRING, "imagefolder", "imagefolder (its files as they are), or a dataset "
     "in memory written as PNG: fashion-mnist | mnist | cifar10 | cifar100 | npy | synthetic",
     0, NULL, 0},
    {"data-dir", OPT_STRING, NULL, "the image folder (DIR/train/<class>/<image>, DIR/val/...), "
     "or the dataset's folder (default: its own)", 0, NULL, 0},
    {"output", OPT_STRING, NULL, "folder of the shards (created; one that holds shards is "
     "refused)", 1, NULL, 0},
    {"shard-mb", OPT_FLOAT, "256", "size of a shard in MiB", 0, NULL, 0},
    {"seed", OPT_INT, "42", "order of the samples in the shards (a seeded permutation)", 0, NULL,
     0},
    {"help", OPT_FLAG, NULL, "show this help", 0, NULL, 0},
};

int cmd_shard(int argc, char **argv)
{
    cli_opt *o = shard_opts;
    const int n = N_OPTS(shard_opts);
    const char *cmd = "shard";
    int early = cli_start(cmd, "Packs an image folder into WebDataset tar shards (KEY.jpg or "
                          "KEY.png with KEY.cls) and an index.json.", o, n, argc, argv);
    if (early >= 0)
        return early;
    const char *dataset = cli_str(o, n, "dataset");
    const int folder = !strcmp(dataset, "imagefolder");
    if (folder && !cli_str(o, n, "data-dir"))
        return cli_usage_error(cmd, "%s", "--dataset imagefolder needs --data-dir DIR");
    const cli_path files[] = {{"--data-dir", cli_str(o, n, "data-dir"), 0},
                              {"--output", cli_str(o, n, "output"), 1}};
    if ((early = cli_distinct_paths(cmd, files, N_OPTS(files))) >= 0)
        return early;
    dtnn_shard_params p;
    dtnn_shard_params_default(&p);
    dtnn_error err = {0};
    dtnn_dataset d;
    if (folder) {
        p.data_dir = cli_str(o, n, "data-dir");
    } else {
        dtnn_data_params dp;
        dtnn_data_params_default(&dp);
        dp.name = dataset;
        dp.dir = cli_str(o, n, "data-dir");
        if (dtnn_dataset_load(&d, &dp, &err))
            return cli_fail(cmd, &err);
        p.dataset = &d;
    }
    p.output = cli_str(o, n, "output");
    p.shard_mb = cli_float(o, n, "shard-mb");
    if (!(p.shard_mb >= 0.01 && p.shard_mb <= 65536.0))
        return cli_usage_error(cmd, "--shard-mb must be in [0.01, 65536], not %s",
                               cli_str(o, n, "shard-mb"));
    p.seed = (uint64_t)cli_int(o, n, "seed");
    dtnn_shard_report r;
    const dtnn_status st = dtnn_shards_write(&p, &r, &err);
    if (!folder)
        dtnn_dataset_free(&d);
    if (st)
        return cli_fail(cmd, &err);
    printf("%lld samples in %lld shards (%.1f MiB) in %s", (long long)r.samples,
           (long long)r.shards, (double)r.bytes / 1048576.0, p.output);
    if (r.skipped)
        printf("; %lld files that are neither JPEG nor PNG skipped", (long long)r.skipped);
    printf("\n");
    return 0;
}
