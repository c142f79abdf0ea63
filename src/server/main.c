/*
 * main.c - sluiced: configuration, start-up, the main thread's timers and signals, shutdown.
 *
 * The main thread owns no client connections. It loads the rules and the snapshot, starts the
 * config store's thread (which polls the store's version from then on) and the loops, starts
 * the periodic snapshots, and handles signals:
 *   SIGTERM, SIGINT  stop accepting, answer what was read, wait for a snapshot being written,
 *                    write a last one, exit 0
 *   SIGHUP           re-import --rules FILE (if given) and reload the rules (on the config
 *                    store's thread); read the TLS certificate and key again
 * and watches the rules files (rules_watch.h) and the TLS files, so a renewed certificate (a
 * file rewritten, a Kubernetes Secret's link swap) is read again with no signal.
 * A service manager that started it with $NOTIFY_SOCKET (systemd's Type=notify) is told READY=1
 * once every port listens, and STOPPING=1 on SIGTERM or SIGINT (notify.h).
 *
 * A periodic snapshot is written on a thread of its own, started for it and ended with it, at
 * the lowest CPU priority (SCHED_IDLE), so that neither the main loop's signals and timers nor,
 * on a shared core, the loops wait for a write of millions of keys. One at a time: a tick that
 * finds one still being written is skipped. The last snapshot, at shutdown, is written on the
 * main thread once the loops have stopped and any snapshot under way has finished.
 */
#define _GNU_SOURCE /* SCHED_IDLE */
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uv.h>

#include "proto/netaddr.h"
#include "server/grpc_front.h"
#include "server/http_front.h"
#include "engine/events.h"
#include "engine/log.h"
#include "engine/notify.h"
#include "server/resp_front.h"
#include "server/rules_watch.h"
#include "engine/rules_import.h"
#include "rules/ruledef.h"
#include "server/server.h"
#include "server/tls.h"
#include "store/snapshot.h"
#include "sluice/version.h"

/* The periodic snapshot being written on its own thread. Main thread only, but for the result
 * fields, which the snapshot thread writes before it signals `done` and the main thread reads
 * after joining it. */
typedef struct snapshot_run {
    uv_thread_t thread;
    bool running;   /* a thread was started and not yet joined */
    bool skipped;   /* a tick found one still running (reported once) */
    int64_t now_ns; /* the snapshot's time, ns */
    int rc;         /* engine_save_snapshot's result */
    size_t keys;    /* keys written */
    char err[ENGINE_ERR_MAX];
} snapshot_run_t;

typedef struct main_ctx {
    server_t srv;
    uv_loop_t loop;
    uv_signal_t sig_term, sig_int, sig_hup;
    uv_timer_t snapshot_timer;
    uv_timer_t relieve_timer; /* every poll interval: idle keys evicted near --max-memory */
    uv_async_t snapshot_done; /* the snapshot thread finished */
    uv_timer_t stop_timer;    /* --stop-delay: from the first stop signal to the stop */
    bool stop_asked;          /* a stop signal came (the delay is running) */
    snapshot_run_t snap;
    rules_watch_t *watch;     /* the rules files and directories, when there are any */
    rules_watch_t *tls_watch; /* the TLS certificate, key and client CAs, with TLS */
    char *tls_paths[3];       /* what tls_watch watches */
} main_ctx_t;

#define TLS_WATCH_MS 200 /* after a change to a TLS file, wait this long for more (its pair) */

/* The first load, before the config store's thread runs. */
static int load_rules(main_ctx_t *m)
{
    char err[ENGINE_ERR_MAX];
    if (engine_reload(m->srv.engine, engine_store(m->srv.engine), true, err) < 0) {
        fprintf(stderr, "sluiced: rules not loaded: %s\n", err);
        return -1;
    }
    engine_collect(m->srv.engine);
    return 0;
}

