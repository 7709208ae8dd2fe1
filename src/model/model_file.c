/*
 * model_file.c — the plain-text model format: one [section] per layer, "key = value" lines.
 *
 *     # LeNet-5                         comments start with # or ;
 *     [input]                           first section: the per-sample input shape
 *     shape = 1x28x28
 *     [conv2d]                          a layer type (dtnn models --layers lists them)
 *     name = conv1                      optional; becomes the PyTorch tensor prefix
 *     filters = 6                       layer options, as dtnn_model_add takes them
 *     kernel = 5
 *     padding = 2
 *     [add]
 *     inputs = layer1.0.bn2, layer1.0.shortcut   earlier layer names or "input"; default: the
 *                                                 previous layer
 *
 * Parsing is strict: an unknown section or key, a bad value, a duplicate key or name, an unknown
 * input name, or a shape that does not fit (found when the model is built) is an error naming
 * file:line. Nothing is guessed.
 */
#include <ctype.h>
#include <errno.h>
#include <string.h>

#include "../core/file_input.h"
#include "model_internal.h"

enum { MAX_KEYS = 32, MAX_INPUTS = 16 };

typedef struct {
    const char *origin;         /* file name for messages */
    dtnn_model *m;
    int have_input;
    /* the section being read */
    char type[64];
    int line;                   /* of its header */
    const layer_ops *ops;
    void *scratch;              /* cfg used to validate each option as it is read */
    char name[96];
    char inputs[512];
    int inputs_line;
    char *keys[MAX_KEYS], *values[MAX_KEYS];
    int n_keys;
} parser;

static char *trim(char *s)
{
    while (isspace((unsigned char)*s))
        s++;
    char *e = s + strlen(s);
    while (e > s && isspace((unsigned char)e[-1]))
        *--e = '\0';
    return s;
}

static void section_clear(parser *p)
{
    for (int i = 0; i < p->n_keys; i++) {
        free(p->keys[i]);
        free(p->values[i]);
    }
    free(p->scratch);
    p->scratch = NULL;
    p->n_keys = 0;
    p->type[0] = p->name[0] = p->inputs[0] = '\0';
    p->ops = NULL;
}

static dtnn_status parse_shape(parser *p, int line, const char *v, dtnn_error *err)
{
    int c, h, w;
    char extra;
    if (sscanf(v, "%dx%dx%d%c", &c, &h, &w, &extra) != 3 || c <= 0 || h <= 0 || w <= 0 ||
        c > 1 << 20 || h > 1 << 20 || w > 1 << 20)
        return dtnn_error_set(err, DTNN_ERR_FORMAT, "%s:%d: shape '%s' is not CxHxW with "
                              "positive sizes (e.g. 1x28x28)", p->origin, line, v);
    p->m = dtnn_model_create(c, h, w);
    if (!p->m)
        return dtnn_error_set(err, DTNN_ERR_NOMEM, "out of memory");
    return DTNN_OK;
}

/* Resolves "a, b, input" into node ids. */
static int resolve_inputs(parser *p, int *ids, dtnn_error *err)
{
    char buf[512];
    snprintf(buf, sizeof buf, "%s", p->inputs);
    int n = 0;
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        char *t = trim(tok);
        if (n == MAX_INPUTS) {
            dtnn_error_set(err, DTNN_ERR_FORMAT, "%s:%d: more than %d inputs", p->origin,
                           p->inputs_line, MAX_INPUTS);
            return -1;
        }
        if (!strcmp(t, "input")) {
            ids[n++] = DTNN_INPUT;
            continue;
        }
        int id = dtnn_model_find(p->m, t);
        if (id < 0) {
            dtnn_error_set(err, DTNN_ERR_FORMAT, "%s:%d: input '%s' is not the name of an "
                           "earlier layer (or 'input')", p->origin, p->inputs_line, t);
            return -1;
        }
        ids[n++] = id;
    }
    if (n == 0) {
        dtnn_error_set(err, DTNN_ERR_FORMAT, "%s:%d: 'inputs' is empty", p->origin,
                       p->inputs_line);
        return -1;
    }
    return n;
}

