/*
 * cli_options.h — a small table-driven option parser for the dtnn tool: every option has a
 * name, a kind, a default (shown by --help) and a help line. "--name value", "--name=value"
 * and boolean "--flag" are accepted; anything else is an error that names the argument.
 */
#ifndef DTNN_CLI_OPTIONS_H
#define DTNN_CLI_OPTIONS_H

#include <stdint.h>

#include "dtnn.h"

/* OPT_STRINGS: a string option that may be given several times (cli_strs). */
typedef enum { OPT_STRING, OPT_INT, OPT_FLOAT, OPT_FLAG, OPT_STRINGS } cli_opt_kind;

#define CLI_MAX_VALUES 32

typedef struct {
    const char *name;           /* without the leading "--" */
    cli_opt_kind kind;
    const char *default_value;  /* NULL: no default (optional or required) */
    const char *help;
    int required;
    /* parsed */
    const char *value;
    int given;
} cli_opt;

/* Parses argv[first..argc); returns 0, or prints one line to stderr and returns 2. */
int cli_parse(const char *command, cli_opt *opts, int n_opts, int argc, char **argv, int first);
void cli_usage(const char *command, const char *summary, const cli_opt *opts, int n_opts);
/* A command's start: prints the usage and returns 0 when --help is among the arguments,
 * returns 2 on a bad argument, else -1 (go on, with opts parsed from argv[2..]). */
int cli_start(const char *command, const char *summary, cli_opt *opts, int n_opts, int argc,
              char **argv);

const char *cli_str(const cli_opt *opts, int n_opts, const char *name);
int64_t cli_int(const cli_opt *opts, int n_opts, const char *name);
double cli_float(const cli_opt *opts, int n_opts, const char *name);
int cli_flag(const cli_opt *opts, int n_opts, const char *name);
int cli_given(const cli_opt *opts, int n_opts, const char *name);
/* The values of an OPT_STRINGS option, in order, from the arguments cli_parse accepted
 * (argv[first..argc)); returns how many (at most CLI_MAX_VALUES, which cli_parse enforces). */
int cli_strs(const char *name, int argc, char **argv, int first,
             const char *values[CLI_MAX_VALUES]);

/* ---- helpers shared by the commands ---- */

/* Prints "dtnn COMMAND: <fmt with value>" and returns 2 (a usage error). */
int cli_usage_error(const char *command, const char *fmt, const char *value);
/* Prints "dtnn COMMAND: <message>" and returns 1 (a runtime error). */
int cli_fail(const char *command, const dtnn_error *err);
/* Parses --bucket-mb: "auto" (DTNN_BUCKET_AUTO) or a positive size in MiB; 0 on success. */
int cli_bucket_mb(const char *s, double *mb);

/* The tool's exit codes. They sort failures into the two classes a supervisor must tell apart
 * (dtnn launch restarts on the transient one only): an error that a rerun on the same input
 * repeats, and a failure of the communication between ranks, which a restart on the hosts
 * still alive may get past. The message names the kind; the code only says which class. */
enum {
    CLI_EXIT_OK = 0,
    CLI_EXIT_ERROR = 1, /* permanent: bad input (ARG, IO, FORMAT, SHAPE), NONFINITE, NOMEM, ... */
    CLI_EXIT_USAGE = 2, /* permanent: a bad flag or value */
    CLI_EXIT_COMM = 3,  /* transient: DTNN_ERR_COMM (a peer lost, a stall past --stall-timeout) */
    CLI_EXIT_SIGNAL = 128 /* + N: stopped by signal N */
};
/* The exit code of a failed run with error err: CLI_EXIT_COMM for DTNN_ERR_COMM, else
 * CLI_EXIT_ERROR. An I/O error counts as permanent: a missing file and a share that went away
 * look the same from here, and restarting on a missing file would only fail again. */
int cli_exit_code(const dtnn_error *err);
/* Parses "CxHxW" into positive c, h, w; 0 on success. */
int cli_parse_chw(const char *s, int *c, int *h, int *w);
/* The --threads option: 0 takes the cores given to this rank (dtnn_comm_cores of comm, or of
 * this process when comm is NULL); more than that is refused, because threads that
 * oversubscribe cores cost far more than they gain. Returns the count, or -2 after printing a
 * usage error. */
