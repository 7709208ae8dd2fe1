/*
 * test_cifar.c — the CIFAR-10 and CIFAR-100 readers on tiny binary files written here: pixels
 * and labels of known records, the file order of the train split, normalisation, and the errors
 * a user meets (a missing folder lists the files expected, a truncated file names itself and its
 * size, a label out of range names the record).
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testutil.h"

static char tmpdir[256];

/* Pixel j of record r: a pattern that tells records and planes apart. */
static unsigned char pixel(int r, int j)
{
    return (unsigned char)((r * 37 + j * 11 + j / 1024) & 0xff);
}

/* Writes n records of CIFAR-classes to path, labels from label(r); extra bytes appended. */
static void write_cifar(const char *path, int classes, int first, int n, int extra)
{
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    if (!f)
        return;
    for (int r = first; r < first + n; r++) {
        if (classes == 100)
            fputc(r % 20, f);           /* coarse */
        fputc(r % classes, f);          /* fine (CIFAR-100) or the label (CIFAR-10) */
        for (int j = 0; j < 3072; j++)
            fputc(pixel(r, j), f);
    }
    for (int i = 0; i < extra; i++)
        fputc(0, f);
    CHECK(fclose(f) == 0);
}

static void expect_error(const char *what, dtnn_status st, const dtnn_error *err,
                         const char *word1, const char *word2)
{
    int ok = st != DTNN_OK && strstr(err->message, word1) &&
             (!word2 || strstr(err->message, word2));
    printf("%-30s -> %s%s\n", what, st ? err->message : "ok", ok ? "" : "  FAIL");
    if (!ok)
        test_failures++;
}

static void test_file(void)
{
    char path[512];
    snprintf(path, sizeof path, "%s/one.bin", tmpdir);
    write_cifar(path, 10, 3, 4, 0);
    float *x;
    int32_t *y;
    int64_t n;
    dtnn_error err = {0};
    CHECK_OK(dtnn_cifar_load(path, 10, &x, &y, &n, &err), &err);
    CHECK(n == 4);
    for (int r = 0; r < 4 && n == 4; r++) {
        CHECK(y[r] == (3 + r) % 10);
        for (int j = 0; j < 3072; j += 97)
            CHECK(x[(size_t)r * 3072 + j] == (float)pixel(3 + r, j) / 255.0f);
    }
    free(x);
    free(y);
    /* The same bytes are not a whole number of CIFAR-100 records (3074 bytes each). */
    expect_error("CIFAR-10 file read as 100", dtnn_cifar_load(path, 100, &x, &y, &n, &err), &err,
                 "one.bin", "12292 bytes");
    CHECK(x == NULL && y == NULL);
    write_cifar(path, 10, 0, 2, 100);
    expect_error("truncated / padded file", dtnn_cifar_load(path, 10, &x, &y, &n, &err), &err,
                 "one.bin", "6246 bytes");
    /* A CIFAR-100 file whose fine label is 100 or more. */
    FILE *f = fopen(path, "wb");
    unsigned char rec[3074] = {1, 150};
    fwrite(rec, 1, sizeof rec, f);
    fclose(f);
    expect_error("label out of range", dtnn_cifar_load(path, 100, &x, &y, &n, &err), &err,
                 "record 0 has label 150", NULL);
}

static void test_datasets(void)
{
    char dir[512], path[600];
    snprintf(dir, sizeof dir, "%s/c10", tmpdir);
    mkdir(dir, 0700);
    dtnn_data_params dp;
    dtnn_data_params_default(&dp);
    dp.name = "cifar10";
    dp.dir = dir;
    dtnn_dataset d;
    dtnn_error err = {0};
    expect_error("empty CIFAR-10 folder", dtnn_dataset_load(&d, &dp, &err), &err,
                 "data_batch_1.bin", "no Debian package");
    const int counts[5] = {3, 2, 2, 2, 1};
    int first = 0;
    for (int b = 0; b < 5; b++) {
        snprintf(path, sizeof path, "%s/data_batch_%d.bin", dir, b + 1);
        write_cifar(path, 10, first, counts[b], 0);
        first += counts[b];
    }
    expect_error("CIFAR-10 without test_batch", dtnn_dataset_load(&d, &dp, &err), &err,
                 "test_batch.bin", NULL);
    snprintf(path, sizeof path, "%s/test_batch.bin", dir);
    write_cifar(path, 10, 100, 2, 0);
    dp.normalize = 0;
    CHECK_OK(dtnn_dataset_load(&d, &dp, &err), &err);
    CHECK(d.train.n == 10 && d.test.n == 2 && d.train.c == 3 && d.train.h == 32 &&
          d.train.w == 32 && d.train.classes == 10 && d.test.classes == 10);
    for (int r = 0; r < 10 && d.train.n == 10; r++) {
        CHECK(d.train.y[r] == r % 10);
        CHECK(d.train.x[(size_t)r * 3072 + 2048] == (float)pixel(r, 2048) / 255.0f);
    }
    CHECK(d.test.y[1] == 101 % 10);
    dtnn_dataset_free(&d);
    /* Normalised by default, with the train split's statistics. */
    dp.normalize = -1;
    CHECK_OK(dtnn_dataset_load(&d, &dp, &err), &err);
    for (int ch = 0; ch < 3; ch++) {
        double sum = 0;
        for (int64_t i = 0; i < d.train.n; i++)
            for (int j = 0; j < 1024; j++)
                sum += d.train.x[(size_t)i * 3072 + (size_t)ch * 1024 + j];
        CHECK(fabs(sum / (double)(d.train.n * 1024)) < 1e-4);
        CHECK(d.std[ch] > 0.05f && d.mean[ch] > 0.1f);
    }
    dtnn_dataset_free(&d);
    /* One truncated batch file fails the whole dataset, naming it. */
    snprintf(path, sizeof path, "%s/data_batch_4.bin", dir);
    if (truncate(path, 3073 + 1000) == 0)
        expect_error("truncated data_batch_4", dtnn_dataset_load(&d, &dp, &err), &err,
                     "data_batch_4.bin", "4073 bytes");

    snprintf(dir, sizeof dir, "%s/c100", tmpdir);
    mkdir(dir, 0700);
    dp.name = "cifar100";
    dp.dir = dir;
    expect_error("empty CIFAR-100 folder", dtnn_dataset_load(&d, &dp, &err), &err, "train.bin",
                 "test.bin");
    snprintf(path, sizeof path, "%s/train.bin", dir);
    write_cifar(path, 100, 95, 6, 0);
    snprintf(path, sizeof path, "%s/test.bin", dir);
    write_cifar(path, 100, 7, 3, 0);
    dp.normalize = 0;
    CHECK_OK(dtnn_dataset_load(&d, &dp, &err), &err);
    CHECK(d.train.n == 6 && d.test.n == 3 && d.train.classes == 100);
    for (int r = 0; r < 6 && d.train.n == 6; r++) {
        CHECK(d.train.y[r] == (95 + r) % 100);     /* the fine label, not the coarse one */
        CHECK(d.train.x[(size_t)r * 3072 + 5] == (float)pixel(95 + r, 5) / 255.0f);
    }
    dtnn_dataset_free(&d);
    dp.dir = NULL;
    expect_error("CIFAR-100 without --data-dir", dtnn_dataset_load(&d, &dp, &err), &err,
                 "--data-dir", "train.bin");
}

int main(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/dtnn_test_cifar.XXXXXX");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    test_file();
    test_datasets();
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", tmpdir);
    return test_finish("test_cifar");
}
