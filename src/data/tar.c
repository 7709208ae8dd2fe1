/*
 * tar.c — tar archives of sharded datasets (tar.h): the table of a shard's samples read from
 * its headers alone (plus the few bytes of each class), and ustar members written.
 */
#define _POSIX_C_SOURCE 200809L
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/internal.h"
#include "data/tar.h"

#define BLOCK 512
#define NAME_MAX_LEN 4096
#define PAX_MAX (64 * 1024)

typedef struct {
    const char *path;
    int fd;
    uint64_t file_size;
    int64_t *bytes_read;
    dtnn_error *err;
} tar_reader;

static dtnn_status read_at(tar_reader *t, void *buf, size_t n, uint64_t off)
{
    size_t done = 0;
    while (done < n) {
        ssize_t got = pread(t->fd, (char *)buf + done, n - done, (off_t)(off + done));
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0)
            return dtnn_error_set(t->err, DTNN_ERR_IO, "%s: read error at byte %llu: %s",
                                  t->path, (unsigned long long)(off + done), strerror(errno));
        if (got == 0)
            return dtnn_error_set(t->err, DTNN_ERR_FORMAT, "%s: truncated at byte %llu (a tar "
                                  "member runs past the end of the file)", t->path,
                                  (unsigned long long)(off + done));
        done += (size_t)got;
    }
    *t->bytes_read += (int64_t)n;
    return DTNN_OK;
}

/* An octal field (NUL or space terminated, leading spaces allowed) or GNU's base-256. */
static int field_number(const unsigned char *f, size_t len, uint64_t *out)
{
    uint64_t v = 0;
    if (f[0] & 0x80) {
        if (f[0] != 0x80)
            return -1;
        for (size_t i = 1; i < len; i++) {
            if (v >> 55)
                return -1;
            v = v << 8 | f[i];
        }
        *out = v;
        return 0;
    }
    size_t i = 0;
    while (i < len && f[i] == ' ')
        i++;
    int digits = 0;
    for (; i < len && f[i] >= '0' && f[i] <= '7'; i++, digits++) {
        if (v >> 60)
            return -1;
        v = v * 8 + (uint64_t)(f[i] - '0');
    }
    if (i < len && f[i] != '\0' && f[i] != ' ')
        return -1;
    *out = v;
    return digits ? 0 : -1;
}

static int checksum_ok(const unsigned char *h)
{
    uint64_t want;
    if (field_number(h + 148, 8, &want))
        return 0;
    uint64_t sum = 0;
    int64_t ssum = 0;
    for (int i = 0; i < BLOCK; i++) {
        const unsigned char c = i >= 148 && i < 156 ? ' ' : h[i];
        sum += c;
        ssum += (signed char)c;
    }
    return sum == want || (uint64_t)ssum == want;
}

/* The "path" record of a pax extended header ("LEN path=VALUE\n" records), if any. */
static int pax_path(const char *data, size_t n, char *name, size_t cap)
{
    size_t at = 0;
    int found = 0;
    while (at < n) {
        size_t len = 0, i = at;
        while (i < n && isdigit((unsigned char)data[i]) && len < PAX_MAX)
            len = len * 10 + (size_t)(data[i++] - '0');
        if (i >= n || data[i] != ' ' || len == 0 || at + len > n || data[at + len - 1] != '\n')
            return -1;
        const char *kv = data + i + 1;
        const size_t kvlen = at + len - 1 - (i + 1);
        if (kvlen > 5 && !memcmp(kv, "path=", 5)) {
            if (kvlen - 5 >= cap)
                return -1;
            memcpy(name, kv + 5, kvlen - 5);
            name[kvlen - 5] = '\0';
            found = 1;
        }
        at += len;
    }
    return found;
}

typedef struct {
    char key[NAME_MAX_LEN];
    int has_image, has_cls;
    tar_sample s;
} pending_sample;

static dtnn_status finish_sample(tar_reader *t, pending_sample *p, tar_sample **v, int64_t *n,
                                 int64_t *cap)
{
    if (!p->has_image && !p->has_cls)
        return DTNN_OK;
    if (!p->has_image || !p->has_cls)
        return dtnn_error_set(t->err, DTNN_ERR_FORMAT, "%s: sample '%s' has no %s (a sample is "
                              "KEY.jpg, KEY.jpeg or KEY.png with KEY.cls, its class)", t->path,
                              p->key, p->has_image ? "class (.cls)" : "image (.jpg, .jpeg, .png)");
    if (*n == *cap) {
        int64_t nc = *cap ? *cap * 2 : 1024;
        tar_sample *nv = realloc(*v, sizeof **v * (size_t)nc);
        if (!nv)
            return dtnn_error_set(t->err, DTNN_ERR_NOMEM, "%s: out of memory for the table of "
                                  "%lld samples", t->path, (long long)nc);
        *v = nv;
        *cap = nc;
    }
    (*v)[(*n)++] = p->s;
    return DTNN_OK;
}

