/*
 * test_files.c — the one input opener (core/file_input.c) and the one atomic writer
 * (core/atomic_file.c): what each accepts and refuses, that a refusal never blocks or changes
 * anything, that a replaced file is whole, that an abandoned or killed write leaves the old
 * file and no temporary behind, and that a symbolic link keeps pointing at the new file.
 * Works in a fresh folder under $TMPDIR (default /tmp).
 */
#define _GNU_SOURCE

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/atomic_file.h"
#include "core/file_input.h"
#include "testutil.h"

static char dir[512];

static const char *in_dir(const char *name)
{
    static char paths[4][768];
    static int next;
    char *p = paths[next++ % 4];
    snprintf(p, sizeof paths[0], "%s/%s", dir, name);
    return p;
}

static void put(const char *path, const char *text)
{
    FILE *f = fopen(path, "wb");
    CHECK(f && fputs(text, f) >= 0 && fclose(f) == 0);
}

/* The whole content of path ("" when it cannot be read), in a static buffer. */
static const char *content(const char *path)
{
    static char buf[256];
    buf[0] = '\0';
    FILE *f = fopen(path, "rb");
    if (f) {
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        buf[n] = '\0';
        fclose(f);
    }
    return buf;
}

/* How many entries the folder holds (without . and ..). */
static int entries(void)
{
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    if (d)
        closedir(d);
    return n;
}

static void expect_refusal(const char *label, dtnn_status st, const dtnn_error *err,
                           const char *words)
{
    int ok = st != DTNN_OK && strstr(err->message, words) != NULL;
    printf("%-44s %s%s\n", label, st ? err->message : "accepted", ok ? "" : "  FAIL");
    if (!ok) {
        fprintf(stderr, "FAIL %s: want a refusal saying '%s'\n", label, words);
        test_failures++;
    }
}

static void test_input(void)
{
    dtnn_error err;
    FILE *f = NULL;
    int64_t size = -1;
    put(in_dir("in.txt"), "12345");
    CHECK_OK(file_open_input(in_dir("in.txt"), "test file", &f, &size, &err), &err);
    CHECK(f && size == 5);
    if (f)
        fclose(f);
    expect_refusal("input: missing", file_open_input(in_dir("nope"), "test file", &f, NULL, &err),
                   &err, "cannot open test file");
    expect_refusal("input: a directory", file_open_input(dir, "test file", &f, NULL, &err), &err,
                   "is not a regular file (a directory)");
    CHECK(mkfifo(in_dir("fifo"), 0600) == 0);
    /* Without a writer, an ordinary open of a FIFO never returns: this one must. */
    expect_refusal("input: a FIFO without a writer",
                   file_open_input(in_dir("fifo"), "test file", &f, NULL, &err), &err,
                   "is not a regular file (a FIFO)");
    expect_refusal("input: a character device",
                   file_open_input("/dev/null", "test file", &f, NULL, &err), &err,
                   "is not a regular file (a character device)");
    int fd = -1;
    expect_refusal("input: empty path", file_open_input_fd("", "test file", &fd, NULL, &err),
                   &err, "no path");
    CHECK(fd == -1);
    unlink(in_dir("fifo"));
    unlink(in_dir("in.txt"));
}

