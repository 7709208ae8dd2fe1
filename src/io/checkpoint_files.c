/*
 * checkpoint_files.c — the files around a checkpoint, for the trainer: the check before a run
 * that the checkpoint can be written and has the space (statvfs), the estimate of that space,
 * the step-numbered copies of --keep K with their rotation (the K newest stay), and the search
 * for the newest complete one that a supervisor resumes from. Writing and reading the
 * checkpoint itself is checkpoint.c's, over safetensors.c; nothing here looks inside a file.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "../core/atomic_file.h"
#include "checkpoint_files.h"

/* Fails early when the checkpoint cannot be written (the atomic writer's start: a folder that
 * does not take a new file, a destination that is a folder or a device), or when the file
 * system it would go to lacks the space for `bytes` more (a checkpoint is written beside the
 * previous one, then renamed over it), rather than after hours. The space is that of the
 * writer's own temporary, so a --save that is a link is measured where its target lives. */
dtnn_status ckpt_check_writable(const char *path, const char *what, size_t bytes,
                                dtnn_error *err)
{
    atomic_file probe;
    dtnn_status st = atomic_file_begin(&probe, path, what, err);
    if (st)
        return st;
    struct statvfs fs;
    int full = fstatvfs(probe.fd, &fs) == 0 && (uint64_t)fs.f_bavail * fs.f_frsize < bytes;
    atomic_file_abort(&probe);
    if (full)
        return dtnn_error_set(err, DTNN_ERR_IO, "cannot write the %s '%s': it needs about %.1f "
                              "MiB and its file system has %.1f MiB free", what, path,
                              (double)bytes / 1048576.0,
                              (double)fs.f_bavail * fs.f_frsize / 1048576.0);
    return DTNN_OK;
}

/* What a checkpoint of m with opt takes on disk: its tensors plus a generous header. */
size_t ckpt_estimate_bytes(dtnn_model *m, const dtnn_optimizer *opt)
{
    size_t floats = dtnn_model_params_padded(m) * (size_t)(1 + dtnn_optimizer_state_slots(opt));
    return sizeof(float) * floats + dtnn_model_buffer_bytes(m) + ((size_t)64 << 10);
}

/* Kept copies of checkpoint "run/a.safetensors" are "run/a.step00000120.safetensors"; a name
 * without that extension gets ".step00000120" appended. stem_length is the part before it. */
static size_t stem_length(const char *name)
{
    const char *ext = ".safetensors";
    size_t n = strlen(name), e = strlen(ext);
    return n > e && !strcmp(name + n - e, ext) ? n - e : n;
}

static void kept_name(char *out, size_t len, const char *path, int64_t step)
{
    size_t stem = stem_length(path);
    snprintf(out, len, "%.*s.step%08lld%s", (int)stem, path, (long long)step, path + stem);
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* The steps of path's kept copies in its folder (at most max), in ascending order. */
static int kept_steps(const char *path, int64_t *steps, int max)
{
    const char *slash = strrchr(path, '/'), *base = slash ? slash + 1 : path;
    char dir[4096];
    snprintf(dir, sizeof dir, "%.*s", slash ? (int)(base - path) : 1, slash ? path : ".");
    const size_t stem = stem_length(base);
    DIR *dp = opendir(dir);
    if (!dp)
        return 0;
    int n = 0;
    struct dirent *de;
    while ((de = readdir(dp)) && n < max) {
        if (strncmp(de->d_name, base, stem) || strncmp(de->d_name + stem, ".step", 5))
            continue;
        const char *digits = de->d_name + stem + 5;
        if (*digits < '0' || *digits > '9')
            continue;
        char *end;
        long long v = strtoll(digits, &end, 10);
        if (!strcmp(end, base + stem))
            steps[n++] = v;
    }
    closedir(dp);
    qsort(steps, (size_t)n, sizeof steps[0], cmp_i64);
    return n;
}

/* --keep K: hard-links the checkpoint just written as its step's copy (the next atomic save
 * replaces path's directory entry, not this file), then removes all but the K newest copies
 * in the folder, including those of earlier runs of the same path. */
dtnn_status ckpt_keep_copy(const char *path, int64_t step, int keep, dtnn_error *err)
{
    char name[4096];
    kept_name(name, sizeof name, path, step);
    remove(name);
    if (link(path, name) != 0)
        return dtnn_error_set(err, DTNN_ERR_IO, "cannot keep a copy of checkpoint '%s' as '%s': "
                              "%s", path, name, strerror(errno));
    int64_t steps[4096];
    const int n = kept_steps(path, steps, 4096);
    for (int i = 0; i + keep < n; i++) {
        kept_name(name, sizeof name, path, steps[i]);
        remove(name);
    }
    return DTNN_OK;
}

/* Whether path is a complete checkpoint written at or after not_before with more than *best
 * steps; if so it becomes the best. */
static int better(const char *path, int64_t not_before, int64_t *best, dtnn_train_state *ts)
{
    struct stat st;
    dtnn_train_state s;
    dtnn_error ignored = {0};
    if (stat(path, &st) || (int64_t)st.st_mtime < not_before ||
        dtnn_checkpoint_read_state(path, &s, &ignored) || s.step <= *best)
        return 0;
    *best = s.step;
    *ts = s;
    return 1;
}

/* The kept copies newest first, the first complete one ends the search; save_path last, so
 * that a kept copy of the same step wins (a resumed run overwrites save_path, and whoever
 * names the file resumed from should name one that stays as it was). */
dtnn_status dtnn_checkpoint_newest(const char *save_path, int64_t not_before, char *out,
                                   size_t out_len, dtnn_train_state *ts, dtnn_error *err)
{
    if (!save_path || !out || !ts || out_len == 0)
        return dtnn_error_set(err, DTNN_ERR_ARG, "dtnn_checkpoint_newest: NULL argument");
    int64_t steps[4096], best = -1;
    char name[4096];
    for (int i = kept_steps(save_path, steps, 4096) - 1; i >= 0; i--) {
        kept_name(name, sizeof name, save_path, steps[i]);
        if (better(name, not_before, &best, ts)) {
            snprintf(out, out_len, "%s", name);
            break;
        }
    }
    if (better(save_path, not_before, &best, ts))
        snprintf(out, out_len, "%s", save_path);
    if (best < 0)
        return dtnn_error_set(err, DTNN_ERR_IO, "no complete checkpoint '%s' or kept copy of it",
                              save_path);
    return DTNN_OK;
}
