/*
 * atomic_file.c — whole-or-nothing output files (see atomic_file.h for the contract). The
 * unnamed temporary is linked into the folder under PATH.tmp.<pid> only at the commit and
 * renamed over the destination at once, so the window in which a kill can leave a name behind
 * is two system calls long; where the destination does not exist yet, the link is made under
 * its own name directly.
 */
#define _GNU_SOURCE

#include "atomic_file.h"
#include "file_input.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The folder of path, "." or "/" where it has none. */
static void folder_of(const char *path, char *dir, size_t len)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        snprintf(dir, len, ".");
    else if (slash == path)
        snprintf(dir, len, "/");
    else
        snprintf(dir, len, "%.*s", (int)(slash - path), path);
}

/* Where the content will go: path, or the file a symbolic link at path leads to; refuses a
 * destination that exists and is not a regular file. *exists says whether it exists. */
static dtnn_status resolve_target(const char *path, const char *what, char *target,
                                  int *exists, dtnn_error *err)
{
    *exists = 0;
    if (!path || !*path)
        return dtnn_error_set(err, DTNN_ERR_ARG, "no path given for the %s", what);
    if (strlen(path) >= PATH_MAX)
        return dtnn_error_set(err, DTNN_ERR_ARG, "the %s path is longer than %d bytes", what,
                              PATH_MAX - 1);
    struct stat sb;
    if (lstat(path, &sb) != 0) {
        if (errno != ENOENT)
            return dtnn_error_set(err, DTNN_ERR_IO, "cannot write the %s '%s': %s", what, path,
                                  strerror(errno));
        snprintf(target, PATH_MAX, "%s", path);
        return DTNN_OK;
    }
    if (S_ISLNK(sb.st_mode)) {
        char resolved[PATH_MAX];
        if (!realpath(path, resolved))
            return dtnn_error_set(err, DTNN_ERR_IO, "cannot write the %s '%s': it is a symbolic "
                                  "link that leads nowhere (%s)", what, path, strerror(errno));
        snprintf(target, PATH_MAX, "%s", resolved);
        if (stat(target, &sb) != 0)
            return dtnn_error_set(err, DTNN_ERR_IO, "cannot write the %s '%s': %s", what, path,
                                  strerror(errno));
    } else {
        snprintf(target, PATH_MAX, "%s", path);
    }
    *exists = 1;
    if (S_ISDIR(sb.st_mode))
        return dtnn_error_set(err, DTNN_ERR_IO, "cannot write the %s '%s': it is a folder; give "
                              "a file name", what, path);
    if (!S_ISREG(sb.st_mode))
        return dtnn_error_set(err, DTNN_ERR_IO, "cannot write the %s '%s': it exists and is %s, "
                              "and dtnn replaces only regular files", what, path,
                              file_kind_name(sb.st_mode));
    return DTNN_OK;
}

/* An unnamed file in dir where the file system and /proc allow it, else -1. */
static int open_unnamed(const char *dir)
{
#ifdef O_TMPFILE
    if (access("/proc/self/fd", X_OK) != 0)
        return -1;
    return open(dir, O_TMPFILE | O_WRONLY | O_CLOEXEC, 0666);
#else
    (void)dir;
    return -1;
#endif
}

static void sync_folder(const char *target)
{
    char dir[PATH_MAX];
    folder_of(target, dir, sizeof dir);
    int fd = open(dir, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        (void)fsync(fd);   /* makes the rename durable; failing here loses no data */
        close(fd);
    }
}