static bool snapshots_on(const main_ctx_t *m)
{
    const char *path = m->srv.cfg->snapshot_path;
    return path != NULL && path[0] != '\0';
}

/* Counts and logs a snapshot's outcome. */
static void snapshot_record(main_ctx_t *m, int rc, int64_t now_ns, size_t keys, const char *err)
{
    const char *path = m->srv.cfg->snapshot_path;
    if (rc != 0) {
        atomic_fetch_add(&m->srv.snapshot_errors, 1);
        log_error("snapshot %s not written: %s", path, err);
        return;
    }
    atomic_fetch_add(&m->srv.snapshots, 1);
    atomic_store(&m->srv.last_snapshot_ns, now_ns);
    log_debug("snapshot %s: %zu keys", path, keys);
}

/* Writes a snapshot on this thread (the last one, at shutdown; or when no thread could start).
 * Returns 0, or -1 when it was not written (logged). */
static int save_snapshot_now(main_ctx_t *m)
{
    if (!snapshots_on(m)) {
        return 0;
    }
    char err[ENGINE_ERR_MAX];
    size_t keys = 0;
    int64_t now_ns = sl_now_ns();
    int rc = engine_save_snapshot(m->srv.engine, m->srv.cfg->snapshot_path, now_ns, &keys, err);
    snapshot_record(m, rc, now_ns, keys, err);
    return rc != 0 ? -1 : 0;
}

static void snapshot_thread(void *arg)
{
    main_ctx_t *m = arg;
    snapshot_run_t *r = &m->snap;
    sigset_t main_only; /* the main thread's (server_signals) */
    server_signals(&main_only);
    pthread_sigmask(SIG_BLOCK, &main_only, NULL);
#ifdef SCHED_IDLE
    /* any runnable thread of the machine goes first; the write takes what is left */
    struct sched_param none = {.sched_priority = 0};
    pthread_setschedparam(pthread_self(), SCHED_IDLE, &none);
#endif
    r->rc =
        engine_save_snapshot(m->srv.engine, m->srv.cfg->snapshot_path, r->now_ns, &r->keys, r->err);
    uv_async_send(&m->snapshot_done);
}

/* Joins the snapshot thread, if one ran, and records its outcome. Blocks until it finished. */
static void snapshot_join(main_ctx_t *m)
{
    snapshot_run_t *r = &m->snap;
    if (!r->running) {
        return;
    }
    uv_thread_join(&r->thread);
    r->running = false;
    snapshot_record(m, r->rc, r->now_ns, r->keys, r->err);
}

static void on_snapshot_done(uv_async_t *a)
{
    snapshot_join(a->data); /* the thread has signalled: it is ending, the join is short */
}

/* Near --max-memory, idle keys of every rule make room for the others (engine_relieve): here on
 * the main thread, which decides nothing and looks nothing up. */
static void on_relieve_timer(uv_timer_t *t)
{
    main_ctx_t *m = t->data;
    engine_relieve(m->srv.engine, sl_now_ns());
}

static void on_snapshot_timer(uv_timer_t *t)
{
    main_ctx_t *m = t->data;
    snapshot_run_t *r = &m->snap;
    if (r->running) {
        if (!r->skipped) {
            log_warn("a snapshot takes longer than --snapshot-interval: the ticks that come "
                     "while one is being written are skipped");
            r->skipped = true;
        }
        return;
    }
    r->now_ns = sl_now_ns();
    r->rc = 0;
    r->keys = 0;
    r->err[0] = '\0';
    r->running = uv_thread_create(&r->thread, snapshot_thread, m) == 0;
    if (!r->running) {
        log_warn("no thread for the snapshot: writing it on the main thread");
        save_snapshot_now(m);
    }
}
/* Tells a service manager that started sluiced as Type=notify (see notify.h) state; a failure
 * is only logged: sluiced serves all the same. */
