/*
 * rules_watch.c - rules files and directories watched through libuv (see rules_watch.h).
 */
#include "server/rules_watch.h"

#include <libgen.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/log.h"

typedef struct watched {
    uv_fs_event_t ev;
    char path[4096];
    char only[256]; /* the directory a path is in: the path's own name, the one that matters */
    struct rules_watch *w;
} watched_t;

struct rules_watch {
    uv_timer_t debounce;
    uint64_t debounce_ms;
    rules_watch_fn fn;
    void *arg;
    size_t n, open; /* watches, and handles not closed yet */
    watched_t *items;
};

static void on_closed(uv_handle_t *h)
{
    rules_watch_t *w = h->data;
    if (--w->open == 0) {
        free(w->items);
        free(w);
    }
}

static void on_debounced(uv_timer_t *t);

static bool ends_with(const char *s, const char *tail)
{
    size_t n = strlen(s), k = strlen(tail);
    return n > k && strcmp(s + n - k, tail) == 0;
}

/*
 * Whether a change to `name` (NULL: unknown) seen by x can change the rules: a ConfigMap's swap
 * ("..data", "..data_tmp"); in the directory a path is in, that path's name; in a watched path
 * itself, its own name (a file) or a rules file in it (a directory: *.yaml, *.yml, not a dot
 * file). Anything else (a config store's database beside the rules, an editor's swap file) is
 * not a reason to reload: a reload imports the files again, over rules changed since through
 * the API.
 */
static bool matters(const watched_t *x, const char *name)
{
    if (name == NULL || strncmp(name, "..data", 6) == 0) {
        return true;
    }
    if (x->only[0] != '\0') {
        return strcmp(name, x->only) == 0;
    }
    const char *slash = strrchr(x->path, '/');
    if (strcmp(name, slash != NULL ? slash + 1 : x->path) == 0) {
        return true;
    }
    return name[0] != '.' && (ends_with(name, ".yaml") || ends_with(name, ".yml"));
}

static void on_change(uv_fs_event_t *ev, const char *name, int events, int status)
{
    (void)events;
    (void)status;
    watched_t *x = ev->data;
    if (matters(x, name)) {
        uv_timer_start(&x->w->debounce, on_debounced, x->w->debounce_ms, 0);
    }
}

/* (Re)starts one watch on what its path names now. */
static void arm(watched_t *x)
{
    uv_fs_event_stop(&x->ev);
    int rc = uv_fs_event_start(&x->ev, on_change, x->path, 0);
    if (rc != 0) {
        log_warn("rules: cannot watch %s: %s (watched again after the next change)", x->path,
                 uv_strerror(rc));
    }
}

static void on_debounced(uv_timer_t *t)
{
    rules_watch_t *w = t->data;
    for (size_t i = 0; i < w->n; i++) {
        arm(&w->items[i]);
    }
    w->fn(w->arg);
}

rules_watch_t *rules_watch_start(uv_loop_t *loop, char *const *paths, size_t n,
                                 uint64_t debounce_ms, rules_watch_fn fn, void *arg)
{
    rules_watch_t *w = calloc(1, sizeof *w);
    watched_t *items = calloc(2 * n + 1, sizeof *items);
    if (w == NULL || items == NULL) {
        free(w);
        free(items);
        return NULL;
    }
    *w = (rules_watch_t){.debounce_ms = debounce_ms, .fn = fn, .arg = arg, .items = items};
    uv_timer_init(loop, &w->debounce);
    w->debounce.data = w;
    w->open = 1;
    for (size_t i = 0; i < n; i++) { /* the path, and the directory it is in */
        for (int k = 0; k < 2; k++) {
            watched_t *x = &w->items[w->n];
            snprintf(x->path, sizeof x->path, "%s", paths[i]);
            if (k == 1) {
                char copy[sizeof x->path];
                snprintf(copy, sizeof copy, "%s", paths[i]);
                snprintf(x->path, sizeof x->path, "%s", dirname(copy));
                snprintf(copy, sizeof copy, "%s", paths[i]);
                snprintf(x->only, sizeof x->only, "%s", basename(copy));
            }
            x->w = w;
            uv_fs_event_init(loop, &x->ev);
            x->ev.data = x;
            w->n++;
            w->open++;
            arm(x);
        }
    }
    return w;
}

void rules_watch_stop(rules_watch_t *w)
{
    if (w == NULL) {
        return;
    }
    for (size_t i = 0; i < w->n; i++) {
        uv_fs_event_stop(&w->items[i].ev);
        w->items[i].ev.data = w;
        uv_close((uv_handle_t *)&w->items[i].ev, on_closed);
    }
    uv_close((uv_handle_t *)&w->debounce, on_closed);
}
