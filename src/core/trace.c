/*
 * trace.c — the timeline of a run (--trace): spans recorded in memory on each rank, written
 * as one Chrome trace-event JSON file (Perfetto, chrome://tracing; scripts/trace_plot draws
 * it) with one process per rank (pid = rank) and two tracks each: tid 0, the main thread's
 * work (steps, data waits, forward and backward with their layers, blocking collectives, the
 * optimizer, checkpoints), and tid 1, gradient buckets in flight (async events: they overlap).
 *
 * Clocks: each rank records its own monotonic clock. At creation (perf/trace_ranks.c) the
 * ranks meet a few times (an all-reduce as a barrier, then an all-gather of every rank's
 * clock); a rank's offset to
 * rank 0 is the median over those rounds of its clock minus rank 0's, so every timestamp in
 * the file is on rank 0's clock, counted from rank 0's start. Leaving a barrier is not
 * simultaneous: the offsets are good to about one collective's latency (microseconds on one
 * host, tens of them over TCP), well below the spans that matter (layers, buckets).
 *
 * Writing: dtnn_trace_write (perf/trace_ranks.c, with the clock alignment: the parts that need
 * a communicator) is collective: every rank's events travel to rank 0 as one byte string
 * (trace_serialise, gathered), and rank 0 writes the merged file (trace_write_file). After a failure the ranks cannot meet,
 * so dtnn_trace_write_local writes each rank's own file (PATH.rank<R>, the same format with
 * that rank's offset applied); the files of one run merge by concatenating their traceEvents
 * arrays (scripts/trace_plot reads several).
 *
 * Memory: events are appended to an array that doubles as needed, up to max_events; later
 * events are counted, not stored, and the file says how many were dropped.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdarg.h>
#include <string.h>
#include <unistd.h>

#include "atomic_file.h"
#include "internal.h"
#include "trace.h"

#define TRACE_DEFAULT_MAX_EVENTS ((size_t)1 << 20)
#define TRACE_CLOCK_ROUNDS 7
#define TRACE_MAX_NOTES 16

typedef struct {
    double t0, t1;
    int64_t step, seq;
    int32_t name, op;       /* string ids; op -1: none */
    int32_t index, count;   /* bucket index of count; -1, 0: not a bucket */
    int32_t kind;
    int32_t pad;
} trace_event;

/* What one rank sends to rank 0: this header, its strings (NUL-terminated, in id order),
 * then its events. Every rank runs the same build, so the binary layout is shared. */
typedef struct {
    uint32_t magic;
    int32_t rank;
    uint32_t n_strings;
    uint32_t string_bytes;
    uint64_t n_events, dropped;
    double offset;          /* this rank's clock minus rank 0's */
    char host[64];
} rank_header;

enum { TRACE_MAGIC = 0x64747472 };

struct dtnn_trace {
    int rank, size;
    double origin;          /* rank 0's clock at creation */
    double offset;          /* this rank's clock minus rank 0's */
    char host[64];
    trace_event *events;
    size_t n_events, cap_events, max_events, dropped;
    /* interned names: pointer -> id by open addressing; the strings are copied */
    const char **keys;
    int32_t *ids;
    size_t cap_keys;
    char **strings;
    int32_t n_strings, cap_strings;
    char note_keys[TRACE_MAX_NOTES][32], note_values[TRACE_MAX_NOTES][256];
    int n_notes;
};

static const struct {
    const char *cat;
    int track;
} kinds[TRACE_N_KINDS] = {
    [TRACE_STEP] = {"step", 0},         [TRACE_DATA] = {"data", 0},
    [TRACE_FORWARD] = {"forward", 0},   [TRACE_LAYER_FWD] = {"layer-forward", 0},
    [TRACE_LOSS] = {"loss", 0},         [TRACE_BACKWARD] = {"backward", 0},
    [TRACE_LAYER_BWD] = {"layer-backward", 0}, [TRACE_GRAD_WAIT] = {"gradient-wait", 0},
    [TRACE_COLLECTIVE] = {"collective", 0}, [TRACE_BUCKET] = {"bucket", 1},
    [TRACE_OPTIMIZER] = {"optimizer", 0}, [TRACE_CHECKPOINT] = {"checkpoint", 0},
    [TRACE_EVAL] = {"eval", 0},
};

