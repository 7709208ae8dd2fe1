/*
 * cli_options.c — see cli_options.h. Values are validated here (integers, finite numbers), so
 * commands read them without further checks.
 */
#define _XOPEN_SOURCE 700

#include "cli_options.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static cli_opt *find(cli_opt *opts, int n, const char *name, size_t len)
{
    for (int i = 0; i < n; i++)
        if (strlen(opts[i].name) == len && !strncmp(opts[i].name, name, len))
            return &opts[i];
    return NULL;
}

static int check_value(const char *command, const cli_opt *o, const char *v)
{
    char *end;
    errno = 0;
    if (o->kind == OPT_INT) {
        long long x = strtoll(v, &end, 10);
        (void)x;
        if (!*v || *end || errno) {
            fprintf(stderr, "dtnn %s: --%s needs an integer, got '%s'\n", command, o->name, v);
            return 2;
        }
    } else if (o->kind == OPT_FLOAT) {
        double x = strtod(v, &end);
        if (!*v || *end || errno || !isfinite(x)) {
            fprintf(stderr, "dtnn %s: --%s needs a finite number, got '%s'\n", command, o->name,
                    v);
            return 2;
        }
    }
    return 0;
}

int cli_parse(const char *command, cli_opt *opts, int n_opts, int argc, char **argv, int first)
{
    for (int i = 0; i < n_opts; i++) {
        opts[i].value = opts[i].default_value;
        opts[i].given = 0;
    }
    for (int i = first; i < argc; i++) {
        const char *a = argv[i];
        if (strncmp(a, "--", 2) || !a[2]) {
            fprintf(stderr, "dtnn %s: unexpected argument '%s' (options start with --; see "
                    "dtnn %s --help)\n", command, a, command);
            return 2;
        }
        const char *name = a + 2, *eq = strchr(name, '=');
        size_t len = eq ? (size_t)(eq - name) : strlen(name);
        cli_opt *o = find(opts, n_opts, name, len);
        if (!o) {
            fprintf(stderr, "dtnn %s: unknown option '--%.*s' (see dtnn %s --help)\n", command,
                    (int)len, name, command);
            return 2;
        }
        if (o->given && o->kind != OPT_STRINGS) {
            fprintf(stderr, "dtnn %s: --%s given twice\n", command, o->name);
            return 2;
        }
        if (o->kind == OPT_STRINGS && o->given == CLI_MAX_VALUES) {
            fprintf(stderr, "dtnn %s: --%s given more than %d times\n", command, o->name,
                    CLI_MAX_VALUES);
            return 2;
        }
        const char *v;
        if (o->kind == OPT_FLAG) {
            if (eq) {
                fprintf(stderr, "dtnn %s: --%s takes no value\n", command, o->name);
                return 2;
            }
            v = "1";
        } else if (eq) {
            v = eq + 1;
        } else {
            if (i + 1 >= argc) {
                fprintf(stderr, "dtnn %s: --%s needs a value\n", command, o->name);
                return 2;
            }
            v = argv[++i];
        }
        if (check_value(command, o, v))
            return 2;
        o->value = v;
        o->given = o->kind == OPT_STRINGS ? o->given + 1 : 1;   /* OPT_STRINGS: a count */
    }
    for (int i = 0; i < n_opts; i++)
        if (opts[i].required && !opts[i].given) {
            fprintf(stderr, "dtnn %s: --%s is required (see dtnn %s --help)\n", command,
                    opts[i].name, command);
            return 2;
        }
    return 0;
}

void cli_usage(const char *command, const char *summary, const cli_opt *opts, int n_opts)
{
    printf("usage: dtnn %s [options]\n%s\n\noptions:\n", command, summary);
    for (int i = 0; i < n_opts; i++) {
        const cli_opt *o = &opts[i];
        char left[64];
        snprintf(left, sizeof left, "--%s%s", o->name,
                 o->kind == OPT_FLAG      ? ""
                 : o->kind == OPT_STRING  ? " S"
                 : o->kind == OPT_STRINGS ? " S (repeatable)"
                 : o->kind == OPT_INT     ? " N"
                                          : " X");
        printf("  %-22s %s", left, o->help);
        if (o->required)
            printf(" (required)");
        else if (o->default_value && o->kind != OPT_FLAG)
            printf(" [default: %s]", o->default_value);
        printf("\n");
    }
}

