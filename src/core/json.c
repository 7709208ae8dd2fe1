/*
 * json.c — the JSON reader of json.h: a recursive-descent reader for the subset that file
 * headers use (RFC 8259's objects, strings, arrays of non-negative integers), written for
 * outside input: every read is bounds-checked against the text's length, strings must be
 * valid (no raw control characters, no lone surrogates, no \u0000, which would cut a C
 * string short), integers must fit in 64 bits. Deliberately not here: floats, negative
 * numbers, true / false / null, nested arrays, and any tree of values: a header's reader
 * knows what each key holds and reads it through json_members' callback.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"

dtnn_status json_fail(json_reader *j, const char *fmt, ...)
{
    char msg[384];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return dtnn_error_set(j->err, DTNN_ERR_FORMAT, "%s: bad %s header at byte %zu: %s", j->path,
                          j->format, j->base + j->pos, msg);
}

static void skip_ws(json_reader *j)
{
    while (j->pos < j->n && (j->s[j->pos] == ' ' || j->s[j->pos] == '\t' ||
                             j->s[j->pos] == '\n' || j->s[j->pos] == '\r'))
        j->pos++;
}

int json_peek(json_reader *j)
{
    skip_ws(j);
    return j->pos < j->n ? (unsigned char)j->s[j->pos] : -1;
}

dtnn_status json_expect(json_reader *j, char c)
{
    int got = json_peek(j);
    if (got != c) {
        if (got < 0)
            return json_fail(j, "expected '%c', found the end of the header", c);
        if (got < 0x20 || got >= 0x7F)
            return json_fail(j, "expected '%c', found byte 0x%02x", c, got);
        return json_fail(j, "expected '%c', found '%c'", c, got);
    }
    j->pos++;
    return DTNN_OK;
}

static int hex4(const char *s, unsigned *out)
{
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        char c = s[i];
        v <<= 4;
        if (c >= '0' && c <= '9')
            v |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f')
            v |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F')
            v |= (unsigned)(c - 'A' + 10);
        else
            return -1;
    }
    *out = v;
    return 0;
}

static size_t put_utf8(char *o, unsigned cp)
{
    if (cp < 0x80) {
        o[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (char)(0xC0 | (cp >> 6));
        o[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | (cp >> 12));
        o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | (cp >> 18));
    o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* A JSON string, unescaped into a new NUL-terminated buffer (an escape never decodes to more
 * bytes than it takes, so the raw length bounds the result). */
dtnn_status json_string_dup(json_reader *j, char **out)
{
    *out = NULL;
    dtnn_status st = json_expect(j, '"');
    if (st)
        return st;
    size_t end = j->pos;
    while (end < j->n && j->s[end] != '"')
        end += (j->s[end] == '\\') ? 2 : 1;
    if (end >= j->n)
        return json_fail(j, "unterminated string");
    char *o = malloc(end - j->pos + 1);
    if (!o)
        return dtnn_error_set(j->err, DTNN_ERR_NOMEM, "%s: out of memory reading the header",
                              j->path);
    size_t k = 0;
    while (j->pos < end) {
        unsigned char c = (unsigned char)j->s[j->pos];
        if (c < 0x20) {
            free(o);
            return json_fail(j, "control character 0x%02x inside a string", c);
        }
        if (c != '\\') {
            o[k++] = (char)c;
            j->pos++;
            continue;
        }
        char e = j->s[j->pos + 1];
        const char *simple = strchr("\"\\/bfnrt", e);
        if (e && simple) {
            static const char map[] = "\"\\/\b\f\n\r\t";
            o[k++] = map[simple - "\"\\/bfnrt"];
            j->pos += 2;
            continue;
        }
        unsigned cp, lo;
        if (e != 'u' || end - j->pos < 6 || hex4(j->s + j->pos + 2, &cp) != 0) {
            free(o);
            return json_fail(j, "invalid escape sequence in a string");
        }
        j->pos += 6;
        if (cp >= 0xD800 && cp <= 0xDBFF) {
            if (end - j->pos < 6 || j->s[j->pos] != '\\' || j->s[j->pos + 1] != 'u' ||
                hex4(j->s + j->pos + 2, &lo) != 0 || lo < 0xDC00 || lo > 0xDFFF) {
                free(o);
                return json_fail(j, "unpaired UTF-16 surrogate \\u%04x", cp);
            }
            j->pos += 6;
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
        } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
            free(o);
            return json_fail(j, "unpaired UTF-16 surrogate \\u%04x", cp);
        }
        if (cp == 0) {
            free(o);
            return json_fail(j, "\\u0000 inside a string");
        }
        k += put_utf8(o + k, cp);
    }
    o[k] = '\0';
    j->pos = end + 1;
    *out = o;
    return DTNN_OK;
}