double trace_clock(const dtnn_trace *t) { return t ? dtnn__now() : 0.0; }
double dtnn_trace_clock(const dtnn_trace *t) { return trace_clock(t); }

static size_t hash_ptr(const void *p, size_t cap)
{
    uint64_t x = (uint64_t)(uintptr_t)p;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return (size_t)x & (cap - 1);
}

static int grow_keys(dtnn_trace *t)
{
    size_t cap = t->cap_keys ? t->cap_keys * 2 : 256;
    const char **keys = calloc(cap, sizeof *keys);
    int32_t *ids = malloc(cap * sizeof *ids);
    if (!keys || !ids) {
        free(keys);
        free(ids);
        return -1;
    }
    for (size_t i = 0; i < t->cap_keys; i++) {
        if (!t->keys[i])
            continue;
        size_t h = hash_ptr(t->keys[i], cap);
        while (keys[h])
            h = (h + 1) & (cap - 1);
        keys[h] = t->keys[i];
        ids[h] = t->ids[i];
    }
    free(t->keys);
    free(t->ids);
    t->keys = keys;
    t->ids = ids;
    t->cap_keys = cap;
    return 0;
}

/* The id of name, interned on first sight; -1 when out of memory. */
static int32_t intern(dtnn_trace *t, const char *name)
{
    if (!name)
        return -1;
    if (2 * (size_t)(t->n_strings + 1) > t->cap_keys && grow_keys(t))
        return -1;
    size_t h = hash_ptr(name, t->cap_keys);
    while (t->keys[h]) {
        if (t->keys[h] == name)
            return t->ids[h];
        h = (h + 1) & (t->cap_keys - 1);
    }
    if (t->n_strings == t->cap_strings) {
        int32_t cap = t->cap_strings ? t->cap_strings * 2 : 256;
        char **s = realloc(t->strings, (size_t)cap * sizeof *s);
        if (!s)
            return -1;
        t->strings = s;
        t->cap_strings = cap;
    }
    char *copy = dtnn__strdup(name);
    if (!copy)
        return -1;
    t->strings[t->n_strings] = copy;
    t->keys[h] = name;
    t->ids[h] = t->n_strings;
    return t->n_strings++;
}

static trace_event *next_event(dtnn_trace *t)
{
    if (t->n_events == t->cap_events) {
        size_t cap = DTNN_MIN(t->max_events, t->cap_events ? t->cap_events * 2 : 4096);
        trace_event *e = cap > t->cap_events ? realloc(t->events, cap * sizeof *e) : NULL;
        if (!e) {
            t->dropped++;
            return NULL;
        }
        t->events = e;
        t->cap_events = cap;
    }
    return &t->events[t->n_events++];
}

static void record(dtnn_trace *t, trace_kind kind, const char *name, const char *op, double t0,
                   double t1, int64_t step, int64_t seq, int index, int count)
{
    trace_event *e = next_event(t);
    if (!e)
        return;
    *e = (trace_event){.t0 = t0, .t1 = t1, .step = step, .seq = seq, .name = intern(t, name),
                       .op = intern(t, op), .index = index, .count = count, .kind = kind};
    if (e->name < 0) {
        t->n_events--;
        t->dropped++;
    }
}

void trace_span(dtnn_trace *t, trace_kind kind, const char *name, double t0, int64_t step)
{
    if (t)
        record(t, kind, name, NULL, t0, dtnn__now(), step, -1, -1, 0);
}

void trace_comm(dtnn_trace *t, trace_kind kind, const char *what, const char *op, double t0,
                double t1, int64_t step, int64_t seq, int index, int count)
{
    if (t)
        record(t, kind, what ? what : op, what ? op : NULL, t0, t1, step, seq, index, count);
}

void dtnn_trace_span(dtnn_trace *t, const char *name, double t0, double t1)
{
    if (t)
        record(t, TRACE_STEP, name, NULL, t0, t1, -1, -1, -1, 0);
}

void dtnn_trace_note(dtnn_trace *t, const char *key, const char *fmt, ...)
{
    if (!t || t->n_notes == TRACE_MAX_NOTES)
        return;
    snprintf(t->note_keys[t->n_notes], sizeof t->note_keys[0], "%s", key);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t->note_values[t->n_notes], sizeof t->note_values[0], fmt, ap);
    va_end(ap);
    t->n_notes++;
}

