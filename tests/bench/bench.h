/*
 * bench.h - what the benchmark files share (defined in bench_main.c).
 */
#ifndef REMAT_BENCH_H
#define REMAT_BENCH_H

#include <stddef.h>

double now_s(void);
double median(double *v, int n);
long proc_status_kb(const char *field);
int reset_peak_rss(void);
/* Runs fn(arg, out) in a child process; 0 on success. */
int in_child(int (*fn)(const void *arg, void *out), const void *arg, void *out, size_t out_size);

int bench_replay(const char *remat);
int bench_plan_chain(const char *remat);
int bench_plan_dag(const char *remat);
int bench_bundled(const char *remat);
int bench_trace(const char *remat);
int bench_auto(const char *remat);
int bench_peers(const char *remat);

#endif
