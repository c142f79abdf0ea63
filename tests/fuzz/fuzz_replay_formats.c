/*
 * fuzz_replay_formats.c - libFuzzer target for the input formats of `sluice replay` besides its
 * plain lines (proto/replay_formats.h) and the timestamp parsers under them (proto/timestamp.h).
 *
 * The first byte picks the format (plain, nginx, jsonl), the nginx key field and the time unit;
 * the rest is one record, fed as is and not NUL-terminated from an exact-size copy (an over-read
 * is caught by ASan), and also to timestamp_rfc3339() and timestamp_nginx(). Checked besides
 * "does not crash": a parsed request's key lies inside the record or the key buffer and within
 * 1..REPLAY_KEY_MAX bytes, its time is now_ns in whole units, its cost non-negative; an error
 * comes with a NUL-terminated one-line message; a timestamp read is within 1970..2116.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proto/replay_formats.h"
#include "proto/timestamp.h"

static const int64_t units_ns[] = {1, SL_NS_PER_US, SL_NS_PER_MS, SL_NS_PER_SEC};

static void check_record(const replay_input_t *in, const char *line, size_t len, int64_t unit_ns)
{
    static char keybuf[REPLAY_KEY_MAX];
    struct replay_request req;
    char err[REPLAY_ERR_MAX];

    memset(err, 'X', sizeof err);
    int rc = replay_parse_record(in, line, len, unit_ns, &req, keybuf, err, sizeof err);
    if (rc == REPLAY_LINE_REQUEST) {
        bool in_line = req.key >= line && req.key + req.key_len <= line + len;
        bool in_buf = req.key >= keybuf && req.key + req.key_len <= keybuf + sizeof keybuf;
        if (!(in_line || in_buf) || req.key_len == 0 || req.key_len > REPLAY_KEY_MAX ||
            req.time < 0 || req.cost < 0 || req.now_ns < 0 || req.now_ns / unit_ns != req.time) {
            abort();
        }
    } else if (rc == REPLAY_LINE_ERROR) {
        size_t n = strnlen(err, sizeof err);
        if (n == 0 || n == sizeof err || memchr(err, '\n', n) != NULL) {
            abort();
        }
    } else if (rc != REPLAY_LINE_SKIP) {
        abort();
    }
}

static void check_time(timestamp_rc_t rc, int64_t ns)
{
    if (rc == TS_OK && (ns < 0 || ns > SL_NOW_MAX_NS)) {
        abort();
    }
    if (rc != TS_OK && rc != TS_ESYNTAX && rc != TS_EFIELD && rc != TS_ERANGE) {
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0) {
        return 0;
    }
    replay_input_t in = {
        .format = (replay_format_t)(data[0] % 3),
        .nginx_key = (replay_nginx_field_t)((data[0] / 3) % REPLAY_NGINX_FIELDS),
        .json_key = (data[0] & 0x80) != 0 ? "k" : NULL,
    };
    int64_t unit_ns = units_ns[(data[0] >> 5) % 4];
    size_t len = size - 1;
    char *line = malloc(len ? len : 1);
    if (line == NULL) {
        return 0;
    }
    memcpy(line, data + 1, len);
    check_record(&in, line, len, unit_ns);
    int64_t ns = -1;
    check_time(timestamp_rfc3339(line, len, &ns), ns);
    ns = -1;
    check_time(timestamp_nginx(line, len, &ns), ns);
    free(line);
    return 0;
}