dtnn_trace *trace_alloc(int rank, int size, size_t max_events, dtnn_error *err)
{
    dtnn_trace *t = calloc(1, sizeof *t);
    if (!t) {
        dtnn_error_set(err, DTNN_ERR_NOMEM, "out of memory for the trace");
        return NULL;
    }
    t->rank = rank;
    t->size = size;
    t->max_events = max_events ? max_events : TRACE_DEFAULT_MAX_EVENTS;
    if (gethostname(t->host, sizeof t->host - 1))
        snprintf(t->host, sizeof t->host, "?");
    t->origin = dtnn__now();
    return t;
}

void trace_set_clock(dtnn_trace *t, double origin, double offset)
{
    t->origin = origin;
    t->offset = offset;
}

void dtnn_trace_free(dtnn_trace *t)
{
    if (!t)
        return;
    for (int32_t i = 0; i < t->n_strings; i++)
        free(t->strings[i]);
    free(t->strings);
    free(t->keys);
    free(t->ids);
    free(t->events);
    free(t);
}

unsigned char *trace_serialise(const dtnn_trace *t, size_t *bytes)
{
    rank_header h = {.magic = TRACE_MAGIC, .rank = t->rank, .n_strings = (uint32_t)t->n_strings,
                     .n_events = t->n_events, .dropped = t->dropped, .offset = t->offset};
    memcpy(h.host, t->host, sizeof h.host);
    size_t sbytes = 0;
    for (int32_t i = 0; i < t->n_strings; i++)
        sbytes += strlen(t->strings[i]) + 1;
    h.string_bytes = (uint32_t)sbytes;
    *bytes = sizeof h + sbytes + t->n_events * sizeof(trace_event);
    unsigned char *out = malloc(*bytes), *p = out;
    if (!out)
        return NULL;
    memcpy(p, &h, sizeof h);
    p += sizeof h;
    for (int32_t i = 0; i < t->n_strings; i++) {
        size_t len = strlen(t->strings[i]) + 1;
        memcpy(p, t->strings[i], len);
        p += len;
    }
    if (t->n_events)
        memcpy(p, t->events, t->n_events * sizeof(trace_event));
    return out;
}

static void put_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(f, "\\%c", *p);
        else if (*p < 0x20)
            fprintf(f, "\\u%04x", *p);
        else
            fputc(*p, f);
    }
    fputc('"', f);
}

/* One rank's part of the traceEvents array; *first tracks the commas. Returns -1 on a blob
 * that does not parse (which only a bug could make). */
static int write_rank(FILE *f, const unsigned char *blob, size_t bytes, double origin,
                      int *first, uint64_t *dropped, double *offset)
{
    rank_header h;
    if (bytes < sizeof h)
        return -1;
    memcpy(&h, blob, sizeof h);
    if (h.magic != TRACE_MAGIC || bytes != sizeof h + h.string_bytes +
                                               h.n_events * sizeof(trace_event))
        return -1;
    const char *sp = (const char *)blob + sizeof h;
    const char **names = malloc(sizeof *names * (h.n_strings ? h.n_strings : 1));
    if (!names)
        return -1;
    for (uint32_t i = 0, at = 0; i < h.n_strings; i++) {
        names[i] = sp + at;
        at += (uint32_t)strlen(sp + at) + 1;
    }
    h.host[sizeof h.host - 1] = '\0';
    const int r = h.rank;
    fprintf(f, "%s\n{\"ph\": \"M\", \"name\": \"process_name\", \"pid\": %d, \"args\": "
            "{\"name\": \"rank %d (", *first ? "" : ",", r, r);
    *first = 0;
    for (const char *c = h.host; *c; c++)
        if (*c != '"' && *c != '\\' && (unsigned char)*c >= 0x20)
            fputc(*c, f);
    fprintf(f, ")\"}},\n{\"ph\": \"M\", \"name\": \"process_sort_index\", \"pid\": %d, \"args\": "
            "{\"sort_index\": %d}},\n{\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": %d, "
            "\"tid\": 0, \"args\": {\"name\": \"compute\"}},\n{\"ph\": \"M\", \"name\": "
            "\"thread_name\", \"pid\": %d, \"tid\": 1, \"args\": {\"name\": \"gradient buckets\"}}",
            r, r, r, r);
    const unsigned char *ep = blob + sizeof h + h.string_bytes;
    for (uint64_t i = 0; i < h.n_events; i++) {
        trace_event e;
        memcpy(&e, ep + i * sizeof e, sizeof e);
        if (e.kind < 0 || e.kind >= TRACE_N_KINDS || e.name < 0 ||
            (uint32_t)e.name >= h.n_strings || (e.op >= 0 && (uint32_t)e.op >= h.n_strings))
            continue;
        double ts = (e.t0 - h.offset - origin) * 1e6, te = (e.t1 - h.offset - origin) * 1e6;
        const int async = kinds[e.kind].track == 1;
        for (int end = 0; end <= async; end++) {
            fprintf(f, ",\n{\"ph\": \"%s\", \"cat\": \"%s\", \"name\": ",
                    async ? (end ? "e" : "b") : "X", kinds[e.kind].cat);
            put_string(f, names[e.name]);
            fprintf(f, ", \"pid\": %d, \"tid\": %d, \"ts\": %.3f", r, kinds[e.kind].track,
                    end ? te : ts);
            if (async)
                fprintf(f, ", \"id\": \"%d.%lld\"", r, (long long)e.seq);
            else
                fprintf(f, ", \"dur\": %.3f", te - ts);
            if (end)
                fputc('}', f);
            else {
                fprintf(f, ", \"args\": {\"step\": %lld", (long long)e.step);
                if (e.seq >= 0)
                    fprintf(f, ", \"collective\": %lld", (long long)e.seq);
                if (e.op >= 0) {
                    fprintf(f, ", \"op\": ");
                    put_string(f, names[e.op]);
                }
                if (e.count > 0)
                    fprintf(f, ", \"bucket\": %d, \"of\": %d", e.index, e.count);
                fprintf(f, "}}");
            }
        }
    }
    free(names);
    *dropped = h.dropped;
    *offset = h.offset;
    return 0;
}

