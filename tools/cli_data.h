/*
 * cli_data.h — the data a command reads (cli_data.c): a dataset in memory and, when needed,
 * loaders (image folders, augmentation, background decoding), with their shared options.
 */
#ifndef DTNN_CLI_DATA_H
#define DTNN_CLI_DATA_H

#include "cli_options.h"
#include "dtnn.h"

/* The options every data-reading command has: dataset, data-dir, image-size, loader-threads,
 * strict; train also augment, crop-padding and prefetch. */
typedef struct {
    int folder;                 /* encoded images streamed: --dataset imagefolder or shards */
    int shards;                 /* --dataset shards */
    dtnn_loader_params lp;      /* augmentation, threads, size, strict (not batch or ranks) */
} cli_data_opts;

/* Reads and checks them; 0, or 2 after printing a usage error. */
int cli_data_options(const char *cmd, const cli_opt *o, int n, int train, cli_data_opts *out);

typedef struct {
    dtnn_dataset d;             /* in memory (empty for an image folder) */
    dtnn_loader *train, *test;  /* NULL: use d directly */
    dtnn_split shape;           /* n, c, h, w, classes of what is read (x and y unused) */
    int64_t test_n;
    char name[64];
} cli_data;

/* For training (split NULL): the train split and, when there is one, the test / val split
 * (evaluated in global batches of eval_batch). For eval (split "test" or "train"): that split
 * only, as cd->test for an image folder or in cd->d otherwise. */
dtnn_status cli_data_open(cli_data *cd, const cli_data_opts *opts, const dtnn_data_params *dp,
                          const char *split, int batch, int eval_batch, int rank, int ranks,
                          dtnn_error *err);
/* Prints, on stderr, the unreadable images this rank's loaders skipped, if any. */
void cli_data_report_skipped(const cli_data *cd, const char *cmd, int rank, int ranks);
/* Prints, on stderr, what this rank read from shards (the loaders' count and the kernel's). */
void cli_data_report_reads(const cli_data *cd, const char *cmd, int rank, int ranks);
void cli_data_close(cli_data *cd);

#endif
