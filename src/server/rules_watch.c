/*
 * rules_watch.c - rules files and directories watched through libuv (see rules_watch.h).
 */
#include "server/rules_watch.h"

#include <libgen.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "engine/log.h"

#define LINKS_MAX 8               /* symbolic links on the way to one path that are watched */
#define SLOTS     (2 + LINKS_MAX) /* watches per path: itself, its directory, the links' */

typedef struct watched {
    uv_fs_event_t ev;
    char path[4096];  /* what is to be watched; "" = nothing (a link's slot unused) */
    char only[256];   /* the name in it that matters ("" = the path itself is watched) */
    char armed[4096]; /* what is watched now ("" = nothing) */
    dev_t dev;        /* and the directory or file it named then */
    ino_t ino;
    struct rules_watch *w;
} watched_t;

struct rules_watch {
    uv_timer_t debounce;
    uint64_t debounce_ms;
    rules_watch_fn fn;
    void *arg;
    bool any_name;      /* every name in a watched directory is a rules file */
    char *const *paths; /* the caller's */
    size_t npaths;      /* paths; SLOTS watches each */
    size_t n, open;     /* watches, and handles not closed yet */
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
 * ("..data", "..data_tmp"); in the directory a path or a link on its way is in, that path's or
 * link's name; in a watched path itself, its own name (a file) or a rules file in it (a
 * directory: *.yaml, *.yml, not a dot file; any name when every file is read). Anything else (a
 * config store's database beside the rules, an editor's swap file) is not a reason to reload: a
 * reload imports the files again, over rules changed since through the API.
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
    return x->w->any_name ||
           (name[0] != '.' && (ends_with(name, ".yaml") || ends_with(name, ".yml")));
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

/* (Re)starts one watch on what its path names now (none for an empty path). A watch already on
 * that path and that file is left alone: stopping it would drop the events it has queued but
 * the loop has not read yet (a change made just as a reload starts). */
static void arm(watched_t *x)
{
    struct stat st;
    bool found = x->path[0] != '\0' && stat(x->path, &st) == 0;
    if (found && x->armed[0] != '\0' && strcmp(x->armed, x->path) == 0 && st.st_dev == x->dev &&
        st.st_ino == x->ino) {
        return;
    }
    uv_fs_event_stop(&x->ev);
    x->armed[0] = '\0';
    if (x->path[0] == '\0') {
        return;
    }
    int rc = uv_fs_event_start(&x->ev, on_change, x->path, 0);
    if (rc != 0) {
        log_warn("rules: cannot watch %s: %s (watched again after the next change)", x->path,
                 uv_strerror(rc));
    } else if (found) {
        snprintf(x->armed, sizeof x->armed, "%s", x->path);
        x->dev = st.st_dev;
        x->ino = st.st_ino;
    }
}

/* Sets x to watch the directory `prefix` is in for prefix's name. */
static void plan_parent(watched_t *x, const char *prefix)
{
    char copy[sizeof x->path];
    snprintf(copy, sizeof copy, "%s", prefix);
    snprintf(x->path, sizeof x->path, "%s", dirname(copy));
    snprintf(copy, sizeof copy, "%s", prefix);
    snprintf(x->only, sizeof x->only, "%s", basename(copy));
}

/*
 * What the SLOTS watches of `path` (x[0..SLOTS)) watch now: the path itself, the directory it is
 * in (for its name), and for each symbolic link on its way (/srv/runtime/current in
 * /srv/runtime/current/ratelimit/config), the directory that link is in, for the link's name: a
 * link re-pointed (ln -sfn, mv -T) is a change there. Made again after each change, as a swap
 * may bring other links.
 */
static void plan(watched_t *x, const char *path)
{
    snprintf(x[0].path, sizeof x[0].path, "%s", path);
    x[0].only[0] = '\0';
    plan_parent(&x[1], path);
    size_t links = 0;
    char prefix[sizeof x->path];
    snprintf(prefix, sizeof prefix, "%s", path);
    for (char *p = prefix + 1; *p != '\0' && links < LINKS_MAX; p++) {
        struct stat st;
        if (*p != '/' || p[-1] == '/') {
            continue;
        }
        *p = '\0';
        const char *last = strrchr(prefix, '/');
        last = last != NULL ? last + 1 : prefix;
        if (strcmp(last, ".") != 0 && strcmp(last, "..") != 0 && lstat(prefix, &st) == 0 &&
            S_ISLNK(st.st_mode)) {
            plan_parent(&x[2 + links++], prefix);
        }
        *p = '/';
    }
    for (size_t k = 2 + links; k < SLOTS; k++) {
        x[k].path[0] = x[k].only[0] = '\0';
    }
}

static void on_debounced(uv_timer_t *t)
{
    rules_watch_t *w = t->data;
    for (size_t i = 0; i < w->npaths; i++) {
        plan(&w->items[i * SLOTS], w->paths[i]);
    }
    for (size_t i = 0; i < w->n; i++) {
        arm(&w->items[i]);
    }
    w->fn(w->arg);
}

rules_watch_t *rules_watch_start(uv_loop_t *loop, char *const *paths, size_t n, bool any_name,
                                 uint64_t debounce_ms, rules_watch_fn fn, void *arg)
{
    rules_watch_t *w = calloc(1, sizeof *w);
    watched_t *items = calloc(SLOTS * n + 1, sizeof *items);
    if (w == NULL || items == NULL) {
        free(w);
        free(items);
        return NULL;
    }
    *w = (rules_watch_t){.debounce_ms = debounce_ms,
                         .fn = fn,
                         .arg = arg,
                         .any_name = any_name,
                         .paths = paths,
                         .npaths = n,
                         .items = items};
    uv_timer_init(loop, &w->debounce);
    w->debounce.data = w;
    w->open = 1;
    for (size_t i = 0; i < n; i++) {
        plan(&w->items[i * SLOTS], paths[i]);
        for (int k = 0; k < SLOTS; k++) {
            watched_t *x = &w->items[w->n];
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