static void tell_manager(const char *state)
{
    char err[NOTIFY_ERR_MAX];
    if (notify_manager(state, err) < 0) {
        log_warn("could not tell the service manager %s: %s", state, err);
    }
}

static void on_stop_delay_end(uv_timer_t *t)
{
    main_ctx_t *m = t->data;
    log_info("stop delay over: stopping");
    uv_stop(&m->loop);
}

/* SIGTERM or SIGINT. With --stop-delay, the first one turns the health checks to failing and
 * stops after the delay (requests are served meanwhile, so that a load balancer's probes take
 * sluiced out of rotation before its ports close); a second one, or none, stops at once. */
static void on_stop_signal(uv_signal_t *s, int signum)
{
    main_ctx_t *m = s->data;
    const char *name = signum == SIGTERM ? "SIGTERM" : "SIGINT";
    int64_t delay_ns = m->srv.cfg->stop_delay_ns;
    if (m->stop_asked) {
        log_info("%s again: stopping now", name);
        uv_stop(&m->loop);
        return;
    }
    m->stop_asked = true;
    atomic_store(&m->srv.draining, true);
    tell_manager("STOPPING=1");
    if (delay_ns <= 0) {
        log_info("%s: stopping", name);
        uv_stop(&m->loop);
        return;
    }
    char shown[32];
    ruledef_format_duration(delay_ns, shown);
    log_info("%s: health checks failing, stopping in %s (another signal stops at once)", name,
             shown);
    uv_timer_start(&m->stop_timer, on_stop_delay_end, (uint64_t)(delay_ns / SL_NS_PER_MS), 0);
}

/* The rules files (--rules or --rules-replace; *n of them, 0: none) and how they are imported. */
static char *const *rules_files(const server_settings_t *cfg, config_import_mode_t *mode, size_t *n)
{
    bool replace = cfg->nrules_replace > 0;
    *mode = replace ? CONFIG_IMPORT_REPLACE : CONFIG_IMPORT_FILE;
    *n = replace ? cfg->nrules_replace : cfg->nrules;
    return replace ? cfg->rules_replace_paths : cfg->rules_paths;
}

/* Which files of a rules directory are read (--rules-files; checked by the settings). */
static rules_walk_t rules_walk(const server_settings_t *cfg)
{
    const char *w = cfg->rules_walk != NULL ? cfg->rules_walk : "yaml";
    return strcmp(w, "all") == 0            ? RULES_WALK_ALL
           : strcmp(w, "all-dotfiles") == 0 ? RULES_WALK_DOTFILES
                                            : RULES_WALK_YAML;
}

/* Imports the rules files into store and logs what changed. Returns what rules_import_files
 * does (err says why on failure). */
static int import_rules(const server_settings_t *cfg, engine_t *engine, config_store_t *store,
                        const char *when, char *err, size_t cap)
{
    config_import_mode_t mode;
    size_t n = 0;
    char *const *paths = rules_files(cfg, &mode, &n);
    config_import_diff_t diff;
    rules_import_opts_t opts = {.mode = mode,
                                .origin = "file",
                                .check = engine_rule_check,
                                .check_arg = engine,
                                .walk = rules_walk(cfg)};
    int rc = rules_import_files(store, paths, n, &opts, &diff, err, cap);
    if (rc == 0) {
        char source[4096];
        int used = snprintf(source, sizeof source, "%srules file%s", when, n > 1 ? "s" : "");
        for (size_t i = 0; i < n && used > 0 && (size_t)used < sizeof source; i++) {
            used += snprintf(source + used, sizeof source - (size_t)used, "%s%s",
                             i > 0 ? ", " : " ", paths[i]);
        }
        rules_import_log(source, &diff);
        config_import_diff_free(&diff);
    }
    return rc;
}

/* SIGHUP's work, on the config store's thread: re-import the rules file, reload. */
typedef struct hup_job {
    config_job_t job; /* first */
    engine_t *engine;
    const server_settings_t *cfg;
    const char *when; /* "SIGHUP: ", "rules changed: " */
} hup_job_t;

