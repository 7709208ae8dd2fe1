/*
 * cli_options.c — see cli_options.h. Values are validated here (integers, finite numbers), so
 * commands read them without further checks.
 */
#include "cli_options.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
        if (o->given) {
            fprintf(stderr, "dtnn %s: --%s given twice\n", command, o->name);
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
        o->given = 1;
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
                 o->kind == OPT_FLAG ? "" : (o->kind == OPT_STRING ? " S" :
                                             (o->kind == OPT_INT ? " N" : " X")));
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
