/*
 * fuzz_cli.c — libFuzzer harness for the command-line option parser (tools/cli_options.c): the
 * bytes, split at newlines, are the arguments of a command with every kind of option, then the
 * typed getters, the CxHxW parser and the --project grid parser read what was accepted.
 */
#include <stdlib.h>
#include <string.h>

#include "../tools/cli_options.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    cli_opt opts[] = {
        {"model", OPT_STRING, NULL, "model", 1, NULL, 0},
        {"steps", OPT_INT, "20", "steps", 0, NULL, 0},
        {"lr", OPT_FLOAT, "0.1", "lr", 0, NULL, 0},
        {"input", OPT_STRING, NULL, "CxHxW", 0, NULL, 0},
        {"quiet", OPT_FLAG, NULL, "quiet", 0, NULL, 0},
    };
    const int n_opts = (int)(sizeof opts / sizeof opts[0]);
    char *text = malloc(size + 1);
    char *argv[66];
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    int argc = 0;
    argv[argc++] = "dtnn";
    argv[argc++] = "fuzz";
    for (char *p = text; argc < 64;) {
        argv[argc++] = p;
        char *nl = strchr(p, '\n');
        if (!nl)
            break;
        *nl = '\0';
        p = nl + 1;
    }
    argv[argc] = NULL;
    if (cli_parse("fuzz", opts, n_opts, argc, argv, 2) == 0) {
        (void)cli_int(opts, n_opts, "steps");
        (void)cli_float(opts, n_opts, "lr");
        (void)cli_flag(opts, n_opts, "quiet");
        int c, h, w;
        if (cli_given(opts, n_opts, "input")) {
            (void)cli_parse_chw(cli_str(opts, n_opts, "input"), &c, &h, &w);
            /* The same string as a --project NODES,GBITS grid. */
            int nodes[8], n_nodes, n_gbits;
            double gbits[4];
            dtnn_error err;
            (void)dtnn_project_parse_grid(cli_str(opts, n_opts, "input"), nodes, 8, &n_nodes,
                                          gbits, 4, &n_gbits, &err);
        }
    }
    free(text);
    return 0;
}
