/*
 * replay.h - `sluice replay`: replay a recorded traffic log against a candidate rule.
 *
 * Three layers, each usable without the next:
 *
 *   1. replay_parse_line() (proto/replay.h, shared with sluiced's POST /v1/replay): one input
 *      line -> one request. Pure: no I/O, no allocation, no global state.
 *   2. replay_parse_args(): the command's flags -> a prepared rule and options. No I/O either:
 *      errors come back as text for the caller to print.
 *   3. replay_run(): the loop. Reads lines from a FILE *, decides each request with one
 *      sl_table_t, writes one tab-separated line per request and, on request, a summary.
 *
 * Input format (one request per line), by --format: plain (the default), nginx (nginx's combined
 * access log, the key a field chosen by --key) or jsonl (JSON lines, the members named by --key,
 * --time-field and --cost-field): proto/replay_formats.h. The plain format:  TIME KEY [COST]
 *   - fields separated by spaces or tabs (any of " \t\r\v\f"), so CRLF files work;
 *   - TIME: a non-negative decimal integer in the input unit (--unit, default ms), or an RFC 3339
 *     timestamp;
 *   - KEY: any bytes but whitespace and NUL, 1..REPLAY_KEY_MAX bytes;
 *   - COST: a non-negative decimal integer, default 1 (0 = peek: report, consume nothing);
 *   - a line that is blank, or whose first non-blank byte is '#', is skipped.
 *
 * Output: TIME KEY COST ALLOWED LIMIT REMAINING RETRY_AFTER RESET_AFTER [DELAY], tab-separated,
 * durations in the input unit rounded up (-1 = never). DELAY is present only with --max-delay.
 */
#ifndef SLUICE_CLI_REPLAY_H
#define SLUICE_CLI_REPLAY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "sluice/sluice.h"

#include "proto/replay.h"
#include "proto/replay_formats.h"

/* Everything `sluice replay` needs to run, as parsed from its flags. */
struct replay_config {
    sl_rule_t rule;       /* prepared (sl_rule_prepare() succeeded) */
    int64_t unit_ns;      /* one TIME unit, ns: 1, 1000, 1000000 or 1000000000 */
    const char *unit;     /* its name for messages: "ns", "us", "ms" or "s" (static) */
    bool summary;         /* --summary: per-key and total counts after the requests */
    bool show_delay;      /* --max-delay given: add the DELAY column */
    const char *path;     /* FILE argument (points into argv), or "-" for stdin */
    replay_input_t input; /* --format, --key, --time-field, --cost-field (names point into argv) */
};

/* replay_parse_args() results. */
enum replay_args {
    REPLAY_ARGS_UNKNOWN = -2, /* unknown flag or missing value; err holds it (print usage too) */
    REPLAY_ARGS_USAGE = -1,   /* bad flag value or arguments; err holds the reason (exit 2) */
    REPLAY_ARGS_OK = 0,       /* *cfg is ready for replay_run() */
    REPLAY_ARGS_HELP = 1,     /* --help: print replay_usage() to stdout (exit 0) */
};

/*
 * Parses `sluice replay` flags. argv[0] is the command name ("replay"); argv is not modified
 * in content but may be permuted (getopt_long). Uses getopt_long and resets its global state,
 * so it is not thread-safe. Returns one of enum replay_args; on REPLAY_ARGS_USAGE or
 * REPLAY_ARGS_UNKNOWN err holds a message without the "sluice: " prefix (e.g. "--window:
 * malformed duration, got '10x' ..."). On REPLAY_ARGS_OK cfg->rule is prepared and cfg->path
 * is set ("-" when no FILE was given).
 */
int replay_parse_args(int argc, char **argv, struct replay_config *cfg, char *err, size_t errlen);

/* The usage text of `sluice replay` (static, ends in a newline). */
const char *replay_usage(void);

/*
 * Replays every line of `in` against cfg->rule with a fresh per-key table and writes one
 * output line per request to `out`; with cfg->summary, then "# summary", one "# KEY
 * admitted=N rejected=M" line per key in first-seen order and "# total admitted=N rejected=M".
 * `in_name` names the input in messages ("traffic.log", "<stdin>").
 *
 * At the first malformed line (or a read error, or a failed decision) it flushes what was
 * written so far, writes "sluice: IN_NAME:LINE: reason" to `errs`, prints no summary and
 * stops. Returns 0 on success, -1 after such an error (also for a write error on `out`).
 * Does not close any stream.
 */
int replay_run(const struct replay_config *cfg, FILE *in, const char *in_name, FILE *out,
               FILE *errs);

/*
 * The `sluice replay` command: parses flags, opens the input, runs. Messages go to stderr,
 * results to stdout. Returns the process exit code: 0 ok, 1 input error, 2 usage error.
 */
int replay_main(int argc, char **argv);

#endif /* SLUICE_CLI_REPLAY_H */
