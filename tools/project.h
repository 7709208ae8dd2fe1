/*
 * project.h — `dtnn bench --project`: the scaling projection printed after a profiled
 * one-rank benchmark (tools/project.c; the model is src/perf/projection.c).
 */
#ifndef DTNN_PROJECT_H
#define DTNN_PROJECT_H

#include <stdint.h>

#include "cli_options.h"
#include "dtnn.h"

/* Checks --project and the link and compute options before anything is measured; returns 0,
 * or 2 after printing a usage error. */
int project_check_options(const cli_opt *o, int n);
/* Prints the projection for model m, profiled over `steps` steps of step_seconds each. */
int project_run(const cli_opt *o, int n, dtnn_model *m, double step_seconds, int64_t steps,
                int batch);

#endif