dtnn_status trace_write_file(const dtnn_trace *t, const char *path, unsigned char **blobs,
                             const size_t *sizes, int n, dtnn_error *err)
{
    atomic_file out;
    dtnn_status st = atomic_file_begin(&out, path, "trace", err);
    if (st)
        return st;
    FILE *f = out.fp;
    uint64_t *dropped = calloc((size_t)n, sizeof *dropped);
    double *offsets = calloc((size_t)n, sizeof *offsets);
    int first = 1, bad = !dropped || !offsets;
    fprintf(f, "{\"traceEvents\": [");
    for (int r = 0; r < n && !bad; r++)
        bad = write_rank(f, blobs[r], sizes[r], t->origin, &first, &dropped[r], &offsets[r]);
    fprintf(f, "\n],\n\"displayTimeUnit\": \"ms\",\n\"otherData\": {\"producer\": \"dtnn\", "
            "\"ranks\": %d", n);
    fprintf(f, ", \"clock_offsets_us\": [");
    for (int r = 0; r < n && !bad; r++)
        fprintf(f, "%s%.3f", r ? ", " : "", offsets[r] * 1e6);
    fprintf(f, "], \"dropped_events\": [");
    for (int r = 0; r < n && !bad; r++)
        fprintf(f, "%s%llu", r ? ", " : "", (unsigned long long)dropped[r]);
    fputc(']', f);
    for (int i = 0; i < t->n_notes; i++) {
        fputs(", ", f);
        put_string(f, t->note_keys[i]);
        fputs(": ", f);
        put_string(f, t->note_values[i]);
    }
    fprintf(f, "}}\n");
    free(dropped);
    free(offsets);
    if (bad) {
        atomic_file_abort(&out);
        return dtnn_error_set(err, DTNN_ERR_FORMAT, "trace: a rank's events did not arrive "
                              "intact");
    }
    return atomic_file_commit(&out, err);
}

dtnn_status dtnn_trace_write_local(dtnn_trace *t, const char *path, dtnn_error *err)
{
    size_t bytes = 0;
    unsigned char *mine = trace_serialise(t, &bytes);
    size_t len = strlen(path) + 24;
    char *name = malloc(len);
    if (!mine || !name) {
        free(mine);
        free(name);
        return dtnn_error_set(err, DTNN_ERR_NOMEM, "out of memory for the trace");
    }
    snprintf(name, len, "%s.rank%d", path, t->rank);
    dtnn_status st = trace_write_file(t, name, &mine, &bytes, 1, err);
    free(name);
    free(mine);
    return st;
}
