/*
 * json.h — a strict reader of the small JSON subset that file formats put in their headers
 * and indexes (safetensors, shard indexes): objects, strings, non-negative integers and arrays
 * of them.
 * An object is read by handing each member's key to a callback that reads the value, so the
 * caller checks keys and types as it goes and no tree is ever built. Every error is a
 * DTNN_ERR_FORMAT that names the file and the byte offset in the file (see json_fail).
 */
#ifndef DTNN_JSON_H
#define DTNN_JSON_H

#include <stddef.h>
#include <stdint.h>

#include "dtnn.h"

/* The text being read and where; the caller fills every field, pos 0. */
typedef struct {
    const char *s;          /* n bytes of text, not necessarily NUL-terminated */
    size_t n, pos;          /* its length, and the next byte to read */
    const char *path;       /* the file, for messages */
    const char *format;     /* its format, for messages: "bad <format> header at byte ..." */
    size_t base;            /* the text's offset in the file, so messages give file offsets */
    dtnn_error *err;
} json_reader;

/* Sets err to "<path>: bad <format> header at byte <base + pos>: <message>" and returns
 * DTNN_ERR_FORMAT. For callbacks too, so their complaints carry the same position. */
#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
dtnn_status json_fail(json_reader *j, const char *fmt, ...);

/* The next byte after white space (which is skipped), or -1 at the end of the text. */
int json_peek(json_reader *j);
/* Skips white space and the byte c, or fails naming what was found instead. */
dtnn_status json_expect(json_reader *j, char c);
/* A string, unescaped into a new NUL-terminated buffer the caller frees (*out NULL on error).
 * Every escape of RFC 8259, surrogate pairs joined; lone surrogates and \u0000 are errors. */
dtnn_status json_string_dup(json_reader *j, char **out);
/* A non-negative integer without sign, fraction, exponent or leading zeros, up to UINT64_MAX. */
dtnn_status json_uint(json_reader *j, uint64_t *out);
/* [u, u, ...] with at most max entries into v; *n is how many; `what` names it in errors. */
dtnn_status json_uint_array(json_reader *j, uint64_t *v, int max, int *n, const char *what);

/* Reads an object: for each member, reads its key and the ':' and calls member(j, key, ctx),
 * which must read the value (key is freed after the call returns). A callback's error ends
 * the object and is returned. Keys given twice reach the callback twice: it decides. */
typedef dtnn_status (*json_member_fn)(json_reader *j, char *key, void *ctx);
dtnn_status json_members(json_reader *j, json_member_fn member, void *ctx);

/* Whether n bytes are valid UTF-8 (RFC 3629: no overlong forms, no surrogates, nothing above
 * U+10FFFF), as JSON text must be; checked on the whole text before reading it. */
int json_utf8_valid(const unsigned char *s, size_t n);

#endif
