/*
 * time_opts.h - the step-time options the planning commands share:
 * --device NAME|FILE (a preset or a remat-device file) and
 * --objective flops|time, and the step-time lines they add to a report.
 */
#ifndef REMAT_CLI_TIME_OPTS_H
#define REMAT_CLI_TIME_OPTS_H

#include "cli.h"

enum { REMAT_TOPT_DEVICE = 700, REMAT_TOPT_OBJECTIVE };

#define REMAT_CLI_TIME_LONG_OPTS                            \
    {"device", required_argument, NULL, REMAT_TOPT_DEVICE}, \
    {"objective", required_argument, NULL, REMAT_TOPT_OBJECTIVE}

typedef struct remat_cli_time {
    const char *device_arg;
    int have_device;
    remat_device dev;
    remat_objective objective;
    int have_objective;
} remat_cli_time;

void remat_cli_time_init(remat_cli_time *T);

/* Handles option c if it is a time option: REMAT_EXIT_OK or a usage
 * error's exit code; -1 when c is not one. objective_ok: the command plans
 * (else --objective is refused). */
int remat_cli_time_option(const char *cmd, int c, const char *arg, int objective_ok, remat_cli_time *T);

/* After parsing: reads the device (an input error naming the file and the
 * JSON path) and refuses --objective time without one. Sets o's objective
 * and device when o is not NULL. Returns an exit code. */
int remat_cli_time_load(const char *cmd, remat_cli_time *T, remat_plan_options *o);

/* With a device: appends the step-time summary of s to a report document
 * (text: its lines; JSON: a "time" member before the report's closing
 * brace). *text is replaced; returns an exit code (NULL *text on failure,
 * the error printed). Without a device, does nothing. */
int remat_cli_time_append(const remat_cli_time *T, const remat_analysis *a, const remat_schedule *s,
                          const remat_exec_extras *x, int json, char **text, size_t *len);

#endif
