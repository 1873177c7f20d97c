/*
 * trace_svg.c - the memory timeline as SVG: each step's high-water mark,
 * stacked by category, with the budget, the peak, the forward/backward
 * boundary and the recomputation steps.
 *
 * Layout: a title, the plot, a legend at the right. The activation
 * categories (activations, recomputed, activation gradients, workspace) are
 * stacked at the bottom and the persistent ones above them, so an activation
 * budget is read against the top of the lower bands and a total budget
 * against the top of the whole stack; the budget line says which.
 *
 * A trace with more steps than the plot has pixel columns is drawn one
 * column per group of consecutive steps, each column showing the step with
 * the largest high-water mark in its group: the peak, and every local
 * maximum wider than a pixel, is drawn at its true height.
 *
 * Text comes from graph ids, so it is escaped for XML, invalid UTF-8 and
 * control characters are replaced by '?', and long ids are shortened (at a
 * character boundary) so that labels stay inside the picture.
 */
#include "trace_internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static const remat_category stack_order[] = {
    REMAT_CAT_ACTIVATIONS, REMAT_CAT_RECOMPUTED, REMAT_CAT_ACTIVATION_GRADS, REMAT_CAT_WORKSPACE,
    REMAT_CAT_PARAM_GRADS, REMAT_CAT_PARAMS,     REMAT_CAT_FROZEN,           REMAT_CAT_INPUTS,
    REMAT_CAT_OPTIMIZER_STATE, REMAT_CAT_MASTER_WEIGHTS, REMAT_CAT_COMM_BUFFERS,
};
#define N_STACK (sizeof stack_order / sizeof stack_order[0])

/* A palette that stays distinguishable for the common colour-vision
 * deficiencies (Tableau 10), indexed by remat_category. */

#define FONT "font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\""

typedef struct {
    const remat_trace *t;
    remat_trace_options o;
    double x0, x1, y0, y1; /* plot area */
    double ymax;           /* bytes at the top of the plot */
    size_t ncol;           /* columns drawn */
    size_t *rep;           /* column -> the step it shows */
    size_t *first;         /* column -> its first step; first[ncol] = n_steps */
    int used[REMAT_CAT_COUNT];
} svg;

/* ---- Text --------------------------------------------------------------- */

/* Length of the valid UTF-8 sequence at p (1..4), or 0 if it is not one.
 * Refuses overlong forms, surrogates, code points above U+10FFFF and the
 * XML non-characters U+FFFE and U+FFFF. */
static size_t utf8_len(const unsigned char *p, size_t left)
{
    if (p[0] < 0x80)
        return 1;
    size_t n = p[0] >= 0xf0 ? 4 : p[0] >= 0xe0 ? 3 : p[0] >= 0xc2 ? 2 : 0;
    if (!n || n > left || p[0] > 0xf4)
        return 0;
    uint32_t cp = p[0] & (0x7f >> n);
    for (size_t i = 1; i < n; i++) {
        if ((p[i] & 0xc0) != 0x80)
            return 0;
        cp = cp << 6 | (p[i] & 0x3f);
    }
    if ((n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff) ||
        cp == 0xfffe || cp == 0xffff)
        return 0;
    return n;
}

/* Appends s as XML character data (or an attribute value), at most max
 * characters (0: no limit); a shortened text ends in "...". */
static void xml_text(remat_buf *b, const char *s, size_t max)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t left = strlen(s), chars = 0;
    while (left) {
        if (max && chars == max) {
            remat_buf_puts(b, "...");
            return;
        }
        size_t n = utf8_len(p, left);
        chars++;
        if (n == 0 || (p[0] < 0x20 && p[0] != '\t')) {
            remat_buf_putn(b, "?", 1);
            n = n ? n : 1;
        } else if (p[0] == '&') {
            remat_buf_puts(b, "&amp;");
        } else if (p[0] == '<') {
            remat_buf_puts(b, "&lt;");
        } else if (p[0] == '>') {
            remat_buf_puts(b, "&gt;");
        } else if (p[0] == '"') {
            remat_buf_puts(b, "&quot;");
        } else if (p[0] == '\'') {
            remat_buf_puts(b, "&apos;");
        } else {
            remat_buf_putn(b, (const char *)p, n);
        }
        p += n;
        left -= n;
    }
}