int cli_start(const char *command, const char *summary, cli_opt *opts, int n_opts, int argc,
              char **argv)
{
    for (int i = 2; i < argc; i++)
        if (!strcmp(argv[i], "--help")) {
            cli_usage(command, summary, opts, n_opts);
            return 0;
        }
    return cli_parse(command, opts, n_opts, argc, argv, 2) ? 2 : -1;
}

static const cli_opt *get(const cli_opt *opts, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(opts[i].name, name))
            return &opts[i];
    fprintf(stderr, "dtnn: internal error: no option '%s'\n", name);
    abort();
}

const char *cli_str(const cli_opt *opts, int n, const char *name)
{
    return get(opts, n, name)->value;
}
int64_t cli_int(const cli_opt *opts, int n, const char *name)
{
    const char *v = get(opts, n, name)->value;
    return v ? strtoll(v, NULL, 10) : 0;
}
double cli_float(const cli_opt *opts, int n, const char *name)
{
    const char *v = get(opts, n, name)->value;
    return v ? strtod(v, NULL) : 0.0;
}
int cli_flag(const cli_opt *opts, int n, const char *name)
{
    const char *v = get(opts, n, name)->value;
    return v && !strcmp(v, "1");
}
int cli_given(const cli_opt *opts, int n, const char *name) { return get(opts, n, name)->given; }

int cli_usage_error(const char *command, const char *fmt, const char *value)
{
    fprintf(stderr, "dtnn %s: ", command);
    fprintf(stderr, fmt, value);
    fprintf(stderr, "\n");
    return 2;
}

int cli_fail(const char *command, const dtnn_error *err)
{
    fprintf(stderr, "dtnn %s: %s\n", command, err->message);
    return 1;
}

int cli_exit_code(const dtnn_error *err)
{
    return err && err->code == DTNN_ERR_COMM ? CLI_EXIT_COMM : CLI_EXIT_ERROR;
}

int cli_parse_chw(const char *s, int *c, int *h, int *w)
{
    char extra;
    return !(s && sscanf(s, "%dx%dx%d%c", c, h, w, &extra) == 3 && *c > 0 && *h > 0 && *w > 0);
}

int cli_bucket_mb(const char *s, double *mb)
{
    if (s && !strcmp(s, "auto")) {
        *mb = DTNN_BUCKET_AUTO;
        return 0;
    }
    char *end;
    double v = s ? strtod(s, &end) : 0;
    if (!s || end == s || *end || !(v > 0) || !isfinite(v))
        return -1;
    *mb = v;
    return 0;
}

int cli_threads(const char *command, const cli_opt *opts, int n_opts, const dtnn_comm *comm)
{
    dtnn_comm *own = comm ? NULL : dtnn_comm_create_single();
    const dtnn_comm *c = comm ? comm : own;
    int cores = c ? dtnn_comm_cores(c) : 1;
    int sharing = c ? dtnn_comm_local_size(c) : 1;
    dtnn_comm_free(own);
    int64_t t = cli_int(opts, n_opts, "threads");
    if (t < 0)
        return cli_usage_error(command, "--threads must be 0 (the cores given) or positive, "
                               "not %s", cli_str(opts, n_opts, "threads")), -2;
    if (t == 0)
        return cores;
    if (t > 1 && t > cores) {
        fprintf(stderr, "dtnn %s: --threads %lld would oversubscribe the %d core%s given to this "
                "process (its CPU affinity%s); use --threads %d or fewer%s\n", command,
                (long long)t, cores, cores == 1 ? "" : "s",
                sharing > 1 ? ", shared with the other ranks on this node" : "", cores,
                sharing > 1 ? ", or fewer ranks per node" : "");
        return -2;
    }
    return (int)t;
}