static int hup_run(config_job_t *job, config_store_t *store, bool last)
{
    hup_job_t *h = (hup_job_t *)job;
    char err[1024];
    config_import_mode_t mode;
    size_t nfiles = 0;
    if ((rules_files(h->cfg, &mode, &nfiles), nfiles > 0)) {
        int rc = import_rules(h->cfg, h->engine, store, h->when, err, sizeof err);
        if (rc == RULES_IMPORT_ESTORE && !last && config_store_busy(store)) {
            return CONFIG_JOB_RETRY;
        }
        if (rc != 0) {
            event_note(EV_RULES_RELOAD_FAILED, "%srules not reloaded (the rules in force stay): %s",
                       h->when, err);
            return CONFIG_JOB_DONE;
        }
    }
    if (engine_reload(h->engine, store, true, err) < 0) {
        event_note(EV_RULES_RELOAD_FAILED, "%srules not reloaded (the rules in force stay): %s",
                   h->when, err);
    } else {
        log_info("rules version %lld in force", (long long)engine_version(h->engine));
    }
    engine_collect(h->engine);
    return CONFIG_JOB_DONE;
}

static void hup_free(config_job_t *job)
{
    free(job);
}

/* Re-imports the rules files and reloads, on the config store's thread; `when` starts its
 * messages. */
static void reload_rules(main_ctx_t *m, const char *when)
{
    hup_job_t *h = calloc(1, sizeof *h);
    if (h == NULL) {
        log_error("%sout of memory", when);
        return;
    }
    *h = (hup_job_t){.job = {.run = hup_run, .done = hup_free, .drop = hup_free, .admin = true},
                     .engine = m->srv.engine,
                     .cfg = m->srv.cfg,
                     .when = when};
    engine_submit_main(m->srv.engine, &h->job);
}

/* A change seen in a watched rules file or directory (rules_watch.h). */
static void on_rules_changed(void *arg)
{
    reload_rules(arg, "rules changed: ");
}

/* A renewed certificate: new connections take it; one that fails to load changes nothing. */
static void reload_tls(main_ctx_t *m, const char *when)
{
    if (m->srv.tls == NULL) {
        return;
    }
    char err[TLS_ERR_MAX];
    if (tls_ctx_reload(m->srv.tls, err) != 0) {
        log_error("%s%s (the certificate in use stays)", when, err);
    } else {
        log_info("%sTLS certificate %s read again", when, m->srv.cfg->tls_cert);
    }
}

/* A change seen in a TLS file (a key written after its certificate is a second change, read
 * again then). */
static void on_tls_changed(void *arg)
{
    reload_tls(arg, "TLS files changed: ");
}

static void on_hup(uv_signal_t *s, int signum)
{
    (void)signum;
    main_ctx_t *m = s->data;
    reload_tls(m, "SIGHUP: ");
    reload_rules(m, "SIGHUP: ");
}

static void load_snapshot(main_ctx_t *m)
{
    const char *path = m->srv.cfg->snapshot_path;
    int64_t now_ns = sl_now_ns();
    if (path == NULL || path[0] == '\0') {
        engine_load_snapshot(m->srv.engine, "", now_ns, NULL, (char[ENGINE_ERR_MAX]){0});
        return;
    }
    char err[ENGINE_ERR_MAX];
    size_t keys = 0;
    int rc = engine_load_snapshot(m->srv.engine, path, now_ns, &keys, err);
    if (rc == 0) {
        log_info("snapshot %s loaded: %zu keys", path, keys);
    } else if (rc > 0) {
        log_info("no snapshot at %s: cold start", path);
    } else {
        char aside[4096] = "", serr[SNAPSHOT_ERR_MAX];
        log_error("snapshot %s unusable, cold start: %s", path, err);
        if (snapshot_set_aside(path, now_ns, aside, serr) == 0) {
            log_error("the unusable snapshot was moved to %s", aside);
        } else {
            log_error("could not move the unusable snapshot aside: %s", serr);
        }
    }
}