/* Appends what fill writes, escaped and shortened to max characters. */
static void xml_name(remat_buf *b, const remat_trace *t, size_t k, remat__trace_namer fill, size_t max)
{
    remat_buf tmp;
    remat_buf_init(&tmp);
    fill(&tmp, t, k, 0);
    if (tmp.failed)
        b->failed = 1;
    xml_text(b, tmp.data ? tmp.data : "", max);
    remat_buf_destroy(&tmp);
}

/* ---- Scales ------------------------------------------------------------- */

static double xs(const svg *S, size_t step)
{
    return S->x0 + (S->x1 - S->x0) * (double)step / (double)S->t->n_steps;
}

static double ys(const svg *S, double bytes)
{
    return S->y1 - (S->y1 - S->y0) * bytes / S->ymax;
}

/* The smallest of 1, 2, 5 times a power of ten that is >= v. */
static double nice_step(double v)
{
    double p = pow(10.0, floor(log10(v)));
    double m = v / p;
    return (m <= 1.0 ? 1.0 : m <= 2.0 ? 2.0 : m <= 5.0 ? 5.0 : 10.0) * p;
}

static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};

/* The binary unit the y axis is labelled in: the largest one that the top
 * of the axis reaches. */
static int axis_unit(double ymax)
{
    int u = 0;
    while (u < 6 && ymax >= pow(1024.0, u + 1))
        u++;
    return u;
}

/* ---- Columns ------------------------------------------------------------- */

static remat_status make_columns(svg *S, remat_err *err)
{
    const remat_trace *t = S->t;
    size_t n = t->n_steps, width = (size_t)(S->x1 - S->x0);
    S->ncol = n <= width ? n : width;
    S->rep = remat__array(S->ncol, sizeof *S->rep);
    S->first = remat__array(S->ncol + 1, sizeof *S->first);
    if (!S->rep || !S->first)
        return remat_err_set(err, REMAT_ENOMEM, "out of memory writing the SVG trace");
    for (size_t j = 0; j <= S->ncol; j++)
        S->first[j] = (size_t)((double)j * (double)n / (double)S->ncol);
    S->first[S->ncol] = n;
    for (size_t j = 0; j < S->ncol; j++) {
        size_t best = S->first[j];
        for (size_t s = S->first[j]; s < S->first[j + 1]; s++)
            if (t->steps[s].high_water > t->steps[best].high_water)
                best = s;
        S->rep[j] = best;
    }
    /* The peak step is shown by its own column whatever the grouping. */
    for (size_t j = 0; j < S->ncol; j++)
        if (S->first[j] <= t->replay.peak_index && t->replay.peak_index < S->first[j + 1])
            S->rep[j] = t->replay.peak_index;
    return REMAT_OK;
}

/* ---- Drawing ------------------------------------------------------------ */

static void draw_title(remat_buf *b, const svg *S)
{
    const remat_trace *t = S->t;
    const remat_replay_result *r = &t->replay;
    char x[64];
    remat_buf_printf(b, "<text x=\"%.1f\" y=\"24\" " FONT " font-size=\"17\" font-weight=\"bold\">Memory timeline: ",
                     S->x0);
    xml_text(b, t->a->g->name, 40);
    if (S->o.label) {
        remat_buf_puts(b, " \xe2\x80\x94 ");
        xml_text(b, S->o.label, 40);
    }
    remat_buf_puts(b, "</text>\n");
    double base = (double)r->flops_forward + (double)r->flops_backward;
    remat_buf_printf(b, "<text x=\"%.1f\" y=\"43\" " FONT " font-size=\"12\" fill=\"#333\">peak %s at step %zu (",
                     S->x0, remat_format_bytes(r->peak_bytes, x, sizeof x), r->peak_index);
    xml_name(b, t, r->peak_index, remat__trace_instr_text, 40);
    remat_buf_printf(b, ")</text>\n<text x=\"%.1f\" y=\"59\" " FONT " font-size=\"12\" fill=\"#333\">%zu steps, "
                        "%llu RECOMPUTE steps, recompute FLOPs %.2f%% of forward + backward</text>\n",
                     S->x0, t->n_steps, (unsigned long long)t->n_recompute_steps,
                     base > 0 ? 100.0 * (double)r->flops_recompute / base : 0.0);
}

