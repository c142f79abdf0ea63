/*
 * rules_watch.h - the rules files and directories (--rules) watched on the main thread's loop
 * (uv_fs_event: inotify), so a change applies with no signal: an edit, a file added to or
 * removed from a directory, a Kubernetes ConfigMap's atomic update (its "..data" symbolic link
 * swapped to a new directory), a symbolic link on the way to a path re-pointed (envoyproxy/
 * ratelimit's RUNTIME_ROOT, /srv/runtime/current swapped to a new version's directory). Each
 * path is watched itself, through the directory it is in, and through the directory of each
 * symbolic link on its way, so a file replaced by a rename, or reached through a link that
 * moved, is still seen. Events
 * come in bursts (an editor writes, renames, changes modes; kubelet makes a directory, links,
 * renames, removes the old one): the caller's function runs once, debounce_ms after the last
 * event of a burst, and the watches are then made again on what the paths name now. main.c
 * watches the TLS certificate, key and client CAs the same way.
 */
#ifndef SLUICE_SERVER_RULES_WATCH_H
#define SLUICE_SERVER_RULES_WATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

typedef struct rules_watch rules_watch_t;

/* What runs after a burst of changes (on the loop's thread). */
typedef void (*rules_watch_fn)(void *arg);

/* Starts watching paths[0..n) (kept by the caller while watched) on loop. any_name: a change to
 * any name in a watched directory is one to the rules (every file of it is read), not only to
 * *.yaml and *.yml names. NULL when out of memory; a path that cannot be watched (gone, no
 * permission) is logged and watched again after the next change seen. */
rules_watch_t *rules_watch_start(uv_loop_t *loop, char *const *paths, size_t n, bool any_name,
                                 uint64_t debounce_ms, rules_watch_fn fn, void *arg);

/* Stops watching; the memory is freed once libuv has closed the handles (run the loop). NULL
 * is fine. */
void rules_watch_stop(rules_watch_t *w);

#endif /* SLUICE_SERVER_RULES_WATCH_H */