int cli_threads(const char *command, const cli_opt *opts, int n_opts, const dtnn_comm *comm);

/* The --device option of every command that builds a model (cli_device reads it). */
#define CLI_DEVICE_OPTION                                                                       \
    {"device", OPT_STRING, NULL, "backend, as dtnn devices lists them: cpu, cpu-guarded, cuda, " \
     "... (default: $DTNN_DEVICE, else cpu)", 0, NULL, 0}
/* The --device option (default: the environment's DTNN_DEVICE, else "cpu"): the backend's name,
 * or NULL with *rc 2 (unknown: a usage error, printed) or 1 (not usable here, printed). */
const char *cli_device(const char *command, const cli_opt *opts, int n_opts, int *rc);
/* The --precision option of every command that computes with a model (cli_precision). */
#define CLI_PRECISION_OPTION                                                                    \
    {"precision", OPT_STRING, "fp32", "convolutions and fully connected layers in fp32 | bf16 " \
     "(bf16 inputs and weights, fp32 sums and master weights; tensor cores on cuda)", 0, NULL, 0}
/* --precision into *out; 0, or 2 after printing a usage error. */
int cli_precision(const char *command, const cli_opt *opts, int n_opts, dtnn_precision *out);
/* Whether ok holds on every rank (a collective: all ranks call it), so a usage error seen by
 * some ranks only ends them all instead of leaving the others waiting. */
int cli_all_ok(dtnn_comm *comm, int ok);
/* --trace PATH (NULL: not given): checks every rank gave it or none, then creates the trace
 * (collective). Returns -1 to go on, or an exit code (1: the error is in err; 2: usage). */
int cli_trace_start(const char *command, const char *path, dtnn_comm *comm, dtnn_trace **out,
                    dtnn_error *err);
/* After a run that ended with exit code rc: the merged trace written by rank 0 (rc 0, or a
 * signal's stop, which all ranks reach together), or after a failure each rank's own
 * PATH.rank<R>. Returns rc, or 1 when writing the merged file failed (err says why). */
int cli_trace_finish(const char *command, const char *path, dtnn_comm *comm, dtnn_trace *t,
                     int rc, dtnn_error *err);

/* One file a command names: the option as the user wrote it ("--save"; for messages), the
 * path (NULL: not given), and whether the command writes it. */
typedef struct {
    const char *option;
    const char *path;
    int output;
} cli_path;
/* Refuses a command whose options name one file twice where one of them writes it (`export
 * --load X --output X` would replace the checkpoint with the ONNX file; `train --save X --trace
 * X` would write both into one). Files are compared by device and inode where they exist, and
 * an output not yet written by the real path of its folder plus its name, so "X", "./X" and a
 * link to X are one file. Pairs that are meant to be one file (train's --resume and --save)
 * are not passed together. Returns -1 to go on, or 2 after printing a usage error. */
int cli_distinct_paths(const char *command, const cli_path *paths, int n);

/* The entries of an option table (or any array). */
#define N_OPTS(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* Commands that live in their own files. */
int cmd_bench(int argc, char **argv, dtnn_comm *comm);
int cmd_launch(int argc, char **argv);
/* cli_info.c */
int cmd_models(int argc, char **argv);
int cmd_info(int argc, char **argv);
int cmd_devices(int argc, char **argv);
/* An .onnx --model brings its weights: for eval and predict they stand in for --load (which
 * cli_need_load then does not require: -1, else the usage exit code), for train for --init. */
int cli_is_onnx(const char *spec);
int cli_need_load(const cli_opt *o, int n, const char *cmd);
/* --load's checkpoint (and its normalisation into norm, may be NULL), else the ONNX
 * initializers. */
dtnn_status cli_load_weights(const cli_opt *o, int n, dtnn_model *m, dtnn_dataset *norm,
                             dtnn_error *err);
int cmd_export(int argc, char **argv);
int cmd_predict(int argc, char **argv);   /* predict.c */
int cmd_import(int argc, char **argv);
int cmd_shard(int argc, char **argv);    /* shard.c */

#endif