static dtnn_status section_finish(parser *p, dtnn_error *err)
{
    if (!p->ops)
        return DTNN_OK;
    int ids[MAX_INPUTS], n_ids = 0;
    if (p->inputs[0] && (n_ids = resolve_inputs(p, ids, err)) < 0)
        return err->code;
    char where[160];
    snprintf(where, sizeof where, "%s:%d", p->origin, p->line);
    int id = model_add_layer(p->m, p->type, p->name[0] ? p->name : NULL,
                             (const char *const *)p->keys, (const char *const *)p->values,
                             p->n_keys, n_ids ? ids : NULL, n_ids, where, err);
    section_clear(p);
    return id < 0 ? err->code : DTNN_OK;
}

static dtnn_status parse_line(parser *p, int line, char *s, dtnn_error *err)
{
    char *hash = strpbrk(s, "#;");
    if (hash)
        *hash = '\0';
    s = trim(s);
    if (!*s)
        return DTNN_OK;
    if (*s == '[') {
        char *close = strchr(s, ']');
        if (!close || trim(close + 1)[0])
            return dtnn_error_set(err, DTNN_ERR_FORMAT, "%s:%d: malformed section header '%s'",
                                  p->origin, line, s);
        *close = '\0';
        char *type = trim(s + 1);
        if (p->have_input) {
            dtnn_status st = section_finish(p, err);
            if (st)
                return st;
        } else if (strcmp(type, "input")) {
            return dtnn_error_set(err, DTNN_ERR_FORMAT, "%s:%d: the first section must be "
                                  "[input] with shape = CxHxW", p->origin, line);
        }
        if (!strcmp(type, "input")) {
            if (p->have_input || p->m)
                return dtnn_error_set(err, DTNN_ERR_FORMAT, "%s:%d: a second [input] section",
                                      p->origin, line);
            p->line = line;
            snprintf(p->type, sizeof p->type, "input");
            return DTNN_OK;
        }
        p->ops = layer_ops_find(type);
        if (!p->ops)
            return dtnn_error_set(err, DTNN_ERR_FORMAT, "%s:%d: unknown layer type '%s' (dtnn "
                                  "models --layers lists them)", p->origin, line, type);
        snprintf(p->type, sizeof p->type, "%s", type);
        p->line = line;
        p->scratch = calloc(1, p->ops->cfg_size ? p->ops->cfg_size : 1);
        if (!p->scratch)
            return dtnn_error_set(err, DTNN_ERR_NOMEM, "out of memory");
        if (p->ops->defaults)
            p->ops->defaults(p->scratch);
        return DTNN_OK;
    }
    char *eq = strchr(s, '=');
    if (!eq)
        return dtnn_error_set(err, DTNN_ERR_FORMAT, "%s:%d: expected 'key = value' or "
                              "'[section]', got '%s'", p->origin, line, s);
    *eq = '\0';
    char *key = trim(s), *value = trim(eq + 1);
    if (!*key || !*value)
        return dtnn_error_set(err, DTNN_ERR_FORMAT, "%s:%d: empty key or value", p->origin,
                              line);
    if (!p->type[0])
        return dtnn_error_set(err, DTNN_ERR_FORMAT, "%s:%d: '%s' outside any section",
                              p->origin, line, key);
    if (!strcmp(p->type, "input") && !p->have_input) {
        if (strcmp(key, "shape"))
            return dtnn_error_set(err, DTNN_ERR_FORMAT, "%s:%d: unknown key '%s' in [input] "
                                  "(only shape = CxHxW)", p->origin, line, key);
        dtnn_status st = parse_shape(p, line, value, err);
        if (st)
            return st;
        p->have_input = 1;
        p->type[0] = '\0';
        return DTNN_OK;
    }
    if (!strcmp(key, "name") || !strcmp(key, "inputs") || !strcmp(key, "input")) {
        char *slot = key[0] == 'n' ? p->name : p->inputs;
        size_t cap = key[0] == 'n' ? sizeof p->name : sizeof p->inputs;
        if (slot[0])
            return dtnn_error_set(err, DTNN_ERR_FORMAT, "%s:%d: '%s' given twice", p->origin,
                                  line, key);
        if (strlen(value) >= cap)
            return dtnn_error_set(err, DTNN_ERR_FORMAT, "%s:%d: '%s' is too long", p->origin,
                                  line, key);
        snprintf(slot, cap, "%s", value);
        if (key[0] != 'n')
            p->inputs_line = line;
        return DTNN_OK;
    }
    for (int i = 0; i < p->n_keys; i++)
        if (!strcmp(p->keys[i], key))
            return dtnn_error_set(err, DTNN_ERR_FORMAT, "%s:%d: '%s' given twice", p->origin,
                                  line, key);
    if (p->n_keys == MAX_KEYS)
        return dtnn_error_set(err, DTNN_ERR_FORMAT, "%s:%d: too many options", p->origin, line);
    dtnn_error e;
    if (p->ops->set(p->scratch, key, value, &e) != DTNN_OK)
        return dtnn_error_set(err, DTNN_ERR_FORMAT, "%s:%d: [%s] %s", p->origin, line, p->type,
                              e.message);
    p->keys[p->n_keys] = dtnn__strdup(key);
    p->values[p->n_keys] = dtnn__strdup(value);
    if (!p->keys[p->n_keys] || !p->values[p->n_keys]) {
        free(p->keys[p->n_keys]);
        free(p->values[p->n_keys]);
        return dtnn_error_set(err, DTNN_ERR_NOMEM, "out of memory");
    }
    p->n_keys++;
    return DTNN_OK;
}

