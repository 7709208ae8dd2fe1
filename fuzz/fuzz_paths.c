/*
 * fuzz_paths.c — libFuzzer harness for the input opener (core/file_input.c) and the atomic
 * writer (core/atomic_file.c). Each input builds a small tree in a per-process scratch folder
 * (its first bytes choose, for the names n0..n3 in the folder t, a regular file, a folder, a
 * FIFO, a symbolic link to another name, to ".." (the scratch folder), to nothing, or no node),
 * and its remaining bytes spell a path over the alphabet "n0123/." into t; a path with a ".."
 * of its own is skipped, so nothing is ever written outside the scratch folder. The path is opened for reading and written
 * through the atomic writer. Beyond not crashing, it asserts what the two promise: an opened
 * input is a regular file, nothing blocks (a FIFO opened the ordinary way would), no
 * temporary is left behind, and a node that was not a regular file is never replaced.
 */
#define _GNU_SOURCE

#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/atomic_file.h"
#include "core/file_input.h"

static char root[256];

static int remove_node(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(path);
}

static void build_tree(const uint8_t *kinds)
{
    static const char *const targets[] = {"n0", "n1", "..", "nowhere"};
    for (int i = 0; i < 4; i++) {
        char path[320];
        snprintf(path, sizeof path, "%s/t/n%d", root, i);
        switch (kinds[i] % 8) {
        case 0: {
            FILE *f = fopen(path, "wb");
            if (f)
                fclose(f);
            break;
        }
        case 1:
            mkdir(path, 0700);
            break;
        case 2:
            mkfifo(path, 0600);
            break;
        case 3: case 4: case 5: case 6:
            if (symlink(targets[kinds[i] % 8 - 3], path) != 0)
                abort();
            break;
        default:
            break;
        }
    }
}

/* Whether any name in the tree (one level of folders deep) looks like a writer's temporary. */
static int has_temporary(const char *dir, int depth)
{
    DIR *d = opendir(dir);
    int found = 0;
    for (struct dirent *e; d && !found && (e = readdir(d));) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        found = strstr(e->d_name, ".tmp.") != NULL;
        char sub[600];
        snprintf(sub, sizeof sub, "%s/%s", dir, e->d_name);
        struct stat sb;
        if (!found && depth > 0 && lstat(sub, &sb) == 0 && S_ISDIR(sb.st_mode))
            found = has_temporary(sub, depth - 1);
    }
    if (d)
        closedir(d);
    return found;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 4)
        return 0;
    const char *shm = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    snprintf(root, sizeof root, "%s/dtnn-fuzz-paths-%ld", shm, (long)getpid());
    nftw(root, remove_node, 8, FTW_DEPTH | FTW_PHYS);
    char top[300];
    snprintf(top, sizeof top, "%s/t", root);
    if (mkdir(root, 0700) != 0 || mkdir(top, 0700) != 0)
        return 0;
    build_tree(data);

    static const char alphabet[] = "n0123/.";
    char rel[65], path[400];
    size_t n = 0;
    for (size_t i = 4; i < size && n < sizeof rel - 1; i++)
        rel[n++] = alphabet[data[i] % (sizeof alphabet - 1)];
    rel[n] = '\0';
    for (const char *c = rel; (c = strstr(c, "..")) != NULL; c++)
        if ((c == rel || c[-1] == '/') && (c[2] == '\0' || c[2] == '/')) {
            nftw(root, remove_node, 8, FTW_DEPTH | FTW_PHYS);
            return 0;
        }
    snprintf(path, sizeof path, "%s/%s", top, rel);

    dtnn_error err;
    FILE *f = NULL;
    if (file_open_input(path, "fuzz input", &f, NULL, &err) == DTNN_OK) {
        struct stat sb;
        if (fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode))
            abort();
        fclose(f);
    }

    struct stat before;
    const int existed = stat(path, &before) == 0;
    const dtnn_status st = atomic_file_write(path, "fuzz output", data, size, &err);
    struct stat after;
    if (existed && !S_ISREG(before.st_mode)) {
        /* refused, and the node is what it was */
        if (st == DTNN_OK || stat(path, &after) != 0 ||
            (after.st_mode & S_IFMT) != (before.st_mode & S_IFMT) || after.st_ino != before.st_ino)
            abort();
    }
    if (st == DTNN_OK && (stat(path, &after) != 0 || !S_ISREG(after.st_mode) ||
                          after.st_size != (off_t)size))
        abort();
    if (has_temporary(root, 3))
        abort();
    nftw(root, remove_node, 8, FTW_DEPTH | FTW_PHYS);
    return 0;
}
