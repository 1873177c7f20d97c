/*
 * time_opts.c - --device and --objective for replay, plan and trace, and
 * the step-time lines they add (remat/time.h; src/report/time_report.c).
 */
#include "time_opts.h"

#include <string.h>

void remat_cli_time_init(remat_cli_time *T)
{
    memset(T, 0, sizeof *T);
    T->objective = REMAT_OBJECTIVE_FLOPS;
}

int remat_cli_time_option(const char *cmd, int c, const char *arg, int objective_ok, remat_cli_time *T)
{
    if (c == REMAT_TOPT_DEVICE) {
        if (T->device_arg)
            return remat_cli_usage_error(cmd, "--device given twice");
        if (!*arg)
            return remat_cli_usage_error(cmd, "--device: empty name");
        T->device_arg = arg;
        return REMAT_EXIT_OK;
    }
    if (c == REMAT_TOPT_OBJECTIVE) {
        if (!objective_ok)
            return remat_cli_usage_error(cmd, "--objective applies to the planning commands (plan)");
        if (T->have_objective)
            return remat_cli_usage_error(cmd, "--objective given twice");
        T->have_objective = 1;
        if (strcmp(arg, "flops") == 0)
            T->objective = REMAT_OBJECTIVE_FLOPS;
        else if (strcmp(arg, "time") == 0)
            T->objective = REMAT_OBJECTIVE_TIME;
        else if (strcmp(arg, "step-time") == 0)
            T->objective = REMAT_OBJECTIVE_STEP_TIME;
        else
            return remat_cli_usage_error(cmd, "--objective: '%s' is not one of flops, time, step-time", arg);
        return REMAT_EXIT_OK;
    }
    return -1;
}

int remat_cli_time_load(const char *cmd, remat_cli_time *T, remat_plan_options *o)
{
    if (T->objective != REMAT_OBJECTIVE_FLOPS && !T->device_arg)
        return remat_cli_usage_error(cmd, "--objective %s needs --device NAME|FILE",
                                     T->objective == REMAT_OBJECTIVE_TIME ? "time" : "step-time");
    if (T->device_arg) {
        remat_err err;
        remat_err_init(&err);
        if (remat_device_resolve(T->device_arg, &T->dev, &err) != REMAT_OK) {
            /* A bad preset name is a bad command line; a bad file, bad input. */
            if (err.code == REMAT_EINVAL && strncmp(err.msg, "unknown device", 14) == 0)
                return remat_cli_usage_error(cmd, "--device: %s", err.msg);
            return remat_cli_fail(&err);
        }
        T->have_device = 1;
    }
    if (o) {
        o->objective = T->objective;
        o->device = T->have_device ? &T->dev : NULL;
    }
    return REMAT_EXIT_OK;
}

int remat_cli_time_append(const remat_cli_time *T, const remat_analysis *a, const remat_schedule *s,
                          const remat_exec_extras *x, int json, char **text, size_t *len)
{
    if (!T->have_device)
        return REMAT_EXIT_OK;
    remat_err err;
    remat_err_init(&err);
    remat_op_times t;
    remat_timeline tl;
    memset(&tl, 0, sizeof tl);
    char *part = NULL;
    size_t plen = 0;
    remat_status st = remat_op_times_init(a, &T->dev, &t, &err);
    if (st == REMAT_OK) {
        st = remat_timeline_run(a, s, x, &T->dev, &t, &tl, &err);
        if (st == REMAT_OK) {
            remat_report_input in = {.a = a, .s = s, .timeline = &tl, .device = &T->dev, .op_times = &t};
            part = remat_report_write(REMAT_DOC_STEP_TIME, &in, remat_cli_format(REMAT_DOC_STEP_TIME, json), &plen,
                                      &err);
        }
        remat_timeline_destroy(&tl);
        remat_op_times_destroy(&t);
    }
    remat_buf b;
    remat_buf_init(&b);
    if (part && json) {
        if (*len < 2 || (*text)[*len - 2] != '}' || (*text)[*len - 1] != '\n') {
            remat_free(part);
            part = NULL;
            remat_err_set(&err, REMAT_EINTERNAL, "report does not end with an object");
        } else {
            remat_buf_putn(&b, *text, *len - 2);
            remat_buf_puts(&b, ",\n \"time\": ");
            remat_buf_puts(&b, part);
            remat_buf_puts(&b, "}\n");
        }
    } else if (part) {
        remat_buf_putn(&b, *text, *len);
        remat_buf_puts(&b, part);
    }
    const int made = part != NULL;
    remat_free(part);
    remat_free(*text);
    *text = NULL;
    if (made)
        *text = remat_buf_finish(&b, len, &err, "report");
    else
        remat_buf_destroy(&b);
    return *text ? REMAT_EXIT_OK : remat_cli_fail(&err);
}
