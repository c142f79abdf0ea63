/*
 * store_stats.c - a request store's statistics, summed over the loops and written for /metrics
 * and INFO from the rows the store declares (store_stats.h).
 */
#include "store/store_stats.h"

#include <stdio.h>
#include <string.h>

void store_stats_add(store_stats_t *total, const store_stats_t *loop)
{
    bool shared[STORE_STAT_VALUES_MAX] = {false};
    for (size_t i = 0; i < loop->n; i++) {
        shared[loop->list[i].at] = shared[loop->list[i].at] || loop->list[i].shared;
    }
    total->list = loop->list;
    total->n = loop->n;
    for (size_t v = 0; v < STORE_STAT_VALUES_MAX; v++) {
        total->value[v] = shared[v] ? loop->value[v] : total->value[v] + loop->value[v];
    }
}

size_t store_stat_text(const store_stats_t *st, size_t i, char *out, size_t cap)
{
    const store_stat_t *row = &st->list[i];
    uint64_t v = st->value[row->at];
    int n = 0;
    switch (row->form) {
    case STORE_STAT_INT:
        n = snprintf(out, cap, "%llu", (unsigned long long)v);
        break;
    case STORE_STAT_SECONDS:
        n = snprintf(out, cap, "%.9f", (double)v / 1e9);
        break;
    case STORE_STAT_RATIO: {
        uint64_t over = st->value[row->over];
        n = snprintf(out, cap, "%.6f", over > 0 ? (double)v / (double)over : 0.0);
        break;
    }
    case STORE_STAT_NONE:
        n = snprintf(out, cap, "%d", v == 0 ? 1 : 0);
        break;
    }
    return n > 0 && (size_t)n < cap ? (size_t)n : 0;
}

/* Appends the values of labels (name="value",...) to out at *len, each after a '_'. */
static void label_values(const char *labels, char *out, size_t cap, size_t *len)
{
    for (const char *p = strchr(labels, '"'); p != NULL; p = strchr(p, '"')) {
        const char *end = strchr(p + 1, '"');
        if (end == NULL) {
            return;
        }
        size_t n = (size_t)(end - p - 1);
        if (*len + 1 + n >= cap) {
            *len = cap; /* did not fit */
            return;
        }
        out[(*len)++] = '_';
        memcpy(out + *len, p + 1, n);
        *len += n;
        p = end + 1;
    }
}

size_t store_stat_info_name(const store_stats_t *st, size_t i, char *out, size_t cap)
{
    const store_stat_t *row = &st->list[i];
    const char *name = row->metric;
    size_t n = strlen(name);
    if (strncmp(name, "sluice_", 7) == 0) {
        name += 7;
        n -= 7;
    }
    if (n > 6 && strcmp(name + n - 6, "_total") == 0) {
        n -= 6;
    }
    size_t suffix = strlen(row->suffix);
    if (n + suffix >= cap) {
        return 0;
    }
    memcpy(out, name, n);
    memcpy(out + n, row->suffix, suffix);
    size_t len = n + suffix;
    label_values(row->labels, out, cap, &len);
    if (len >= cap) {
        return 0;
    }
    out[len] = '\0';
    return len;
}

static const char *const kind_names[] = {
    [STORE_STAT_COUNTER] = "counter",
    [STORE_STAT_GAUGE] = "gauge",
    [STORE_STAT_SUMMARY] = "summary",
};

void store_stats_prometheus(const store_stats_t *st, buf_t *b)
{
    char text[64];
    for (size_t i = 0; i < st->n; i++) {
        const store_stat_t *row = &st->list[i];
        if (row->help != NULL) {
            buf_printf(b, "# HELP %s %s\n", row->metric, row->help);
            buf_printf(b, "# TYPE %s %s\n", row->metric, kind_names[row->kind]);
        }
        store_stat_text(st, i, text, sizeof text);
        if (row->labels[0] != '\0') {
            buf_printf(b, "%s%s{%s} %s\n", row->metric, row->suffix, row->labels, text);
        } else {
            buf_printf(b, "%s%s %s\n", row->metric, row->suffix, text);
        }
    }
}

void store_stats_info(const store_stats_t *st, buf_t *b)
{
    char name[128], text[64];
    for (size_t i = 0; i < st->n; i++) {
        if (store_stat_info_name(st, i, name, sizeof name) > 0) {
            store_stat_text(st, i, text, sizeof text);
            buf_printf(b, "%s:%s\r\n", name, text);
        }
    }
}