dtnn_status atomic_file_begin(atomic_file *a, const char *path, const char *what,
                              dtnn_error *err)
{
    memset(a, 0, sizeof *a);
    a->fd = -1;
    a->what = what;
    int exists;
    dtnn_status st = resolve_target(path, what, a->target, &exists, err);
    if (st)
        return st;
    char dir[PATH_MAX];
    folder_of(a->target, dir, sizeof dir);
    a->fd = open_unnamed(dir);
    if (a->fd < 0) {
        snprintf(a->tmp, sizeof a->tmp, "%s.tmp.%ld", a->target, (long)getpid());
        a->fd = open(a->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0666);
        if (a->fd < 0) {
            a->tmp[0] = '\0';
            return dtnn_error_set(err, DTNN_ERR_IO, "cannot write the %s '%s': %s", what, path,
                                  strerror(errno));
        }
    }
    a->fp = fdopen(a->fd, "wb");
    if (!a->fp) {
        int saved = errno;
        atomic_file_abort(a);
        return dtnn_error_set(err, DTNN_ERR_NOMEM, "cannot write the %s '%s': %s", what, path,
                              strerror(saved));
    }
    return DTNN_OK;
}

void atomic_file_abort(atomic_file *a)
{
    if (a->fp)
        fclose(a->fp);
    else if (a->fd >= 0)
        close(a->fd);
    if (a->tmp[0])
        unlink(a->tmp);
    a->fp = NULL;
    a->fd = -1;
    a->tmp[0] = '\0';
}

/* Gives the unnamed temporary a name: the destination's own where that is free, else
 * PATH.tmp.<pid> to be renamed over it. Returns 0, or an errno. */
static int link_unnamed(atomic_file *a, int *in_place)
{
    char proc[64];
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", a->fd);
    *in_place = linkat(AT_FDCWD, proc, AT_FDCWD, a->target, AT_SYMLINK_FOLLOW) == 0;
    if (*in_place)
        return 0;
    if (errno != EEXIST)
        return errno;
    snprintf(a->tmp, sizeof a->tmp, "%s.tmp.%ld", a->target, (long)getpid());
    unlink(a->tmp);
    return linkat(AT_FDCWD, proc, AT_FDCWD, a->tmp, AT_SYMLINK_FOLLOW) == 0 ? 0 : errno;
}

dtnn_status atomic_file_commit(atomic_file *a, dtnn_error *err)
{
    int failed = ferror(a->fp) ? (errno ? errno : EIO) : 0;
    if (!failed && fflush(a->fp) != 0)
        failed = errno;
    if (!failed && fsync(a->fd) != 0)
        failed = errno;
    int in_place = 0;
    if (!failed && !a->tmp[0])
        failed = link_unnamed(a, &in_place);
    if (!failed && !in_place && rename(a->tmp, a->target) != 0)
        failed = errno;
    if (failed) {
        atomic_file_abort(a);
        return dtnn_error_set(err, DTNN_ERR_IO, "cannot write the %s '%s': %s (nothing was "
                              "replaced)", a->what, a->target, strerror(failed));
    }
    a->tmp[0] = '\0';
    int closed = fclose(a->fp);
    a->fp = NULL;
    a->fd = -1;
    sync_folder(a->target);
    if (closed != 0)
        return dtnn_error_set(err, DTNN_ERR_IO, "cannot write the %s '%s': %s", a->what,
                              a->target, strerror(errno));
    return DTNN_OK;
}

dtnn_status atomic_file_check(const char *path, const char *what, dtnn_error *err)
{
    atomic_file a;
    dtnn_status st = atomic_file_begin(&a, path, what, err);
    if (!st)
        atomic_file_abort(&a);
    return st;
}

dtnn_status atomic_file_write(const char *path, const char *what, const void *data, size_t n,
                              dtnn_error *err)
{
    atomic_file a;
    dtnn_status st = atomic_file_begin(&a, path, what, err);
    if (st)
        return st;
    if (n && fwrite(data, 1, n, a.fp) != n) {
        int saved = errno;
        atomic_file_abort(&a);
        return dtnn_error_set(err, DTNN_ERR_IO, "cannot write the %s '%s': %s (nothing was "
                              "replaced)", what, path, strerror(saved));
    }
    return atomic_file_commit(&a, err);
}

dtnn_status dtnn_file_write(const char *path, const char *what, const void *data, size_t n,
                            dtnn_error *err)
{
    return atomic_file_write(path, what ? what : "file", data, n, err);
}

dtnn_status dtnn_file_check_output(const char *path, const char *what, dtnn_error *err)
{
    return atomic_file_check(path, what ? what : "file", err);
}