int cli_all_ok(dtnn_comm *comm, int ok)
{
    if (!comm || dtnn_comm_size(comm) == 1)
        return ok;
    double failed = ok ? 0.0 : 1.0;
    dtnn_error err = {0};
    if (dtnn_comm_allreduce_sum_f64(comm, &failed, 1, &err))
        dtnn_comm_abort(comm, 2, err.message);
    return failed == 0.0;
}

int cli_trace_start(const char *command, const char *path, dtnn_comm *comm, dtnn_trace **out,
                    dtnn_error *err)
{
    *out = NULL;
    /* A rank without --trace would skip the clock measurement the others wait in. */
    int everyone = cli_all_ok(comm, path != NULL), no_one = cli_all_ok(comm, path == NULL);
    if (!everyone && !no_one) {
        if (dtnn_comm_rank(comm) == 0)
            fprintf(stderr, "dtnn %s: --trace must be given to every rank or to none\n",
                    command);
        return 2;
    }
    if (!path)
        return -1;
    /* Rank 0 writes the file: it checks the path before the run, and every rank stops with it. */
    int rank = dtnn_comm_rank(comm);
    int writable = rank != 0 || dtnn_file_check_output(path, "trace", err) == DTNN_OK;
    if (!cli_all_ok(comm, writable)) {
        if (rank != 0)
            dtnn_error_set(err, DTNN_ERR_IO, "rank 0 cannot write the trace '%s'", path);
        return 1;
    }
    *out = dtnn_trace_create(comm, 0, err);
    return *out ? -1 : 1;
}

int cli_trace_finish(const char *command, const char *path, dtnn_comm *comm, dtnn_trace *t,
                     int rc, dtnn_error *err)
{
    if (!t)
        return rc;
    dtnn_error e = {0};
    if (rc == 1) {
        /* The ranks may no longer meet: each writes its own file. */
        if (!dtnn_trace_write_local(t, path, &e))
            fprintf(stderr, "dtnn %s: rank %d's trace up to the failure: %s.rank%d\n", command,
                    dtnn_comm_rank(comm), path, dtnn_comm_rank(comm));
        return rc;
    }
    if (dtnn_trace_write(t, comm, path, &e)) {
        *err = e;
        return 1;
    }
    if (dtnn_comm_rank(comm) == 0)
        printf("trace: %s (%d rank%s; Perfetto or chrome://tracing, scripts/trace_plot)\n",
               path, dtnn_comm_size(comm), dtnn_comm_size(comm) == 1 ? "" : "s");
    return rc;
}

const char *cli_device(const char *command, const cli_opt *opts, int n_opts, int *rc)
{
    const char *name = cli_given(opts, n_opts, "device") ? cli_str(opts, n_opts, "device")
                                                          : getenv("DTNN_DEVICE");
    if (!name || !*name)
        name = "cpu";
    *rc = 0;
    for (int i = 0; i < dtnn_device_count(); i++) {
        int usable;
        char why[256];
        /* only the device asked for is made and checked: probing the others would start a
         * GPU for a cpu run */
        if (strcmp(dtnn_device_name(i, NULL, NULL, 0), name))
            continue;
        dtnn_device_name(i, &usable, why, sizeof why);
        if (!usable) {
            fprintf(stderr, "dtnn %s: device '%s': %s\n", command, name, why);
            *rc = 1;
            return NULL;
        }
        return name;
    }
    *rc = cli_usage_error(command, "unknown device '%s' (dtnn devices lists them)", name);
    return NULL;
}

int cli_precision(const char *command, const cli_opt *opts, int n_opts, dtnn_precision *out)
{
    dtnn_error e = {0};
    if (dtnn_precision_parse(cli_str(opts, n_opts, "precision"), out, &e))
        return cli_usage_error(command, "--precision: %s", e.message);
    return 0;
}

int cli_strs(const char *name, int argc, char **argv, int first,
             const char *values[CLI_MAX_VALUES])
{
    const size_t len = strlen(name);
    int n = 0;
    for (int i = first; i < argc && n < CLI_MAX_VALUES; i++) {
        const char *a = argv[i];
        if (strncmp(a, "--", 2) || strncmp(a + 2, name, len))
            continue;
        if (a[2 + len] == '=')
            values[n++] = a + 3 + len;
        else if (!a[2 + len] && i + 1 < argc)
            values[n++] = argv[++i];
    }
    return n;
}