static void draw_recompute_shading(remat_buf *b, const svg *S)
{
    const remat_trace *t = S->t;
    double w = (S->x1 - S->x0) / (double)S->ncol;
    for (size_t j = 0; j < S->ncol && !b->failed; j++) {
        int any = 0;
        for (size_t s = S->first[j]; s < S->first[j + 1] && !any; s++)
            any = t->steps[s].in.kind == REMAT_I_RECOMPUTE;
        if (!any)
            continue;
        double x = S->x0 + w * (double)j, ww = w < 1.0 ? 1.0 : w;
        remat_buf_printf(b, "<rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%.1f\" fill=\"#e15759\" "
                            "fill-opacity=\"0.13\"/>\n",
                         x, S->y0, ww, S->y1 - S->y0);
        remat_buf_printf(b, "<rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"8\" fill=\"#e15759\"/>\n", x,
                         S->y1 + 30, ww);
    }
}

static void draw_bands(remat_buf *b, const svg *S, double *base)
{
    const remat_trace *t = S->t;
    double w = (S->x1 - S->x0) / (double)S->ncol;
    for (size_t j = 0; j < S->ncol; j++)
        base[j] = 0.0;
    for (size_t k = 0; k < N_STACK && !b->failed; k++) {
        remat_category c = stack_order[k];
        if (!S->used[c])
            continue;
        /* The band is the area between base and base + this category: its
         * top edge left to right, then its bottom edge back. */
        remat_buf_printf(b, "<path fill=\"%s\" stroke=\"none\" d=\"", remat_category_color(c));
        for (size_t j = 0; j < S->ncol; j++) {
            double top = base[j] + (double)t->hw[S->rep[j] * REMAT_CAT_COUNT + c];
            remat_buf_printf(b, "%s%.2f %.2f H%.2f", j ? " L" : "M", S->x0 + w * (double)j, ys(S, top),
                             S->x0 + w * (double)(j + 1));
        }
        for (size_t j = S->ncol; j-- > 0;) {
            remat_buf_printf(b, " L%.2f %.2f H%.2f", S->x0 + w * (double)(j + 1), ys(S, base[j]),
                             S->x0 + w * (double)j);
            base[j] += (double)t->hw[S->rep[j] * REMAT_CAT_COUNT + c];
        }
        remat_buf_printf(b, " Z\"><title>%s</title></path>\n", remat_category_name(c));
    }
    /* The total as a line, so the outline reads even where bands are thin. */
    remat_buf_puts(b, "<path fill=\"none\" stroke=\"#222\" stroke-width=\"1\" d=\"");
    for (size_t j = 0; j < S->ncol && !b->failed; j++)
        remat_buf_printf(b, "%s%.2f %.2f H%.2f", j ? " L" : "M", S->x0 + w * (double)j,
                         ys(S, (double)t->steps[S->rep[j]].high_water), S->x0 + w * (double)(j + 1));
    remat_buf_puts(b, "\"/>\n");
}