static void test_output(void)
{
    dtnn_error err;
    const int base = entries();
    const char *out = in_dir("out.bin");

    CHECK_OK(atomic_file_write(out, "test output", "first", 5, &err), &err);
    CHECK(!strcmp(content(out), "first") && entries() == base + 1);
    struct stat before, after;
    CHECK(stat(out, &before) == 0);
    CHECK_OK(atomic_file_write(out, "test output", "second", 6, &err), &err);
    CHECK(stat(out, &after) == 0);
    printf("%-44s %s (a new inode: %s)\n", "output: replaced whole", content(out),
           before.st_ino != after.st_ino ? "yes" : "no");
    CHECK(!strcmp(content(out), "second") && before.st_ino != after.st_ino);
    CHECK(entries() == base + 1);

    atomic_file a;
    CHECK_OK(atomic_file_begin(&a, out, "test output", &err), &err);
    fputs("half of a thi", a.fp);
    fflush(a.fp);
    atomic_file_abort(&a);
    printf("%-44s %s, %d temporaries\n", "output: abandoned write", content(out),
           entries() - base - 1);
    CHECK(!strcmp(content(out), "second") && entries() == base + 1);

    /* A process killed in the middle of a write: the old file, and nothing else where the file
     * system has unnamed temporaries (O_TMPFILE, linked through /proc/self/fd); elsewhere what a
     * kill leaves is the writer's named temporary (atomic_file.h), removed here. */
#ifdef O_TMPFILE
    int probe = open(dir, O_TMPFILE | O_WRONLY, 0600);
#else
    int probe = -1;
#endif
    const int unnamed = probe >= 0 && access("/proc/self/fd", X_OK) == 0;
    if (probe >= 0)
        close(probe);
    pid_t pid = fork();
    if (pid == 0) {
        atomic_file k;
        if (atomic_file_begin(&k, out, "test output", NULL) == DTNN_OK) {
            fputs("never finished", k.fp);
            fflush(k.fp);
        }
        raise(SIGKILL);
        _exit(0);
    }
    int status = 0;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid && WIFSIGNALED(status));
    printf("%-44s %s, %d temporaries%s\n", "output: writer killed mid-write", content(out),
           entries() - base - 1, unnamed ? "" : " (no O_TMPFILE here: a named one may stay)");
    CHECK(!strcmp(content(out), "second"));
    if (unnamed) {
        CHECK(entries() == base + 1);
    } else {
        char left[800];
        snprintf(left, sizeof left, "%s.tmp.%ld", out, (long)pid);
        unlink(left);
        CHECK(entries() == base + 1);
    }

    /* A link keeps pointing at the new content. */
    const char *link = in_dir("link.bin");
    CHECK(symlink("out.bin", link) == 0);
    CHECK_OK(atomic_file_write(link, "test output", "third", 5, &err), &err);
    struct stat lsb;
    CHECK(lstat(link, &lsb) == 0 && S_ISLNK(lsb.st_mode));
    CHECK(!strcmp(content(out), "third"));
    printf("%-44s link kept, target now '%s'\n", "output: through a symbolic link", content(out));
    CHECK(symlink("nowhere", in_dir("dangling")) == 0);
    expect_refusal("output: a dangling link",
                   atomic_file_check(in_dir("dangling"), "test output", &err), &err,
                   "leads nowhere");

    /* What is not a regular file is never replaced. */
    CHECK(mkfifo(in_dir("fifo"), 0600) == 0);
    expect_refusal("output: over a FIFO", atomic_file_write(in_dir("fifo"), "test output", "x", 1,
                                                            &err), &err, "is a FIFO");
    struct stat fsb;
    CHECK(lstat(in_dir("fifo"), &fsb) == 0 && S_ISFIFO(fsb.st_mode));
    CHECK(mkdir(in_dir("sub"), 0700) == 0);
    expect_refusal("output: a folder", atomic_file_check(in_dir("sub"), "test output", &err), &err,
                   "it is a folder");
    expect_refusal("output: a missing folder",
                   atomic_file_check(in_dir("no/such/x"), "test output", &err), &err,
                   "No such file or directory");
    expect_refusal("output: over /dev/null", atomic_file_check("/dev/null", "test output", &err),
                   &err, "is a character device");
    CHECK(entries() == base + 5);   /* out.bin, link.bin, dangling, fifo, sub */
    unlink(link);
    unlink(in_dir("dangling"));
    unlink(in_dir("fifo"));
    rmdir(in_dir("sub"));
    unlink(out);
}

int main(void)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/dtnn_test_files.XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) {
        fprintf(stderr, "FAIL cannot make a scratch folder %s: %s\n", dir, strerror(errno));
        return 1;
    }
    test_input();
    test_output();
    rmdir(dir);
    return test_finish("test_files");
}