static int parse_trusted(server_t *srv)
{
    server_settings_t *cfg = srv->cfg;
    netaddr_net_t *nets = calloc(cfg->ntrusted ? cfg->ntrusted : 1, sizeof *nets);
    if (nets == NULL) {
        return -1;
    }
    for (size_t i = 0; i < cfg->ntrusted; i++) {
        const char *s = cfg->trusted_proxies[i];
        if (netaddr_net_parse(s, strlen(s), &nets[i]) != NETADDR_OK) {
            fprintf(stderr, "sluiced: trusted proxy '%s' is not an address or network\n", s);
            free(nets);
            return -1;
        }
    }
    srv->trusted = nets;
    srv->ntrusted = cfg->ntrusted;
    return 0;
}

/* Which port speaks which protocol: a port set to 0 is not listened on. */
static void add_listeners(server_t *srv)
{
    const server_settings_t *cfg = srv->cfg;
    if (cfg->resp_port > 0) {
        server_listen(srv, &resp_protocol, cfg->resp_port, cfg->tls_mask & SETTINGS_TLS_RESP);
    }
    if (cfg->http_port > 0) {
        server_listen(srv, &http_protocol, cfg->http_port, cfg->tls_mask & SETTINGS_TLS_HTTP);
    }
    if (cfg->grpc_port > 0) {
        server_listen(srv, &grpc_protocol, cfg->grpc_port, cfg->tls_mask & SETTINGS_TLS_GRPC);
    }
}

/* Reads the settings (defaults, file, flags, environment) into cfg and checks the admin secrets.
 * Returns -1 to go on, else the exit status: 0 after --help or --version, 2 for bad settings
 * (said on stderr; cfg freed). */
static int read_settings(server_settings_t *cfg, int argc, char **argv)
{
    char err[1024], admin_warning[512];
    server_settings_defaults(cfg);
    int rc = server_settings_parse(cfg, argc, argv, err, sizeof err);
    if (rc == 0) {
        log_set_level(cfg->log_level);
        rc = server_settings_admin_check(cfg, admin_warning, sizeof admin_warning, err, sizeof err);
        if (rc == 0 && admin_warning[0] != '\0') {
            log_warn("%s", admin_warning);
        }
        if (rc != 0) {
            rc = -1; /* the admin check's error */
        }
    }
    if (rc != 0) {
        if (rc < 0) {
            fprintf(stderr, "sluiced: %s\n", err);
        }
        server_settings_free(cfg);
        return rc > 0 ? 0 : 2;
    }
    return -1;
}

/* The engine from the settings: created, its rules imported and loaded, the snapshot read, its
 * threads started. 0, or -1 with the reason on stderr. */
static int start_engine(main_ctx_t *m, const server_settings_t *cfg, char *store_name)
{
    char err[1024];
    engine_settings_t ec = {.store_url = cfg->config_store,
                            .workers = (unsigned)cfg->threads,
                            .key_max = cfg->key_max,
                            .max_memory = cfg->max_memory,
                            .override_ttl_ns = cfg->override_ttl_ns,
                            .override_timeout_ns = cfg->override_timeout_ns,
                            .request_store = cfg->request_store,
                            .store_timeout_ns = cfg->store_timeout_ns,
                            .max_inline = cfg->max_inline,
                            .max_inline_address = cfg->max_inline_address,
                            .metrics_inline = cfg->metrics_inline};
    if (engine_create(&ec, &m->srv.engine, err) != 0) {
        fprintf(stderr, "sluiced: %s\n", err);
        return -1;
    }
    /* the store without its password, before the config thread owns it */
    config_store_describe(engine_store(m->srv.engine), store_name);
    config_import_mode_t mode;
    size_t nfiles = 0;
    if ((rules_files(cfg, &mode, &nfiles), nfiles > 0) &&
        import_rules(cfg, m->srv.engine, engine_store(m->srv.engine), "", err, sizeof err) != 0) {
        fprintf(stderr, "sluiced: %s\n", err);
        return -1;
    }
    if (load_rules(m) != 0) {
        return -1;
    }
    load_snapshot(m);
    if (engine_start(m->srv.engine, cfg->poll_interval_ns, err) != 0) {
        fprintf(stderr, "sluiced: %s\n", err);
        return -1;
    }
    return 0;
}