/* A member's data: the image's place, or the class read and parsed. */
static dtnn_status member(tar_reader *t, const char *name, uint64_t off, uint64_t size,
                          pending_sample *p, tar_sample **v, int64_t *n, int64_t *cap)
{
    const char *base = strrchr(name, '/');
    base = base ? base + 1 : name;
    const char *dot = strchr(base, '.');
    if (!dot)
        return DTNN_OK;
    const size_t keylen = (size_t)(dot - name);
    char ext[16];
    size_t el = strlen(dot + 1);
    if (el >= sizeof ext)
        return DTNN_OK;
    for (size_t i = 0; i <= el; i++)
        ext[i] = (char)tolower((unsigned char)dot[1 + i]);
    dtnn_status st;
    if (strlen(p->key) != keylen || memcmp(p->key, name, keylen)) {
        if ((st = finish_sample(t, p, v, n, cap)))
            return st;
        memset(p, 0, sizeof *p);
        memcpy(p->key, name, keylen);
    }
    if (!strcmp(ext, "jpg") || !strcmp(ext, "jpeg") || !strcmp(ext, "png")) {
        if (p->has_image)
            return dtnn_error_set(t->err, DTNN_ERR_FORMAT, "%s: sample '%s' has two images",
                                  t->path, p->key);
        if (size == 0 || size > UINT32_MAX)
            return dtnn_error_set(t->err, DTNN_ERR_FORMAT, "%s: image of sample '%s' has %llu "
                                  "bytes", t->path, p->key, (unsigned long long)size);
        p->has_image = 1;
        p->s.offset = off;
        p->s.size = (uint32_t)size;
    } else if (!strcmp(ext, "cls")) {
        char text[33];
        if (size == 0 || size >= sizeof text)
            return dtnn_error_set(t->err, DTNN_ERR_FORMAT, "%s: class of sample '%s' is %llu "
                                  "bytes, not a number", t->path, p->key,
                                  (unsigned long long)size);
        if ((st = read_at(t, text, (size_t)size, off)))
            return st;
        text[size] = '\0';
        char *end;
        errno = 0;
        long label = strtol(text, &end, 10);
        while (*end && isspace((unsigned char)*end))
            end++;
        if (end == text || *end || errno || label < 0 || label >= (1L << 30) || p->has_cls)
            return dtnn_error_set(t->err, DTNN_ERR_FORMAT, "%s: class of sample '%s' is not one "
                                  "non-negative integer", t->path, p->key);
        p->has_cls = 1;
        p->s.label = (int32_t)label;
    }
    return DTNN_OK;
}

