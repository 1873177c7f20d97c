/*
 * alloc_svg.c - the address space over time as SVG: every allocation
 * a rectangle spanning the instructions it is alive (x) and its bytes at
 * its offset (y), coloured by category.
 *
 * The picture shows what the numbers summarize: holes between rectangles
 * are fragmentation, the solid line is the extent the layout needs (a
 * dynamic allocator's high-water mark or a static plan's arena), and the
 * dashed line is the logical peak below which no layout can go. Resident
 * state starts at the left edge (before instruction 0) and whatever lives
 * to the end reaches the right edge. Each rectangle carries a <title> with
 * its tensor, bytes, offset and instructions, shown as a tooltip by
 * browsers.
 */
#include "remat/alloc.h"
#include "remat/report.h"
#include "../util/util_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>


static void xml_text(remat_buf *b, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '<': remat_buf_puts(b, "&lt;"); break;
        case '>': remat_buf_puts(b, "&gt;"); break;
        case '&': remat_buf_puts(b, "&amp;"); break;
        case '"': remat_buf_puts(b, "&quot;"); break;
        default: remat_buf_putn(b, s, 1);
        }
    }
}

/* A tick step in binary units: 1, 2, 4, ... 512 times a power of 1024, the
 * smallest giving at most 8 intervals up to top. */
static uint64_t tick_step(uint64_t top)
{
    uint64_t step = 1;
    while (step < (UINT64_MAX >> 1) && top / step > 8)
        step <<= 1;
    return step;
}