static void draw_axes(remat_buf *b, const svg *S)
{
    const remat_trace *t = S->t;
    int u = axis_unit(S->ymax);
    double unit = pow(1024.0, u), top = S->ymax / unit, step = nice_step(top / 6.0);
    /* Horizontal grid and y labels. */
    for (double v = 0.0; v <= top * 1.0000001 && !b->failed; v += step) {
        double y = ys(S, v * unit);
        remat_buf_printf(b, "<line x1=\"%.1f\" y1=\"%.2f\" x2=\"%.1f\" y2=\"%.2f\" stroke=\"#ddd\" stroke-width=\"1\"/>\n",
                         S->x0, y, S->x1, y);
        remat_buf_printf(b, "<text x=\"%.1f\" y=\"%.2f\" " FONT " font-size=\"11\" text-anchor=\"end\">%.4g %s</text>\n",
                         S->x0 - 6, y + 4, v, units[u]);
    }
    if (u > 0)
        remat_buf_printf(b, "<text transform=\"translate(18 %.1f) rotate(-90)\" " FONT " font-size=\"12\" "
                            "text-anchor=\"middle\">live memory (%s; 1 %s = 2^%d B)</text>\n",
                         (S->y0 + S->y1) / 2, units[u], units[u], 10 * u);
    else
        remat_buf_printf(b, "<text transform=\"translate(18 %.1f) rotate(-90)\" " FONT " font-size=\"12\" "
                            "text-anchor=\"middle\">live memory (bytes)</text>\n",
                         (S->y0 + S->y1) / 2);
    /* X ticks at step boundaries. */
    size_t n = t->n_steps;
    size_t xstep = (size_t)nice_step((double)n / 10.0 < 1.0 ? 1.0 : (double)n / 10.0);
    if (xstep == 0)
        xstep = 1;
    for (size_t s = 0; s <= n && !b->failed; s += xstep) {
        double x = xs(S, s);
        remat_buf_printf(b, "<line x1=\"%.2f\" y1=\"%.1f\" x2=\"%.2f\" y2=\"%.1f\" stroke=\"#333\"/>\n", x, S->y1, x,
                         S->y1 + 5);
        remat_buf_printf(b, "<text x=\"%.2f\" y=\"%.1f\" " FONT " font-size=\"11\" text-anchor=\"middle\">%zu</text>\n", x,
                         S->y1 + 18, s);
    }
    remat_buf_printf(b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#333\"/>\n", S->x0, S->y1, S->x1,
                     S->y1);
    remat_buf_printf(b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#333\"/>\n", S->x0, S->y0, S->x0,
                     S->y1);
    if (t->n_recompute_steps)
        remat_buf_printf(b, "<text x=\"%.1f\" y=\"%.1f\" " FONT " font-size=\"10\" text-anchor=\"end\" "
                            "fill=\"#e15759\">RECOMPUTE</text>\n",
                         S->x0 - 6, S->y1 + 38);
    /* Centred under the plot, but never starting left of the picture
     * (about 6 px a character at this size). */
    double cx = (S->x0 + S->x1) / 2;
    remat_buf_printf(b, "<text x=\"%.1f\" y=\"%.1f\" " FONT " font-size=\"12\" text-anchor=\"middle\">step "
                        "(instruction index)</text>\n",
                     cx, S->y1 + 58);
    const char *note = S->ncol < n ? "each column: the highest high-water mark among its steps (the steps are "
                                     "more than the pixels)"
                                   : "each step drawn at its high-water mark: live before + what it allocates + "
                                     "its workspace";
    double half = 2.9 * (double)strlen(note);
    remat_buf_printf(b, "<text x=\"%.1f\" y=\"%.1f\" " FONT " font-size=\"10\" fill=\"#555\" "
                        "text-anchor=\"middle\">%s</text>\n",
                     cx - half < 4 ? half + 4 : cx, S->y1 + 74, note);
}

static void draw_boundary(remat_buf *b, const svg *S)
{
    const remat_trace *t = S->t;
    if (t->first_bwd >= t->n_steps)
        return;
    double x = xs(S, t->first_bwd);
    remat_buf_printf(b, "<line x1=\"%.2f\" y1=\"%.1f\" x2=\"%.2f\" y2=\"%.1f\" stroke=\"#555\" stroke-width=\"1.2\" "
                        "stroke-dasharray=\"5 3\"/>\n",
                     x, S->y0 - 16, x, S->y1);
    /* Each label goes on its own side of the line when there is room for
     * it there, else on the other side, so neither runs into the axis or
     * the legend. */
    int fwd_left = x - S->x0 >= 70, bwd_right = S->x1 - x >= 170;
    remat_buf_printf(b, "<text x=\"%.2f\" y=\"%.1f\" " FONT " font-size=\"11\" text-anchor=\"%s\" fill=\"#555\">"
                        "forward \xe2\x86\x90</text>\n",
                     fwd_left ? x - 4 : x + 4, fwd_left ? S->y0 - 6 : S->y0 - 20, fwd_left ? "end" : "start");
    remat_buf_printf(b, "<text x=\"%.2f\" y=\"%.1f\" " FONT " font-size=\"11\" text-anchor=\"%s\" fill=\"#555\">"
                        "\xe2\x86\x92 backward (from step %zu)</text>\n",
                     bwd_right ? x + 4 : x - 4, bwd_right ? S->y0 - 6 : S->y0 - 20, bwd_right ? "start" : "end",
                     t->first_bwd);
}