/* An ONNX --model brings its weights: they stand in for --load (eval, predict) and --init. */
int cli_is_onnx(const char *spec)
{
    size_t n = spec ? strlen(spec) : 0;
    return n > 5 && !strcmp(spec + n - 5, ".onnx");
}

/* --load is required unless the model is an ONNX file. Returns -1, or the usage exit code. */
int cli_need_load(const cli_opt *o, int n, const char *cmd)
{
    if (cli_given(o, n, "load") || cli_is_onnx(cli_str(o, n, "model")))
        return -1;
    return cli_usage_error(cmd, "%s", "--load CHECKPOINT is required (unless --model is an "
                           ".onnx file, which brings its weights)");
}

/* The weights of eval and predict: --load's checkpoint (and its normalisation; with --ema its
 * weights' average), else the ONNX model's initializers. */
dtnn_status cli_load_weights(const cli_opt *o, int n, dtnn_model *m, dtnn_dataset *norm,
                             dtnn_error *err)
{
    if (cli_flag(o, n, "ema") && !cli_given(o, n, "load"))
        return dtnn_error_set(err, DTNN_ERR_ARG, "--ema reads the average from a checkpoint: "
                              "give --load");
    if (cli_given(o, n, "load")) {
        dtnn_status st = dtnn_checkpoint_load(cli_str(o, n, "load"), m, NULL, NULL, norm, err);
        if (!st && cli_flag(o, n, "ema"))
            st = dtnn_checkpoint_load_average(cli_str(o, n, "load"), m, err);
        return st;
    }
    return dtnn_onnx_load_weights(cli_str(o, n, "model"), m, err);
}

/* Where a path leads: its device and inode when it exists, else (an output still to be
 * written) the real path of its folder and its own name. */
typedef struct {
    int exists;
    dev_t dev;
    ino_t ino;
    char where[PATH_MAX + 256];
} path_identity;

static int path_identify(const char *path, path_identity *id)
{
    memset(id, 0, sizeof *id);
    struct stat sb;
    if (stat(path, &sb) == 0) {
        id->exists = 1;
        id->dev = sb.st_dev;
        id->ino = sb.st_ino;
        return 1;
    }
    const char *slash = strrchr(path, '/');
    char dir[PATH_MAX], real[PATH_MAX];
    if (!slash)
        snprintf(dir, sizeof dir, ".");
    else if (slash == path)
        snprintf(dir, sizeof dir, "/");
    else
        snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
    if (!realpath(dir, real))
        return 0;   /* its folder does not exist: it cannot be another option's file */
    snprintf(id->where, sizeof id->where, "%s/%s", real, slash ? slash + 1 : path);
    return 1;
}

static int same_file(const path_identity *a, const path_identity *b)
{
    if (a->exists != b->exists)
        return 0;
    return a->exists ? a->dev == b->dev && a->ino == b->ino : !strcmp(a->where, b->where);
}

int cli_distinct_paths(const char *command, const cli_path *paths, int n)
{
    for (int i = 0; i < n; i++) {
        path_identity a;
        if (!paths[i].path || !path_identify(paths[i].path, &a))
            continue;
        for (int j = i + 1; j < n; j++) {
            path_identity b;
            if (!(paths[i].output || paths[j].output) || !paths[j].path ||
                !path_identify(paths[j].path, &b) || !same_file(&a, &b))
                continue;
            fprintf(stderr, "dtnn %s: %s '%s' and %s '%s' name the same file, which this "
                    "command would %s; give %s different path\n", command, paths[i].option,
                    paths[i].path, paths[j].option, paths[j].path,
                    paths[i].output && paths[j].output ? "write twice" : "overwrite while "
                    "reading it", paths[i].output && paths[j].output ? "each output a" :
                    "the output a");
            return CLI_EXIT_USAGE;
        }
    }
    return -1;
}
