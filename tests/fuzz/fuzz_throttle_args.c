/*
 * fuzz_throttle_args.c - libFuzzer target for the inline-rule commands' parser shared by sluice.so
 * and sluiced (proto/throttle_args.h): SL.THROTTLE, SL.PEEK, SL.SETTLE, CL.THROTTLE, SL.LEASE,
 * SL.RETURN, SL.ACQUIRE, SL.RELEASE (an adaptive limit's options, a release's LATENCY_US and
 * DROPPED: seed adaptive_release), and a named rule's settle options alone
 * (throttle_parse_settle).
 *
 * The first byte picks the command, whose name is argv[0] (Redis and sluiced call the parser only
 * for a name they matched); the rest is split at NUL bytes into the arguments after it (argv[1]
 * the key), each an exact-size copy so that reading past one is caught by ASan. Checked besides
 * "does not crash": a request that parses has a prepared rule and costs, reserved and actual units
 * >= 0, an AT of -1 or >= 0 whose charge time is within [0, now], a CLOSED_FROM of -1 or >= 0
 * whose closed start is within [0, SL_NOW_MAX_NS] (and in force at time 0), a lease's WANT >= 0 and
 * FOR > 0, a return's UNUSED <= GRANTED and a lease from it within [0, now] .. SL_NOW_MAX_NS, in
 * order, a label (throttle_rule_label) within THROTTLE_LABEL_MAX; an error is a
 * NUL-terminated "ERR ..." line within THROTTLE_ERR_MAX. The window and MAX_DELAY take durations
 * (seeds throttle_duration, throttle_duration_bad).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proto/throttle_args.h"

#define ARGS_MAX 32

/* names[i] parses as cmds[i]; names[ALONE] is a settle alone (sluiced's form) */
static const throttle_cmd_t cmds[] = {THROTTLE_SL,        THROTTLE_SL_PEEK,    THROTTLE_SL_SETTLE,
                                      THROTTLE_CL,        THROTTLE_SL_LEASE,   THROTTLE_SL_RETURN,
                                      THROTTLE_SL_SETTLE, THROTTLE_SL_ACQUIRE, THROTTLE_SL_RELEASE};
static const char *const names[] = {"SL.THROTTLE", "SL.PEEK",    "SL.SETTLE",
                                    "CL.THROTTLE", "SL.LEASE",   "SL.RETURN",
                                    "SL.SETTLE",   "SL.ACQUIRE", "SL.RELEASE"};
#define ALONE 6
_Static_assert(sizeof cmds / sizeof cmds[0] == sizeof names / sizeof names[0], "one per name");

static void check_error(const char *err)
{
    size_t n = strnlen(err, THROTTLE_ERR_MAX);
    if (n == THROTTLE_ERR_MAX || strncmp(err, "ERR ", 4) != 0 || memchr(err, '\n', n) != NULL) {
        abort();
    }
}

static void check(throttle_cmd_t cmd, const throttle_arg_t *argv, size_t argc, bool alone)
{
    throttle_req_t req;
    char err[THROTTLE_ERR_MAX];
    memset(err, 'X', sizeof err);
    int rc = alone ? throttle_parse_settle(argv, argc, 2, &req, err)
                   : throttle_parse(cmd, argv, argc, &req, err);
    if (rc != 0) {
        check_error(err);
        return;
    }
    if (!alone) {
        sl_rule_t again = req.params;
        if (sl_rule_prepare(&again) != SL_OK || memcmp(&again, &req.rule, sizeof again) != 0 ||
            req.cost < 0 || (cmd == THROTTLE_SL_PEEK && req.cost != 0)) {
            abort();
        }
        /* the label errors give the rule: NUL-terminated within its buffer, its words first */
        char label[THROTTLE_LABEL_MAX];
        memset(label, 'X', sizeof label);
        throttle_rule_label(&req.rule, label);
        if (strnlen(label, sizeof label) == sizeof label ||
            strncmp(label, "the inline rule ", 16) != 0) {
            abort();
        }
        /* a closed start is none for CL.THROTTLE, else within [0, SL_NOW_MAX_NS] at any now */
        int64_t at_ns = -1;
        if (req.closed_from_ms < -1 || (cmd == THROTTLE_CL && req.closed_from_ms != -1) ||
            throttle_closed_start(&req, SL_NOW_MAX_NS, &at_ns) != (at_ns >= 0) ||
            at_ns > SL_NOW_MAX_NS ||
            (req.closed_from_ms >= 0 && !throttle_closed_start(&req, 0, &at_ns))) {
            abort();
        }
    }
    sl_sample_t sample;
    if (cmd == THROTTLE_SL_RELEASE && !alone &&
        (req.hold_id < 0 ||
         (throttle_release_sample(&req, &sample) &&
          (sample.latency_ns > SL_ADAPTIVE_LATENCY_MAX_NS || req.dropped > 1)))) {
        abort();
    }
    if (cmd == THROTTLE_SL_LEASE && !alone && (req.want < 0 || req.lease_ms <= 0)) {
        abort();
    }
    if (cmd == THROTTLE_SL_RETURN && !alone) {
        const int64_t now_ns = INT64_C(4000000000123456789);
        sl_lease_t lease = throttle_return_lease(&req, now_ns);
        if (req.unused < 0 || req.unused > req.granted || req.until_us < req.lease_at_us ||
            lease.at_ns < 0 || lease.at_ns > now_ns || lease.until_ns < lease.at_ns ||
            lease.until_ns > SL_NOW_MAX_NS) {
            abort();
        }
    }
    if (alone || cmd == THROTTLE_SL_SETTLE) {
        const int64_t now_ns = INT64_C(4000000000123456789);
        int64_t charged = throttle_settle_charged_ns(&req, now_ns);
        if (req.reserved < 0 || req.actual < 0 || req.at_ms < -1 || charged < 0 ||
            charged > now_ns || (req.at_ms < 0 && charged != now_ns)) {
            abort();
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0) {
        return 0;
    }
    throttle_arg_t argv[ARGS_MAX];
    size_t pick = data[0] % (sizeof names / sizeof names[0]);
    argv[0].ptr = names[pick];
    argv[0].len = strlen(names[pick]);
    size_t argc = 1, start = 1;
    for (size_t i = 1; i <= size && argc < ARGS_MAX; i++) {
        if (i == size || data[i] == 0) {
            size_t len = i - start;
            char *copy = malloc(len ? len : 1);
            if (copy == NULL) {
                break;
            }
            memcpy(copy, data + start, len);
            argv[argc].ptr = copy;
            argv[argc++].len = len;
            start = i + 1;
        }
    }
    check(cmds[pick], argv, argc, pick == ALONE);
    for (size_t i = 1; i < argc; i++) {
        free((void *)argv[i].ptr);
    }
    return 0;
}
