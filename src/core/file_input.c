/*
 * file_input.c — opens an input file without blocking and refuses anything but a regular file
 * (see file_input.h for why the order of open and fstat matters).
 */
#define _POSIX_C_SOURCE 200809L

#include "file_input.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const char *file_kind_name(unsigned mode)
{
    if (S_ISDIR(mode))
        return "a directory";
    if (S_ISFIFO(mode))
        return "a FIFO";
    if (S_ISSOCK(mode))
        return "a socket";
    if (S_ISCHR(mode))
        return "a character device";
    if (S_ISBLK(mode))
        return "a block device";
    return "not a file";
}

dtnn_status file_open_input_fd(const char *path, const char *what, int *out, int64_t *size,
                               dtnn_error *err)
{
    *out = -1;
    if (!path || !*path)
        return dtnn_error_set(err, DTNN_ERR_ARG, "no path given for the %s", what);
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0)
        return dtnn_error_set(err, DTNN_ERR_IO, "cannot open %s '%s': %s", what, path,
                              strerror(errno));
    struct stat sb;
    dtnn_status st = DTNN_OK;
    int flags;
    if (fstat(fd, &sb) != 0)
        st = dtnn_error_set(err, DTNN_ERR_IO, "cannot open %s '%s': %s", what, path,
                            strerror(errno));
    else if (!S_ISREG(sb.st_mode))
        st = dtnn_error_set(err, DTNN_ERR_IO, "%s '%s' is not a regular file (%s)", what, path,
                            file_kind_name(sb.st_mode));
    else if ((flags = fcntl(fd, F_GETFL)) < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0)
        st = dtnn_error_set(err, DTNN_ERR_IO, "cannot open %s '%s': %s", what, path,
                            strerror(errno));
    if (st) {
        close(fd);
        return st;
    }
    if (size)
        *size = (int64_t)sb.st_size;
    *out = fd;
    return DTNN_OK;
}

dtnn_status file_open_input(const char *path, const char *what, FILE **out, int64_t *size,
                            dtnn_error *err)
{
    *out = NULL;
    int fd;
    dtnn_status st = file_open_input_fd(path, what, &fd, size, err);
    if (st)
        return st;
    *out = fdopen(fd, "rb");
    if (!*out) {
        st = dtnn_error_set(err, DTNN_ERR_NOMEM, "cannot open %s '%s': %s", what, path,
                            strerror(errno));
        close(fd);
    }
    return st;
}