dtnn_model *dtnn_model_parse_string(const char *text, const char *origin, dtnn_error *err)
{
    parser p;
    memset(&p, 0, sizeof p);
    p.origin = origin ? origin : "<string>";
    char *copy = dtnn__strdup(text);
    if (!copy) {
        dtnn_error_set(err, DTNN_ERR_NOMEM, "out of memory");
        return NULL;
    }
    dtnn_status st = DTNN_OK;
    int line = 1;
    for (char *s = copy; s && !st; line++) {
        char *nl = strchr(s, '\n');
        if (nl)
            *nl = '\0';
        if (strlen(s) > 4000)
            st = dtnn_error_set(err, DTNN_ERR_FORMAT, "%s:%d: line too long", p.origin, line);
        else
            st = parse_line(&p, line, s, err);
        s = nl ? nl + 1 : NULL;
    }
    if (!st && !p.have_input)
        st = dtnn_error_set(err, DTNN_ERR_FORMAT, "%s: no [input] section with shape = CxHxW",
                            p.origin);
    if (!st)
        st = section_finish(&p, err);
    if (!st && dtnn_model_layer_count(p.m) == 0)
        st = dtnn_error_set(err, DTNN_ERR_FORMAT, "%s: the model has no layers", p.origin);
    section_clear(&p);
    free(copy);
    if (st) {
        dtnn_model_free(p.m);
        return NULL;
    }
    return p.m;
}

dtnn_model *dtnn_model_parse_file(const char *path, dtnn_error *err)
{
    FILE *f;
    if (file_open_input(path, "model file", &f, NULL, err))
        return NULL;
    enum { MAX_MODEL_FILE = 16 << 20 };
    char *text = malloc(MAX_MODEL_FILE + 1);
    size_t n = text ? fread(text, 1, MAX_MODEL_FILE + 1, f) : 0;
    int bad = ferror(f);
    fclose(f);
    if (!text || bad || n > MAX_MODEL_FILE) {
        free(text);
        dtnn_error_set(err, text ? DTNN_ERR_FORMAT : DTNN_ERR_NOMEM,
                       "cannot read model file '%s'%s", path,
                       n > MAX_MODEL_FILE ? ": larger than 16 MiB" : "");
        return NULL;
    }
    text[n] = '\0';
    if (memchr(text, '\0', n)) {
        free(text);
        dtnn_error_set(err, DTNN_ERR_FORMAT, "model file '%s' is not text (it has NUL bytes)",
                       path);
        return NULL;
    }
    dtnn_model *m = dtnn_model_parse_string(text, path, err);
    free(text);
    return m;
}
