/*
 * fuzz_replay_line.c - libFuzzer target for the `sluice replay` input parsers.
 *
 * The first byte picks the time unit; the rest is fed, as is and not NUL-terminated, to
 * replay_parse_line() and to sl_duration_parse() (the parser of --window and --max-delay).
 * Checked besides "does not crash": a parsed request's key lies inside the input and within
 * REPLAY_KEY_MAX, its time and cost are non-negative and now_ns = time * unit; an error
 * always comes with a NUL-terminated, one-line message.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cli/replay.h"

static const int64_t units_ns[] = {1, SL_NS_PER_US, SL_NS_PER_MS, SL_NS_PER_SEC};

static void check_line(const char *line, size_t len, int64_t unit_ns)
{
    struct replay_request req;
    char err[REPLAY_ERR_MAX];

    memset(err, 'X', sizeof err);
    int rc = replay_parse_line(line, len, unit_ns, &req, err, sizeof err);
    if (rc == REPLAY_LINE_REQUEST) {
        if (req.key < line || req.key_len == 0 || req.key_len > REPLAY_KEY_MAX ||
            req.key + req.key_len > line + len || req.time < 0 || req.cost < 0 ||
            req.now_ns / unit_ns != req.time) {
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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0) {
        return 0;
    }
    int64_t unit_ns = units_ns[data[0] % (sizeof units_ns / sizeof units_ns[0])];
    size_t len = size - 1;

    /* an exact-size copy, so reading past the end is caught by ASan */
    char *line = malloc(len ? len : 1);
    if (line == NULL) {
        return 0;
    }
    memcpy(line, data + 1, len);
    check_line(line, len, unit_ns);

    int64_t ns = -1;
    if (sl_duration_parse(line, len, &ns) == SL_OK && ns < 0) {
        abort();
    }
    free(line);
    return 0;
}