/* A non-negative integer without sign, fraction, exponent or leading zeros. */
dtnn_status json_uint(json_reader *j, uint64_t *out)
{
    int c = json_peek(j);
    if (c < '0' || c > '9')
        return json_fail(j, "expected a non-negative integer");
    size_t start = j->pos;
    uint64_t v = 0;
    while (j->pos < j->n && j->s[j->pos] >= '0' && j->s[j->pos] <= '9') {
        unsigned d = (unsigned)(j->s[j->pos] - '0');
        if (v > (UINT64_MAX - d) / 10)
            return json_fail(j, "integer too large");
        v = v * 10 + d;
        j->pos++;
    }
    if (j->s[start] == '0' && j->pos - start > 1)
        return json_fail(j, "integer with a leading zero");
    if (j->pos < j->n && (j->s[j->pos] == '.' || j->s[j->pos] == 'e' || j->s[j->pos] == 'E'))
        return json_fail(j, "expected an integer, found a fraction or exponent");
    *out = v;
    return DTNN_OK;
}

/* [u, u, ...] with at most max entries. */
dtnn_status json_uint_array(json_reader *j, uint64_t *v, int max, int *n, const char *what)
{
    *n = 0;
    dtnn_status st = json_expect(j, '[');
    if (st)
        return st;
    if (json_peek(j) == ']') {
        j->pos++;
        return DTNN_OK;
    }
    for (;;) {
        if (*n == max)
            return json_fail(j, "%s has more than %d entries", what, max);
        if ((st = json_uint(j, &v[(*n)++])) != DTNN_OK)
            return st;
        int c = json_peek(j);
        if (c == ']') {
            j->pos++;
            return DTNN_OK;
        }
        if ((st = json_expect(j, ',')) != DTNN_OK)
            return st;
    }
}

dtnn_status json_members(json_reader *j, json_member_fn member, void *ctx)
{
    dtnn_status st = json_expect(j, '{');
    if (st)
        return st;
    if (json_peek(j) == '}') {
        j->pos++;
        return DTNN_OK;
    }
    for (;;) {
        char *key;
        if ((st = json_string_dup(j, &key)) != DTNN_OK)
            return st;
        if ((st = json_expect(j, ':')) != DTNN_OK || (st = member(j, key, ctx)) != DTNN_OK) {
            free(key);
            return st;
        }
        free(key);
        int c = json_peek(j);
        if (c == '}') {
            j->pos++;
            return DTNN_OK;
        }
        if ((st = json_expect(j, ',')) != DTNN_OK)
            return st;
    }
}

/* RFC 3629: no overlong forms, no surrogates, nothing above U+10FFFF. */
int json_utf8_valid(const unsigned char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        unsigned char c = s[i];
        size_t len = c < 0x80 ? 1 : (c >= 0xC2 && c <= 0xDF) ? 2 : (c >= 0xE0 && c <= 0xEF) ? 3
                   : (c >= 0xF0 && c <= 0xF4) ? 4 : 0;
        if (!len || i + len > n)
            return 0;
        for (size_t k = 1; k < len; k++)
            if ((s[i + k] & 0xC0) != 0x80)
                return 0;
        if ((c == 0xE0 && s[i + 1] < 0xA0) || (c == 0xED && s[i + 1] > 0x9F) ||
            (c == 0xF0 && s[i + 1] < 0x90) || (c == 0xF4 && s[i + 1] > 0x8F))
            return 0;
        i += len;
    }
    return 1;
}