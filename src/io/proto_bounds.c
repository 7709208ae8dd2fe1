/*
 * proto_bounds.c — the nesting bound of proto_bounds.h, on the protobuf wire format
 * (protobuf.dev/programming-guides/encoding: a key varint of field number << 3 | wire type;
 * types 0 varint, 1 eight bytes, 2 a varint length and that many bytes, 5 four bytes; 3 and 4,
 * the deprecated groups, are not accepted, as ONNX has none). Iterative per level and
 * recursive only across levels, which the limit bounds.
 */
#include "proto_bounds.h"

typedef struct {
    int max_depth, deepest;
    uint64_t budget;    /* bytes the check may still scan */
    int over_budget;
} bounds_walk;

static int read_varint(const uint8_t **p, const uint8_t *end, uint64_t *out)
{
    uint64_t v = 0;
    for (int shift = 0; shift < 64 && *p < end; shift += 7) {
        uint8_t b = *(*p)++;
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *out = v;
            return 1;
        }
    }
    return 0;
}

/* Whether [p, end) is a sequence of well-formed fields, charged to walk's budget; with
 * descend, also descends into every length-delimited field that is itself a message, at
 * depth + 1. */
static int is_message(const uint8_t *p, const uint8_t *end, int depth, bounds_walk *walk,
                      int descend)
{
    if ((uint64_t)(end - p) > walk->budget) {
        walk->over_budget = 1;
        return 0;
    }
    walk->budget -= (uint64_t)(end - p);
    if (descend && depth > walk->deepest)
        walk->deepest = depth;
    while (p < end) {
        uint64_t key, len;
        if (!read_varint(&p, end, &key) || key >> 3 == 0 || key >> 3 > 0x1fffffff)
            return 0;
        switch (key & 7) {
        case 0:
            if (!read_varint(&p, end, &len))
                return 0;
            break;
        case 1:
        case 5: {
            const size_t width = (key & 7) == 1 ? 8 : 4;
            if ((size_t)(end - p) < width)
                return 0;
            p += width;
            break;
        }
        case 2:
            if (!read_varint(&p, end, &len) || len > (uint64_t)(end - p))
                return 0;
            if (descend && walk->deepest <= walk->max_depth &&
                is_message(p, p + len, depth + 1, walk, 0))
                is_message(p, p + len, depth + 1, walk, 1);
            p += len;
            break;
        default:
            return 0;
        }
        if (walk->over_budget || walk->deepest > walk->max_depth)
            return 1;
    }
    return 1;
}

proto_bounds_result proto_check_depth(const uint8_t *buf, size_t n, int max_depth, int *depth)
{
    /* A byte is scanned twice (is it a message, then its fields) at each level that encloses
     * it, so 2 (max_depth + 2) passes over the file bound the work of any file within the
     * limit; a real file needs a few (its large fields, tensor data, fail the message test
     * within a few bytes). */
    bounds_walk walk = {max_depth, 0, (uint64_t)n * 2u * (uint64_t)(max_depth + 2) + (1u << 20),
                        0};
    is_message(buf, buf + n, 0, &walk, 1);
    if (depth)
        *depth = walk.deepest;
    if (walk.deepest > max_depth)
        return PROTO_BOUNDS_TOO_DEEP;
    return walk.over_budget ? PROTO_BOUNDS_TOO_COSTLY : PROTO_BOUNDS_OK;
}
