/*
 * shard_units.c - which params are gathered together: one unit per op that
 * first reads a param, or one per module prefix.
 *
 * Design: a unit is named by an op (the first, in forward order, to read a
 * param of it), so collectives keep an op index as their argument whatever
 * the grouping. A param belongs to the module of its first reader (the
 * exporter's attrs.module is the leaf module that ran the op, and a
 * module's params are read by the ops it runs). FSDP's auto-wrapping makes
 * each wrapped module a unit holding the params of its submodules that no
 * nested wrapped module holds, and the root unit the rest
 * (torch/distributed/fsdp/wrap.py _recursive_wrap wraps children before
 * their parent); `--fsdp-units` lists the wrapped modules, so the longest
 * listed prefix wins, and `--fsdp-wrap depth:N` wraps every module N
 * components deep (remat's shorthand for a lambda_auto_wrap_policy on the
 * module's depth).
 */
#include "shard_internal.h"
#include "../util/util_internal.h"

#include <string.h>

/* m names module p or one of its submodules. */
static int under(const char *m, const char *p)
{
    size_t n = strlen(p);
    return strncmp(m, p, n) == 0 && (m[n] == '\0' || m[n] == '.');
}

/* Length of m's first depth components, or 0 when m has fewer. */
static size_t cut(const char *m, uint32_t depth)
{
    if (!*m)
        return 0;
    size_t i = 0;
    for (uint32_t c = 1;; c++) {
        while (m[i] && m[i] != '.')
            i++;
        if (c == depth)
            return i;
        if (!m[i])
            return 0;
        i++;
    }
}

remat_status remat__shard_units(const remat_analysis *a, const remat_shard_config *cfg, uint32_t *unit_of,
                                uint32_t *root, remat_err *err)
{
    const remat_graph *g = a->g;
    *root = REMAT_NONE;
    for (uint32_t t = 0; t < g->n_tensors; t++)
        unit_of[t] = REMAT_NONE;
    int by_module = cfg->wrap_depth || cfg->n_unit_prefixes;
    if (cfg->wrap_depth && cfg->n_unit_prefixes)
        return remat_err_set(err, REMAT_EINVAL, "--fsdp-wrap and --fsdp-units: give one of them");
    if (cfg->n_unit_prefixes && !cfg->unit_prefixes)
        return remat_err_set(err, REMAT_EINVAL, "sharding: unit prefixes missing");
    for (size_t i = 0; i < cfg->n_unit_prefixes; i++)
        if (!cfg->unit_prefixes[i] || !*cfg->unit_prefixes[i])
            return remat_err_set(err, REMAT_EINVAL, "--fsdp-units: prefix %zu is empty (the root unit holds every "
                                                    "param no listed module holds)", i + 1);
    if (by_module) {
        int any = 0;
        for (uint32_t k = 0; k < g->n_ops && !any; k++)
            any = g->ops[k].module != NULL;
        if (!any)
            return remat_err_set(err, REMAT_EINVAL,
                                 "%s: the graph's ops carry no attrs.module (export the model with "
                                 "scripts/export_torch.py, which records the module that ran each op)",
                                 cfg->wrap_depth ? "--fsdp-wrap" : "--fsdp-units");
    }
    size_t np = cfg->n_unit_prefixes;
    uint32_t *prefix_unit = remat__array(np ? np : 1, sizeof *prefix_unit);
    char **keys = remat__calloc(g->n_ops ? g->n_ops : 1, sizeof *keys);
    remat_strmap depth_units;
    int map_ok = remat_strmap_init(&depth_units, g->n_ops ? g->n_ops : 1) == REMAT_OK;
    remat_status st = REMAT_OK;
    if (!prefix_unit || !keys || !map_ok)
        st = remat_err_set(err, REMAT_ENOMEM, "out of memory grouping the params into units");
    for (size_t i = 0; i < np && st == REMAT_OK; i++)
        prefix_unit[i] = REMAT_NONE;
    for (uint32_t i = 0; i < g->n_ops && st == REMAT_OK; i++) {
        uint32_t k = a->order[i];
        const remat_op *op = &g->ops[k];
        const uint32_t *inp = remat_op_inputs(g, op);
        for (uint32_t j = 0; j < op->n_in && st == REMAT_OK; j++) {
            uint32_t t = inp[j];
            /* FSDP flattens parameters only: buffers (the graph's frozen
             * params) stay whole on every rank, in no unit. */
            if (g->tensors[t].kind != REMAT_TENSOR_PARAM || unit_of[t] != REMAT_NONE ||
                (cfg->fsdp != REMAT_FSDP_OFF && g->tensors[t].frozen))
                continue;
            if (!by_module) {
                unit_of[t] = k;
                continue;
            }
            const char *m = op->module ? op->module : "";
            uint32_t *slot = root;
            if (np) {
                size_t best = SIZE_MAX, len = 0;
                for (size_t q = 0; q < np; q++)
                    if (under(m, cfg->unit_prefixes[q]) && strlen(cfg->unit_prefixes[q]) >= len) {
                        best = q;
                        len = strlen(cfg->unit_prefixes[q]);
                    }
                if (best != SIZE_MAX)
                    slot = &prefix_unit[best];
            } else {
                size_t n = cut(m, cfg->wrap_depth);
                if (n) {
                    if (!keys[k] && !(keys[k] = remat__malloc(n + 1))) {
                        st = remat_err_set(err, REMAT_ENOMEM, "out of memory grouping the params into units");
                        break;
                    }
                    memcpy(keys[k], m, n);
                    keys[k][n] = '\0';
                    uint32_t u = k;
                    remat_status ps = remat_strmap_put(&depth_units, keys[k], k, &u);
                    if (ps == REMAT_ENOMEM) {
                        st = remat_err_set(err, REMAT_ENOMEM, "out of memory grouping the params into units");
                        break;
                    }
                    unit_of[t] = u; /* k when the module is new, else its unit's op */
                    continue;
                }
            }
            if (*slot == REMAT_NONE)
                *slot = k;
            unit_of[t] = *slot;
        }
    }
    for (size_t q = 0; q < np && st == REMAT_OK; q++)
        if (prefix_unit[q] == REMAT_NONE)
            st = remat_err_set(err, REMAT_EINVAL,
                               "--fsdp-units: no op that reads a param runs in module '%s' or below it (prefix %zu)",
                               cfg->unit_prefixes[q], q + 1);
    remat__free(prefix_unit);
    for (uint32_t k = 0; keys && k < g->n_ops; k++)
        remat__free(keys[k]);
    remat__free(keys);
    if (map_ok)
        remat_strmap_destroy(&depth_units);
    return st;
}