static void draw_budget(remat_buf *b, const svg *S)
{
    if (S->o.budget_kind == REMAT_BUDGET_NONE)
        return;
    char x[64];
    double y = ys(S, (double)S->o.budget);
    remat_buf_printf(b, "<line x1=\"%.1f\" y1=\"%.2f\" x2=\"%.1f\" y2=\"%.2f\" stroke=\"#c00\" stroke-width=\"1.5\" "
                        "stroke-dasharray=\"8 4\"/>\n",
                     S->x0, y, S->x1, y);
    /* A white halo keeps the label legible over any band. */
    remat_buf_printf(b, "<text x=\"%.1f\" y=\"%.2f\" " FONT " font-size=\"11\" text-anchor=\"end\" fill=\"#c00\" "
                        "stroke=\"#fff\" stroke-width=\"3\" stroke-opacity=\"0.8\" paint-order=\"stroke\">%s %s%s</text>\n",
                     S->x1 - 4, y - 4, S->o.budget_kind == REMAT_BUDGET_TOTAL ? "budget (total)" : "activation budget",
                     remat_format_bytes_short(S->o.budget, x, sizeof x),
                     S->o.budget_kind == REMAT_BUDGET_TOTAL ? "" : " (caps the four lower bands)");
}

/* The peak callout's rows: the largest live tensors at the peak (at most
 * three) into idx; and its height in pixels. */
#define CALLOUT_LINE 14.0
#define CALLOUT_WIDTH 330.0
static size_t callout_rows(const svg *S, size_t *idx)
{
    size_t n = remat_trace_top_at(S->t, S->t->replay.peak_index, REMAT_TRACE_TOP_NOT_RESIDENT, idx,
                                  S->o.top < 8 ? S->o.top : 8, NULL, NULL);
    return n > 3 ? 3 : n;
}

static double callout_height(size_t n)
{
    return CALLOUT_LINE * (double)(2 + (n ? n + 1 : 0)) + 10.0;
}

/* The peak: a marker on the total line and a box naming the bytes, the
 * step and the largest tensors live then. The box sits at the top of the
 * plot, and the y scale leaves room for it above the peak (remat_trace_svg),
 * so that it never covers the curve: every point of it is at most the peak. */
static void draw_peak(remat_buf *b, const svg *S)
{
    const remat_trace *t = S->t;
    const remat_replay_result *r = &t->replay;
    size_t p = r->peak_index, col = 0;
    while (col + 1 < S->ncol && S->first[col + 1] <= p)
        col++;
    double w = (S->x1 - S->x0) / (double)S->ncol;
    double px = S->x0 + w * ((double)col + 0.5), py = ys(S, (double)r->peak_bytes);
    remat_buf_printf(b, "<circle cx=\"%.2f\" cy=\"%.2f\" r=\"5\" fill=\"#fff\" stroke=\"#000\" stroke-width=\"2\"/>\n", px,
                     py);
    size_t idx[8], n = callout_rows(S, idx);
    const double line = CALLOUT_LINE, bw = CALLOUT_WIDTH, bh = callout_height(n);
    int right = px + 14 + bw <= S->x1;
    double bx = right ? px + 14 : px - 14 - bw, by = S->y0 + 4;
    if (bx < S->x0 + 2) /* a narrow plot: keep the box inside it */
        bx = S->x0 + 2;
    char x[64];
    remat_buf_printf(b, "<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\" stroke=\"#000\"/>\n", px, py - 5,
                     right ? bx : bx + bw, by + bh / 2);
    remat_buf_printf(b, "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.0f\" height=\"%.0f\" rx=\"3\" fill=\"#fff\" "
                        "fill-opacity=\"0.93\" stroke=\"#000\"/>\n",
                     bx, by, bw, bh);
    remat_buf_printf(b, "<text " FONT " font-size=\"11\"><tspan x=\"%.2f\" y=\"%.2f\" font-weight=\"bold\">peak %s</tspan>",
                     bx + 8, by + line, remat_format_bytes(r->peak_bytes, x, sizeof x));
    remat_buf_printf(b, "<tspan x=\"%.2f\" y=\"%.2f\">at step %zu: ", bx + 8, by + 2 * line, p);
    xml_name(b, t, p, remat__trace_instr_text, 34);
    remat_buf_puts(b, "</tspan>");
    if (n)
        remat_buf_printf(b, "<tspan x=\"%.2f\" y=\"%.2f\" fill=\"#555\">largest live besides weights and inputs:</tspan>",
                         bx + 8, by + 3 * line);
    for (size_t k = 0; k < n; k++) {
        const remat_trace_interval *iv = &t->iv[idx[k]];
        remat_buf_printf(b, "<tspan x=\"%.2f\" y=\"%.2f\">%s  ", bx + 16, by + (double)(4 + k) * line,
                         remat_format_bytes_short(iv->bytes, x, sizeof x));
        xml_name(b, t, idx[k], remat__trace_interval_id, 24);
        remat_buf_printf(b, " (%s)</tspan>", remat_category_name((remat_category)iv->category));
    }
    remat_buf_puts(b, "</text>\n");
}

