/* Metrics registry (see metrics.h). Series kept in insertion order. */
#include "service/metrics.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/util.h"

struct series {
    char *name, *help, *labels;
    const char *suffix; /* histograms: "_bucket", "_sum", "_count"; else "" */
    enum metric_type type;
    double value;
};

static struct series *g_series;
static size_t g_len;

static struct series *find_or_add_part(const char *name, const char *suffix, const char *help,
                                       const char *labels, enum metric_type type)
{
    labels = labels ? labels : "";
    for (size_t i = 0; i < g_len; i++)
        if (strcmp(g_series[i].name, name) == 0 && strcmp(g_series[i].labels, labels) == 0 &&
            strcmp(g_series[i].suffix, suffix) == 0)
            return &g_series[i];
    g_series = xrealloc(g_series, (g_len + 1) * sizeof(*g_series));
    struct series *s = &g_series[g_len++];
    s->name = xstrdup(name);
    s->help = xstrdup(help ? help : name);
    s->labels = xstrdup(labels);
    s->suffix = suffix;
    s->type = type;
    s->value = 0;
    return s;
}

static struct series *find_or_add(const char *name, const char *help, const char *labels,
                                  enum metric_type type)
{
    return find_or_add_part(name, "", help, labels, type);
}

/* A histogram's series are created together on its first observation, in order (each
 * bucket, +Inf, _sum, _count), so later ones find the first and index the rest: an execution
 * costs no label formatting and no search per bucket. */
static size_t hist_base(const char *name, const char *help, const double *bounds, size_t n_bounds)
{
    for (size_t i = 0; i < g_len; i++)
        if (g_series[i].type == METRIC_HISTOGRAM && strcmp(g_series[i].name, name) == 0)
            return i;
    size_t base = g_len;
    char le[48];
    for (size_t i = 0; i < n_bounds; i++) {
        snprintf(le, sizeof(le), "le=\"%g\"", bounds[i]);
        find_or_add_part(name, "_bucket", help, le, METRIC_HISTOGRAM);
    }
    find_or_add_part(name, "_bucket", help, "le=\"+Inf\"", METRIC_HISTOGRAM);
    find_or_add_part(name, "_sum", help, "", METRIC_HISTOGRAM);
    find_or_add_part(name, "_count", help, "", METRIC_HISTOGRAM);
    return base;
}

void metrics_observe(const char *name, const char *help, double value, const double *bounds,
                     size_t n_bounds)
{
    size_t base = hist_base(name, help, bounds, n_bounds);
    struct series *s = &g_series[base];
    for (size_t i = 0; i < n_bounds; i++)
        if (value <= bounds[i])
            s[i].value += 1;
    s[n_bounds].value += 1;
    s[n_bounds + 1].value += value;
    s[n_bounds + 2].value += 1;
}

void metrics_counter_add(const char *name, const char *help, const char *labels, uint64_t delta)
{
    find_or_add(name, help, labels, METRIC_COUNTER)->value += (double)delta;
}

void metrics_gauge_set(const char *name, const char *help, const char *labels, double value)
{
    find_or_add(name, help, labels, METRIC_GAUGE)->value = value;
}

double metrics_value(const char *name, const char *labels)
{
    labels = labels ? labels : "";
    for (size_t i = 0; i < g_len; i++)
        if (strcmp(g_series[i].name, name) == 0 && strcmp(g_series[i].labels, labels) == 0)
            return g_series[i].value;
    return 0;
}

char *metrics_render(size_t *len)
{
    char *out = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&out, &size);
    if (!f)
        abort();
    static const char *const type_names[] = {
        [METRIC_COUNTER] = "counter", [METRIC_GAUGE] = "gauge", [METRIC_HISTOGRAM] = "histogram"};
    for (size_t i = 0; i < g_len; i++) {
        bool first = true;
        for (size_t j = 0; j < i && first; j++)
            first = strcmp(g_series[j].name, g_series[i].name) != 0;
        if (!first)
            continue; /* already emitted with its group */
        fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", g_series[i].name, g_series[i].help,
                g_series[i].name, type_names[g_series[i].type]);
        for (size_t j = i; j < g_len; j++) {
            const struct series *s = &g_series[j];
            if (strcmp(s->name, g_series[i].name) != 0)
                continue;
            fprintf(f, "%s%s%s%s%s %.17g\n", s->name, s->suffix, *s->labels ? "{" : "", s->labels,
                    *s->labels ? "}" : "", s->value);
        }
    }
    fclose(f);
    if (len)
        *len = size;
    return out;
}

void metrics_reset(void)
{
    for (size_t i = 0; i < g_len; i++) {
        free(g_series[i].name);
        free(g_series[i].help);
        free(g_series[i].labels);
    }
    free(g_series);
    g_series = NULL;
    g_len = 0;
}
