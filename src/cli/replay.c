/*
 * replay.c - the replay loop of `sluice replay`: all its I/O. getline() into one growing buffer
 * (lines may be arbitrarily long; only the key is bounded), each line parsed in its format
 * (proto/replay_formats.h) and decided by proto/replay.h (the code sluiced's POST /v1/replay runs
 * too), one output line per request, and the optional summary from the replay's tally.
 */
#include "replay.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

/* ---- the summary ------------------------------------------------------------------------- */

static void tally_print(const replay_tally_t *t, FILE *out)
{
    fputs("# summary\n", out);
    for (size_t e = 0; e < t->n; e++) {
        fputs("# ", out);
        fwrite(t->keys[e].key, 1, t->keys[e].key_len, out);
        fprintf(out, " admitted=%" PRIu64 " rejected=%" PRIu64 "\n", t->keys[e].admitted,
                t->keys[e].rejected);
    }
    fprintf(out, "# total admitted=%" PRIu64 " rejected=%" PRIu64 "\n", t->admitted, t->rejected);
}

/* ---- the loop ---------------------------------------------------------------------------- */

static void print_decision(FILE *out, const struct replay_config *cfg,
                           const struct replay_request *req, const sl_decision_t *d)
{
    fprintf(out, "%" PRId64 "\t", req->time);
    fwrite(req->key, 1, req->key_len, out);
    fprintf(out, "\t%" PRId64 "\t%d\t%" PRId64 "\t%" PRId64 "\t%" PRId64 "\t%" PRId64, req->cost,
            d->allowed ? 1 : 0, d->limit, d->remaining,
            sl_ns_to_units_ceil(d->retry_after_ns, cfg->unit_ns),
            sl_ns_to_units_ceil(d->reset_after_ns, cfg->unit_ns));
    if (cfg->show_delay) {
        fprintf(out, "\t%" PRId64, sl_ns_to_units_ceil(d->delay_ns, cfg->unit_ns));
    }
    fputc('\n', out);
}

/* Flushes out, then writes "sluice: NAME:LINE: message" to errs. */
static void report(FILE *out, FILE *errs, const char *in_name, uintmax_t lineno, const char *msg)
{
    fflush(out);
    fprintf(errs, "sluice: %s:%ju: %s\n", in_name, lineno, msg);
}

int replay_run(const struct replay_config *cfg, FILE *in, const char *in_name, FILE *out,
               FILE *errs)
{
    sl_table_config_t tcfg = {.key_max = REPLAY_KEY_MAX};
    sl_table_t *table = NULL;
    replay_tally_t tally = {0};
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    uintmax_t lineno = 0;
    char msg[REPLAY_ERR_MAX];
    char keybuf[REPLAY_KEY_MAX]; /* a key decoded from the input (a JSON string) */
    int status = 0;

    int rc = sl_table_create(&cfg->rule, &tcfg, &table);
    if (rc != SL_OK) {
        fprintf(errs, "sluice: cannot create the key table: %s\n", sl_strerror(rc));
        return -1;
    }
    while (status == 0 && (n = getline(&line, &cap, in)) >= 0) {
        struct replay_request req;
        sl_decision_t d;

        lineno++;
        rc = replay_parse_record(&cfg->input, line, (size_t)n, cfg->unit_ns, &req, keybuf, msg,
                                 sizeof msg);
        if (rc == REPLAY_LINE_SKIP) {
            continue;
        }
        if (rc == REPLAY_LINE_ERROR) {
            report(out, errs, in_name, lineno, msg);
            status = -1;
            break;
        }
        rc = replay_step(table, cfg->summary ? &tally : NULL, &req, &d);
        if (rc != SL_OK) {
            report(out, errs, in_name, lineno, sl_strerror(rc));
            status = -1;
            break;
        }
        print_decision(out, cfg, &req, &d);
    }
    if (status == 0 && !feof(in)) {
        int e = errno;
        fflush(out);
        fprintf(errs, "sluice: %s: read error after line %ju: %s\n", in_name, lineno, strerror(e));
        status = -1;
    }
    if (status == 0 && cfg->summary) {
        tally_print(&tally, out);
    }
    if (fflush(out) != 0 || ferror(out)) {
        fprintf(errs, "sluice: write error: %s\n", strerror(errno));
        status = -1;
    }
    free(line);
    replay_tally_free(&tally);
    sl_table_free(table);
    return status;
}