static void draw_legend(remat_buf *b, const svg *S)
{
    const remat_trace *t = S->t;
    double x = S->x1 + 24, y = S->y0 + 4;
    char v[64];
    remat_buf_printf(b, "<text x=\"%.1f\" y=\"%.1f\" " FONT " font-size=\"12\" font-weight=\"bold\">categories "
                        "(own maximum)</text>\n",
                     x, y);
    y += 10;
    /* Top band first, as they appear in the stack. */
    for (size_t k = N_STACK; k-- > 0 && !b->failed;) {
        remat_category c = stack_order[k];
        if (!S->used[c])
            continue;
        remat_buf_printf(b, "<rect x=\"%.1f\" y=\"%.1f\" width=\"14\" height=\"14\" fill=\"%s\" stroke=\"#333\" "
                            "stroke-width=\"0.5\"/>\n",
                         x, y, remat_category_color(c));
        remat_buf_printf(b, "<text x=\"%.1f\" y=\"%.1f\" " FONT " font-size=\"11\">%s  %s</text>\n", x + 20, y + 11,
                         remat_category_name(c), remat_format_bytes_short(t->replay.category_peak[c], v, sizeof v));
        y += 20;
    }
    y += 8;
    remat_buf_printf(b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#222\"/>\n", x, y + 7, x + 14,
                     y + 7);
    remat_buf_printf(b, "<text x=\"%.1f\" y=\"%.1f\" " FONT " font-size=\"11\">total (high-water mark)</text>\n", x + 20,
                     y + 11);
    y += 20;
    remat_buf_printf(b, "<rect x=\"%.1f\" y=\"%.1f\" width=\"14\" height=\"14\" fill=\"#e15759\" fill-opacity=\"0.25\"/>\n",
                     x, y);
    remat_buf_printf(b, "<text x=\"%.1f\" y=\"%.1f\" " FONT " font-size=\"11\">RECOMPUTE step</text>\n", x + 20, y + 11);
    y += 20;
    remat_buf_printf(b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#555\" stroke-dasharray=\"5 3\"/>\n",
                     x + 7, y, x + 7, y + 14);
    remat_buf_printf(b, "<text x=\"%.1f\" y=\"%.1f\" " FONT " font-size=\"11\">forward | backward</text>\n", x + 20,
                     y + 11);
    y += 20;
    if (S->o.budget_kind != REMAT_BUDGET_NONE) {
        remat_buf_printf(b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#c00\" stroke-width=\"1.5\" "
                            "stroke-dasharray=\"4 2\"/>\n",
                         x, y + 7, x + 14, y + 7);
        remat_buf_printf(b, "<text x=\"%.1f\" y=\"%.1f\" " FONT " font-size=\"11\">%s</text>\n", x + 20, y + 11,
                         S->o.budget_kind == REMAT_BUDGET_TOTAL ? "budget (total)" : "activation budget");
        y += 20;
    }
    remat_buf_printf(b, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4\" fill=\"#fff\" stroke=\"#000\" stroke-width=\"2\"/>\n",
                     x + 7, y + 7);
    remat_buf_printf(b, "<text x=\"%.1f\" y=\"%.1f\" " FONT " font-size=\"11\">peak</text>\n", x + 20, y + 11);
    y += 30;
    remat_buf_printf(b, "<text " FONT " font-size=\"10\" fill=\"#555\"><tspan x=\"%.1f\" y=\"%.1f\">sum of category "
                        "maxima %s</tspan><tspan x=\"%.1f\" y=\"%.1f\">(above the peak when categories</tspan>"
                        "<tspan x=\"%.1f\" y=\"%.1f\">peak at different steps)</tspan></text>\n",
                     x, y, remat_format_bytes_short(t->replay.sum_of_category_peaks, v, sizeof v), x, y + 13, x, y + 26);
}