static dtnn_status scan(tar_reader *t, tar_sample **v, int64_t *n)
{
    unsigned char h[BLOCK];
    char name[NAME_MAX_LEN], next_name[NAME_MAX_LEN] = "";
    char *extra = NULL;
    pending_sample *p = calloc(1, sizeof *p);
    int64_t cap = 0;
    uint64_t off = 0;
    dtnn_status st = DTNN_OK;
    if (!p)
        return dtnn_error_set(t->err, DTNN_ERR_NOMEM, "out of memory");
    while (!st) {
        if (off + BLOCK > t->file_size) {
            if (off != t->file_size)
                st = dtnn_error_set(t->err, DTNN_ERR_FORMAT, "%s: truncated header at byte "
                                    "%llu", t->path, (unsigned long long)off);
            break;
        }
        if ((st = read_at(t, h, BLOCK, off)))
            break;
        int zero = 1;
        for (int i = 0; i < BLOCK && zero; i++)
            zero = h[i] == 0;
        if (zero)
            break;
        uint64_t size;
        if (!checksum_ok(h) || field_number(h + 124, 12, &size)) {
            st = dtnn_error_set(t->err, DTNN_ERR_FORMAT, "%s: not a tar archive, or corrupt: bad "
                                "header at byte %llu", t->path, (unsigned long long)off);
            break;
        }
        const uint64_t data = off + BLOCK;
        if (size > t->file_size || data + size > t->file_size) {
            st = dtnn_error_set(t->err, DTNN_ERR_FORMAT, "%s: member at byte %llu claims %llu "
                                "bytes, past the end of the file (a truncated shard?)", t->path,
                                (unsigned long long)off, (unsigned long long)size);
            break;
        }
        const char type = (char)h[156];
        if (type == 'L' || type == 'x') {
            if (size > (type == 'L' ? NAME_MAX_LEN - 1 : PAX_MAX)) {
                st = dtnn_error_set(t->err, DTNN_ERR_FORMAT, "%s: oversized %s record at byte "
                                    "%llu", t->path, type == 'L' ? "long-name" : "pax",
                                    (unsigned long long)off);
                break;
            }
            char *nb = realloc(extra, (size_t)size + 1);
            if (!nb) {
                st = dtnn_error_set(t->err, DTNN_ERR_NOMEM, "out of memory");
                break;
            }
            extra = nb;
            if ((st = read_at(t, extra, (size_t)size, data)))
                break;
            extra[size] = '\0';
            if (type == 'L') {
                snprintf(next_name, sizeof next_name, "%s", extra);
            } else if (pax_path(extra, (size_t)size, next_name, sizeof next_name) < 0) {
                st = dtnn_error_set(t->err, DTNN_ERR_FORMAT, "%s: bad pax record at byte %llu",
                                    t->path, (unsigned long long)off);
                break;
            }
        } else if (type == '0' || type == '\0' || type == '7') {
            if (next_name[0]) {
                snprintf(name, sizeof name, "%s", next_name);
                next_name[0] = '\0';
            } else {
                const int ustar = !memcmp(h + 257, "ustar", 5);
                char prefix[156] = "", base[101];
                if (ustar)
                    memcpy(prefix, h + 345, 155), prefix[155] = '\0';
                memcpy(base, h, 100), base[100] = '\0';
                snprintf(name, sizeof name, "%s%s%s", prefix, prefix[0] ? "/" : "", base);
            }
            st = member(t, name, data, size, p, v, n, &cap);
        } else {
            next_name[0] = '\0';
        }
        off = data + (size + BLOCK - 1) / BLOCK * BLOCK;
    }
    if (!st)
        st = finish_sample(t, p, v, n, &cap);
    free(extra);
    free(p);
    return st;
}

dtnn_status dtnn__tar_scan(const char *path, tar_sample **samples, int64_t *n,
                           int64_t *bytes_read, dtnn_error *err)
{
    *samples = NULL;
    *n = 0;
    tar_reader t = {path, open(path, O_RDONLY | O_CLOEXEC), 0, bytes_read, err};
    if (t.fd < 0)
        return dtnn_error_set(err, DTNN_ERR_IO, "cannot open shard %s: %s", path,
                              strerror(errno));
    struct stat sb;
    dtnn_status st = DTNN_OK;
    if (fstat(t.fd, &sb) || !S_ISREG(sb.st_mode))
        st = dtnn_error_set(err, DTNN_ERR_IO, "shard %s is not a regular file", path);
    t.file_size = (uint64_t)sb.st_size;
    if (!st)
        st = scan(&t, samples, n);
    close(t.fd);
    if (st) {
        free(*samples);
        *samples = NULL;
        *n = 0;
    }
    return st;
}

/* ---- writing ------------------------------------------------------------------------------ */

static void octal(unsigned char *f, size_t len, uint64_t v)
{
    /* len - 1 digits, zero-padded, then NUL */
    f[len - 1] = '\0';
    for (size_t i = len - 1; i-- > 0;) {
        f[i] = (unsigned char)('0' + (v & 7));
        v >>= 3;
    }
}

int dtnn__tar_member(FILE *fp, const char *name, const void *data, size_t n)
{
    unsigned char h[BLOCK] = {0};
    const size_t len = strlen(name);
    if (len == 0 || len >= 100 || (uint64_t)n >= (uint64_t)1 << 33)
        return -1;
    memcpy(h, name, len);
    octal(h + 100, 8, 0644);
    octal(h + 108, 8, 0);
    octal(h + 116, 8, 0);
    octal(h + 124, 12, n);
    octal(h + 136, 12, 0);
    h[156] = '0';
    memcpy(h + 257, "ustar", 6);
    memcpy(h + 263, "00", 2);
    memset(h + 148, ' ', 8);
    unsigned sum = 0;
    for (int i = 0; i < BLOCK; i++)
        sum += h[i];
    octal(h + 148, 7, sum);
    h[155] = ' ';
    static const unsigned char pad[BLOCK];
    const size_t tail = (BLOCK - n % BLOCK) % BLOCK;
    if (fwrite(h, 1, BLOCK, fp) != BLOCK || (n && fwrite(data, 1, n, fp) != n) ||
        (tail && fwrite(pad, 1, tail, fp) != tail))
        return -1;
    return 0;
}

int dtnn__tar_end(FILE *fp)
{
    static const unsigned char zero[2 * BLOCK];
    return fwrite(zero, 1, sizeof zero, fp) == sizeof zero ? 0 : -1;
}