/* The listeners opened and the loops started, each address logged. 0, or -1 (said on stderr). */
static int start_server(main_ctx_t *m, const server_settings_t *cfg)
{
    char err[1024];
    add_listeners(&m->srv);
    if (server_start(&m->srv, err, sizeof err) != 0) {
        fprintf(stderr, "sluiced: %s\n", err);
        return -1;
    }
    for (size_t b = 0; b < cfg->nbind; b++) {
        for (size_t k = 0; k < m->srv.nlisten; k++) {
            const server_listener_t *sl = &m->srv.listen[k];
            log_info("listening on %s port %d (%s%s)", cfg->bind[b], sl->port, sl->proto->label,
                     sl->tls ? " over TLS" : "");
        }
    }
    return 0;
}

/* The main thread's loop until SIGTERM or SIGINT: signals, the snapshot and relief timers. */
static void run_main_loop(main_ctx_t *m, const server_settings_t *cfg)
{
    uv_loop_init(&m->loop);
    uv_signal_init(&m->loop, &m->sig_term);
    uv_signal_init(&m->loop, &m->sig_int);
    uv_signal_init(&m->loop, &m->sig_hup);
    m->sig_term.data = m->sig_int.data = m->sig_hup.data = m;
    uv_signal_start(&m->sig_term, on_stop_signal, SIGTERM);
    uv_signal_start(&m->sig_int, on_stop_signal, SIGINT);
    uv_signal_start(&m->sig_hup, on_hup, SIGHUP);
    uv_timer_init(&m->loop, &m->snapshot_timer);
    m->snapshot_timer.data = m;
    uv_timer_init(&m->loop, &m->relieve_timer);
    m->relieve_timer.data = m;
    uv_timer_init(&m->loop, &m->stop_timer);
    m->stop_timer.data = m;
    uint64_t poll_ms = (uint64_t)(cfg->poll_interval_ns / SL_NS_PER_MS) + 1;
    if (cfg->max_memory > 0) {
        uv_timer_start(&m->relieve_timer, on_relieve_timer, poll_ms, poll_ms);
    }
    uv_async_init(&m->loop, &m->snapshot_done, on_snapshot_done);
    m->snapshot_done.data = m;
    uint64_t snap_ms = (uint64_t)(cfg->snapshot_interval_ns / SL_NS_PER_MS);
    if (snap_ms > 0 && snapshots_on(m)) {
        uv_timer_start(&m->snapshot_timer, on_snapshot_timer, snap_ms, snap_ms);
    }
    config_import_mode_t mode;
    size_t nfiles = 0;
    char *const *paths = rules_files(cfg, &mode, &nfiles);
    if (nfiles > 0 && cfg->rules_watch_ns > 0) {
        uint64_t debounce_ms = (uint64_t)(cfg->rules_watch_ns / SL_NS_PER_MS);
        m->watch = rules_watch_start(&m->loop, paths, nfiles, rules_walk(cfg) != RULES_WALK_YAML,
                                     debounce_ms > 0 ? debounce_ms : 1, on_rules_changed, m);
    }
    if (m->srv.tls != NULL) {
        size_t nt = 0;
        m->tls_paths[nt++] = cfg->tls_cert;
        m->tls_paths[nt++] = cfg->tls_key;
        if (cfg->tls_client_ca != NULL) {
            m->tls_paths[nt++] = cfg->tls_client_ca;
        }
        m->tls_watch =
            rules_watch_start(&m->loop, m->tls_paths, nt, false, TLS_WATCH_MS, on_tls_changed, m);
    }
    uv_run(&m->loop, UV_RUN_DEFAULT);
}