char *remat_trace_svg(const remat_trace *t, const remat_trace_options *opts, size_t *len, remat_err *err)
{
    svg S;
    memset(&S, 0, sizeof S);
    S.t = t;
    S.o = remat__trace_opts(opts);
    if (S.o.width < 640 || S.o.width > 20000 || S.o.height < 400 || S.o.height > 20000) {
        remat_err_set(err, REMAT_EINVAL, "SVG size %ux%u is outside 640x400 .. 20000x20000", S.o.width, S.o.height);
        return NULL;
    }
    S.x0 = 100;
    S.x1 = (double)S.o.width - 260;
    S.y0 = 96;
    S.y1 = (double)S.o.height - 88;
    uint64_t top = t->replay.peak_bytes;
    if (S.o.budget_kind != REMAT_BUDGET_NONE && S.o.budget > top)
        top = S.o.budget;
    S.ymax = top ? (double)top * 1.12 : 1024.0;
    for (size_t s = 0; s < t->n_steps; s++)
        for (int c = 0; c < REMAT_CAT_COUNT; c++)
            S.used[c] |= t->hw[s * REMAT_CAT_COUNT + c] != 0;
    double *base = NULL;
    if (make_columns(&S, err) != REMAT_OK || !(base = remat__array(S.ncol, sizeof *base))) {
        remat__free(S.rep);
        remat__free(S.first);
        remat_err_set(err, REMAT_ENOMEM, "out of memory writing the SVG trace");
        return NULL;
    }
    /* Headroom for the peak callout above the peak (draw_peak): the peak
     * sits at least the box's height plus a margin below the plot's top. */
    {
        size_t idx[8];
        double room = callout_height(callout_rows(&S, idx)) + 24.0, ph = S.y1 - S.y0;
        if (t->replay.peak_bytes && room < 0.8 * ph && S.ymax < (double)t->replay.peak_bytes / (1.0 - room / ph))
            S.ymax = (double)t->replay.peak_bytes / (1.0 - room / ph);
    }
    remat_buf b;
    remat_buf_init(&b);
    remat_buf_printf(&b, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                         "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%u\" height=\"%u\" viewBox=\"0 0 %u %u\">\n",
                     S.o.width, S.o.height, S.o.width, S.o.height);
    remat_buf_puts(&b, "<title>remat memory timeline: ");
    xml_text(&b, t->a->g->name, 0);
    remat_buf_puts(&b, "</title>\n<rect width=\"100%\" height=\"100%\" fill=\"#fff\"/>\n");
    draw_title(&b, &S);
    draw_recompute_shading(&b, &S);
    draw_axes(&b, &S);
    draw_bands(&b, &S, base);
    draw_boundary(&b, &S);
    draw_budget(&b, &S);
    draw_peak(&b, &S);
    draw_legend(&b, &S);
    remat_buf_puts(&b, "</svg>\n");
    remat__free(S.rep);
    remat__free(S.first);
    remat__free(base);
    return remat_buf_finish(&b, len, err, "SVG trace");
}
