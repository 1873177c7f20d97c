/* example_api.c - the README's library example, built and run by `make check`
 * so that the example stays true. */
#include <remat.h>
#include <stdio.h>

int main(void)
{
    remat_err err;
    remat_err_init(&err);
    remat_graph *g = NULL;
    remat_analysis *a = NULL;
    if (remat_graph_load_file("graphs/transformer4.json", &g, &err) != REMAT_OK ||
        remat_analyze(g, &a, &err) != REMAT_OK) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    remat_plan_options o;
    remat_plan_options_init(&o);              /* strategy "auto" */
    o.budget_kind = REMAT_BUDGET_TOTAL;
    o.budget = 16ULL << 20;                   /* 16 MiB */
    remat_plan plan;
    remat_replay_result r;
    remat_status st = remat_plan_make(a, &o, &plan, &r, &err);
    if (st == REMAT_OK)
        printf("peak %llu B, extra FLOPs %llu\n", (unsigned long long)r.peak_bytes,
               (unsigned long long)r.flops_recompute);
    else
        fprintf(stderr, "%s\n", err.msg);
    remat_replay_result_destroy(&r);
    remat_plan_destroy(&plan);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
    return st == REMAT_OK ? 0 : 1;
}
