/*
 * proto_bounds.h — a bound on how deeply a protobuf message nests, checked on the raw bytes
 * before protobuf-c decodes them. protobuf-c recurses once per level of nesting, so a file of
 * a few hundred kilobytes that nests thousands of levels (an ONNX attribute holding a graph
 * whose node holds a graph, ...) ran the stack out inside it (SIGSEGV).
 */
#ifndef DTNN_PROTO_BOUNDS_H
#define DTNN_PROTO_BOUNDS_H

#include <stddef.h>
#include <stdint.h>

/* The deepest nesting accepted. A real ONNX model uses 3 levels per nested subgraph (graph,
 * node, attribute) and a few for types; 64 allows about 20 subgraphs inside one another. */
#define PROTO_MAX_DEPTH 64

typedef enum {
    PROTO_BOUNDS_OK = 0,
    PROTO_BOUNDS_TOO_DEEP,   /* nests deeper than the limit */
    PROTO_BOUNDS_TOO_COSTLY  /* the check would pass over the file more than 2 (limit + 2) times */
} proto_bounds_result;

/*
 * How deeply buf [n] nests as protobuf wire format, without its schema: a length-delimited
 * field counts as a nested message when its bytes parse as a whole message (field keys, varints
 * and lengths all well formed); strings and raw tensor data almost never do for more than a
 * few bytes, and where one does by chance it only adds a level. The bytes of each level are
 * scanned twice per enclosing level, up to the limit, within a budget of 2 (max_depth + 2)
 * passes, so the check is linear in n. Sets *depth (may be NULL) to the depth reached, up to
 * max_depth + 1.
 */
proto_bounds_result proto_check_depth(const uint8_t *buf, size_t n, int max_depth, int *depth);

#endif