/* Stops the loops and the engine, writes the final snapshot and closes the main loop. 0, or 1
 * when the final snapshot failed (the keys' usage since the last one is lost: the exit says so,
 * for the service manager and whoever restarts it). */
static int stop_all(main_ctx_t *m)
{
    server_stop(&m->srv);
    engine_stop(m->srv.engine);
    snapshot_join(m); /* a snapshot under way finishes first: both write PATH.tmp */
    int final_rc = save_snapshot_now(m);
    /* Closing its last handle of a signal, libuv gives the signal back its default action,
     * which would end a process already stopping with status 143 at a second SIGTERM (a
     * supervisor's, a user's second Ctrl-C). So the signals are ignored from then on, and
     * blocked while the handles close: no thread takes one between the default action's return
     * and SIG_IGN (the other threads block them: server_signals), and one that arrives then
     * stays pending until SIG_IGN discards it. */
    sigset_t stops;
    server_signals(&stops);
    pthread_sigmask(SIG_BLOCK, &stops, NULL);
    uv_close((uv_handle_t *)&m->sig_term, NULL);
    uv_close((uv_handle_t *)&m->sig_int, NULL);
    uv_close((uv_handle_t *)&m->sig_hup, NULL);
    signal(SIGTERM, SIG_IGN);
    signal(SIGINT, SIG_IGN);
    signal(SIGHUP, SIG_IGN);
    rules_watch_stop(m->watch);
    rules_watch_stop(m->tls_watch);
    uv_close((uv_handle_t *)&m->snapshot_timer, NULL);
    uv_close((uv_handle_t *)&m->relieve_timer, NULL);
    uv_close((uv_handle_t *)&m->stop_timer, NULL);
    uv_close((uv_handle_t *)&m->snapshot_done, NULL);
    uv_run(&m->loop, UV_RUN_DEFAULT);
    uv_loop_close(&m->loop);
    if (final_rc != 0) {
        log_error("stopped without the final snapshot: the keys' usage since the last snapshot "
                  "is lost");
        return 1;
    }
    log_info("stopped");
    return 0;
}

int main(int argc, char **argv)
{
    static main_ctx_t m;
    server_settings_t cfg;
    int rc = read_settings(&cfg, argc, argv);
    if (rc >= 0) {
        return rc;
    }
    signal(SIGPIPE, SIG_IGN);
    m.srv.cfg = &cfg;
    m.srv.started_ns = sl_now_ns();
    if (parse_trusted(&m.srv) != 0) {
        server_settings_free(&cfg);
        return 2;
    }
    rc = 1; /* from here on, a failure to start */
    char err[1024], store_name[CONFIG_STORE_NAME_MAX];
    if (cfg.tls_cert != NULL &&
        tls_ctx_new(cfg.tls_cert, cfg.tls_key, cfg.tls_client_ca, &m.srv.tls, err) != 0) {
        fprintf(stderr, "sluiced: %s\n", err);
    } else if (start_engine(&m, &cfg, store_name) == 0 && start_server(&m, &cfg) == 0) {
        log_info("sluiced %s ready: %d threads, rules version %lld from %s, request store %s",
                 SL_VERSION_STRING, cfg.threads, (long long)engine_version(m.srv.engine),
                 store_name, engine_store_name(m.srv.engine));
        tell_manager("READY=1");
        run_main_loop(&m, &cfg);
        rc = stop_all(&m);
    }
    engine_free(m.srv.engine);
    tls_ctx_free(m.srv.tls);
    free(m.srv.trusted);
    server_settings_free(&cfg);
    return rc;
}
