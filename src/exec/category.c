/*
 * category.c - the memory categories' names and chart colours.
 *
 * The categories themselves are the X-macro REMAT_CATEGORY_MAP in
 * remat/exec.h; this file gives each its printed name and the one palette
 * every chart uses (timeline, address space, sweep), so that a category
 * keeps its colour from one SVG to the next.
 */
#include "remat/exec.h"
#include "replay_cursor.h"

static const char *const category_names[] = {
#define REMAT__CAT_STR(name, text) text,
    REMAT_CATEGORY_MAP(REMAT__CAT_STR)
#undef REMAT__CAT_STR
};

const char *remat_category_name(remat_category c)
{
    return (unsigned)c < REMAT_CAT_COUNT ? category_names[c] : "?";
}

/* One palette for every chart (the timeline, the address space): a
 * category keeps its colour from one SVG to the next. Tableau 10, with
 * recomputed in red so that rebuilt bytes stand out, and the persistent
 * categories in quieter hues. */
static const char *const category_colors[REMAT_CAT_COUNT] = {
    [REMAT_CAT_PARAMS] = "#76b7b2",          [REMAT_CAT_PARAM_GRADS] = "#59a14f",
    [REMAT_CAT_OPTIMIZER_STATE] = "#9c755f", [REMAT_CAT_MASTER_WEIGHTS] = "#ff9da7",
    [REMAT_CAT_FROZEN] = "#bab0ac",          [REMAT_CAT_INPUTS] = "#b07aa1",
    [REMAT_CAT_ACTIVATIONS] = "#4e79a7",     [REMAT_CAT_RECOMPUTED] = "#e15759",
    [REMAT_CAT_ACTIVATION_GRADS] = "#f28e2b", [REMAT_CAT_WORKSPACE] = "#edc948",
    [REMAT_CAT_COMM_BUFFERS] = "#79706e",    [REMAT_CAT_GATHERED_PARAMS] = "#a0cbe8",
};

const char *remat_category_color(remat_category c)
{
    /* A category added to the map without a colour still draws. */
    return (unsigned)c < REMAT_CAT_COUNT && category_colors[c] ? category_colors[c] : "#000000";
}

int remat_category_is_activation(remat_category c)
{
    return remat__cat_is_act(c); /* one definition, inline in the replay's hot paths */
}