static void unit_label(uint64_t v, char *buf, size_t cap)
{
    static const char *names[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    int u = 0;
    double d = (double)v;
    while (d >= 1024.0 && u < 6) {
        d /= 1024.0;
        u++;
    }
    if (d == (double)(uint64_t)d)
        snprintf(buf, cap, "%llu %s", (unsigned long long)d, names[u]);
    else
        snprintf(buf, cap, "%.2f %s", d, names[u]);
}

typedef struct {
    uint64_t bytes;
    uint32_t idx;
} by_size;

static int cmp_size(const void *x, const void *y)
{
    const by_size *a = x, *b = y;
    if (a->bytes != b->bytes)
        return a->bytes > b->bytes ? -1 : 1;
    return a->idx < b->idx ? -1 : a->idx > b->idx;
}

char *remat_report_alloc_svg(const remat_analysis *a, const remat_schedule *s, const remat_alloc_trace *t,
                             const uint64_t *offsets, uint64_t extent, const char *title, size_t max_rects,
                             size_t *len, remat_err *err)
{
    const remat_graph *g = a->g;
    if (!max_rects)
        max_rects = 20000;
    /* Which intervals to draw: all, or the largest max_rects. */
    size_t n_draw = t->n;
    uint8_t *draw = remat__calloc(t->n ? t->n : 1, 1);
    if (!draw) {
        remat_err_set(err, REMAT_ENOMEM, "out of memory drawing the address space");
        return NULL;
    }
    if (t->n > max_rects) {
        by_size *v = remat__array(t->n, sizeof *v);
        if (!v) {
            remat__free(draw);
            remat_err_set(err, REMAT_ENOMEM, "out of memory drawing the address space");
            return NULL;
        }
        for (size_t k = 0; k < t->n; k++) {
            v[k].bytes = t->iv[k].bytes;
            v[k].idx = (uint32_t)k;
        }
        qsort(v, t->n, sizeof *v, cmp_size);
        for (size_t k = 0; k < max_rects; k++)
            draw[v[k].idx] = 1;
        remat__free(v);
        n_draw = max_rects;
    } else {
        memset(draw, 1, t->n);
    }

    const double W = 1000, H = 560, L = 96, R = 190, T = 44, B = 56;
    const double pw = W - L - R, ph = H - T - B;
    uint64_t top = extent > t->logical_peak ? extent : t->logical_peak;
    if (top == 0)
        top = 1;
    uint64_t step = tick_step(top);
    uint64_t ymax = (top + step - 1) / step * step;
    if (ymax < top) /* rounding overflowed */
        ymax = top;
    /* Columns: -1 (resident) .. n_steps (the end). */
    const double cols = (double)t->n_steps + 1.0;
#define XCOL(i) (L + pw * ((double)(i) + 1.0) / cols)
#define YOFF(o) (T + ph - ph * ((double)(o) / (double)ymax))

    remat_buf b;
    remat_buf_init(&b);
    remat_buf_printf(&b,
                     "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\" "
                     "width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" font-family=\"sans-serif\" "
                     "font-size=\"12\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
                     W, H, W, H);
    remat_buf_puts(&b, "<text x=\"96\" y=\"26\" font-size=\"15\">");
    xml_text(&b, title ? title : "address space");
    remat_buf_puts(&b, "</text>\n");
    /* Grid and y axis (binary units). */
    char lab[64], lab2[64];
    for (uint64_t v = 0; v <= ymax; v += step) {
        double y = YOFF(v);
        unit_label(v, lab, sizeof lab);
        remat_buf_printf(&b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#e4e4e4\"/>\n", L, y,
                         L + pw, y);
        remat_buf_printf(&b, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%s</text>\n", L - 6, y + 4, lab);
        if (v > ymax - step)
            break;
    }
    remat_buf_printf(&b,
                     "<text x=\"16\" y=\"%.1f\" transform=\"rotate(-90 16 %.1f)\" text-anchor=\"middle\">offset "
                     "(binary units: KiB = 2^10 B)</text>\n",
                     T + ph / 2, T + ph / 2);
    /* x axis: instruction indices. */
    size_t xs = t->n_steps > 8 ? t->n_steps / 8 : 1;
    for (size_t i = 0; i <= t->n_steps; i += xs) {
        double x = XCOL(i);
        remat_buf_printf(&b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#888\"/>\n", x, T + ph,
                         x, T + ph + 4);
        remat_buf_printf(&b, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%zu</text>\n", x, T + ph + 17, i);
    }
    remat_buf_printf(&b, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">instruction (resident state left of 0)"
                         "</text>\n",
                     L + pw / 2, H - 12);
    /* Where backward starts. */
    for (size_t i = 0; i < s->n; i++)
        if (s->ins[i].kind == REMAT_I_BWD) {
            double x = XCOL(i);
            remat_buf_printf(&b,
                             "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#999\" "
                             "stroke-dasharray=\"2 3\"/>\n<text x=\"%.1f\" y=\"%.1f\" fill=\"#666\">backward</text>\n",
                             x, T, x, T + ph, x + 3, T + 12);
            break;
        }
    /* The rectangles. */
    uint32_t present = 0;
    char text[192], step_a[160], step_b[160];
    for (size_t k = 0; k < t->n; k++) {
        if (!draw[k])
            continue;
        const remat_alloc_interval *v = &t->iv[k];
        double x0 = v->first == REMAT_ALLOC_BEFORE ? XCOL(-1) : XCOL(v->first);
        double x1 = v->last == REMAT_ALLOC_NEVER ? XCOL(t->n_steps) : XCOL(v->last + 1);
        double y1 = YOFF(offsets[k]), y0 = YOFF(offsets[k] + v->bytes);
        present |= 1u << v->category;
        remat_buf_printf(&b,
                         "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" fill=\"%s\" stroke=\"#333\" "
                         "stroke-width=\"0.2\"><title>",
                         x0, y0, x1 - x0 > 0.3 ? x1 - x0 : 0.3, y1 - y0 > 0.3 ? y1 - y0 : 0.3,
                         remat_category_color((remat_category)(v->category)));
        if (v->tensor != REMAT_NONE)
            snprintf(text, sizeof text, "%s%s", v->grad ? "grad " : "", g->tensors[v->tensor].id);
        else if (v->op != REMAT_NONE)
            snprintf(text, sizeof text, "%s of %s",
                     v->category == REMAT_CAT_GATHERED_PARAMS ? "gathered unit" : "workspace", g->ops[v->op].id);
        else
            snprintf(text, sizeof text, "%s", remat_category_name((remat_category)v->category));
        xml_text(&b, text);
        snprintf(text, sizeof text, " (%s): %llu B at offset %llu, %s .. %s",
                 remat_category_name((remat_category)v->category), (unsigned long long)v->bytes,
                 (unsigned long long)offsets[k],
                 v->first == REMAT_ALLOC_BEFORE ? "resident" : remat_report_step_name(g, s, v->first, step_a, sizeof step_a),
                 v->last == REMAT_ALLOC_NEVER ? "end" : remat_report_step_name(g, s, v->last, step_b, sizeof step_b));
        xml_text(&b, text);
        remat_buf_puts(&b, "</title></rect>\n");
    }
    remat__free(draw);
    /* The logical peak (dashed) and the extent (solid). */
    unit_label(t->logical_peak, lab, sizeof lab);
    unit_label(extent, lab2, sizeof lab2);
    double yp = YOFF(t->logical_peak), ye = YOFF(extent);
    remat_buf_printf(&b,
                     "<line x1=\"%.1f\" y1=\"%.2f\" x2=\"%.1f\" y2=\"%.2f\" stroke=\"#000\" stroke-dasharray=\"6 4\"/>\n",
                     L, yp, L + pw, yp);
    remat_buf_printf(&b, "<line x1=\"%.1f\" y1=\"%.2f\" x2=\"%.1f\" y2=\"%.2f\" stroke=\"#c00\" stroke-width=\"1.5\"/>\n",
                     L, ye, L + pw, ye);
    remat_buf_printf(&b, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" stroke=\"#444\"/>\n", L,
                     T, pw, ph);
    /* Legend: the lines, then the categories drawn. */
    double lx = L + pw + 14, ly = T + 8;
    remat_buf_printf(&b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#c00\" stroke-width=\"1.5\"/>\n",
                     lx, ly, lx + 18, ly);
    remat_buf_printf(&b, "<text x=\"%.1f\" y=\"%.1f\">extent %s</text>\n", lx + 24, ly + 4, lab2);
    ly += 18;
    remat_buf_printf(&b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#000\" stroke-dasharray=\"6 4\"/>\n",
                     lx, ly, lx + 18, ly);
    remat_buf_printf(&b, "<text x=\"%.1f\" y=\"%.1f\">logical peak %s</text>\n", lx + 24, ly + 4, lab);
    ly += 26;
    for (int c = 0; c < REMAT_CAT_COUNT; c++) {
        if (!(present & (1u << c)))
            continue;
        remat_buf_printf(&b, "<rect x=\"%.1f\" y=\"%.1f\" width=\"14\" height=\"10\" fill=\"%s\" stroke=\"#333\" "
                             "stroke-width=\"0.4\"/>\n",
                         lx, ly - 9, remat_category_color((remat_category)(c)));
        remat_buf_printf(&b, "<text x=\"%.1f\" y=\"%.1f\">%s</text>\n", lx + 20, ly, remat_category_name((remat_category)c));
        ly += 17;
    }
    if (n_draw < t->n)
        remat_buf_printf(&b, "<text x=\"%.1f\" y=\"%.1f\" fill=\"#666\">%zu smallest of %zu</text>\n"
                             "<text x=\"%.1f\" y=\"%.1f\" fill=\"#666\">allocations not drawn</text>\n",
                         lx, ly + 8, t->n - n_draw, t->n, lx, ly + 22);
    remat_buf_puts(&b, "</svg>\n");
#undef XCOL
#undef YOFF
    return remat_buf_finish(&b, len, err, "address-space SVG");
}
