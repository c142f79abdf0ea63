/*
 * replay.h - replaying a recorded traffic log against a candidate rule: what `sluice replay`
 * and sluiced's POST /v1/replay share, so both count exactly alike.
 *
 *   replay_parse_line()  one input line -> one request. Pure: no I/O, no allocation, no global
 *                        state. The returned key points into the caller's line.
 *   replay_step()        decides one request on the caller's table and counts it, per key
 *                        (first-seen order) and in total, in a replay_tally_t. The tally counts
 *                        the bytes it holds and can ask its owner before it grows, so a replay
 *                        on a budget (sluiced's) stops before its tallies pass it.
 *
 * Input format (one request per line):  TIME KEY [COST]
 *   - fields separated by spaces or tabs (any of " \t\r\v\f"), so CRLF files work;
 *   - TIME: a non-negative decimal integer in the input unit (--unit, default ms), or an RFC
 *     3339 timestamp (2026-12-02T07:26:18.250Z; time is then its instant in whole input units
 *     since the epoch, rounded down, and now_ns the instant exactly);
 *   - KEY: any bytes but whitespace and NUL, 1..REPLAY_KEY_MAX bytes;
 *   - COST: a non-negative decimal integer, default 1 (0 = peek: report, consume nothing);
 *   - a line that is blank, or whose first non-blank byte is '#', is skipped.
 *
 */
#ifndef SLUICE_PROTO_REPLAY_H
#define SLUICE_PROTO_REPLAY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sluice/sluice.h"

#define REPLAY_KEY_MAX 1024 /* longest KEY accepted, bytes (SPEC: oversized key default 1 KiB) */
#define REPLAY_ERR_MAX 256  /* a buffer this size always holds a whole error message */

/* replay_parse_line() results. */
enum replay_line {
    REPLAY_LINE_ERROR = -1,  /* malformed; err holds the reason */
    REPLAY_LINE_SKIP = 0,    /* blank line or comment */
    REPLAY_LINE_REQUEST = 1, /* *out holds a request */
};

/* One parsed input line. */
struct replay_request {
    int64_t time;    /* TIME as written, in input units (>= 0) */
    int64_t now_ns;  /* TIME converted to ns: time * unit_ns, overflow-checked */
    const char *key; /* KEY: points into the parsed line, not NUL-terminated */
    size_t key_len;  /* bytes, 1..REPLAY_KEY_MAX */
    int64_t cost;    /* COST, units (>= 0); 1 when the field is absent */
};

/*
 * Parses one input line of `len` bytes (a trailing "\n" or "\r\n" is allowed, not required;
 * the line need not be NUL-terminated). `unit_ns` (> 0) is the length of one TIME unit in ns.
 *
 * Returns REPLAY_LINE_REQUEST with *out filled (out->key points into `line`), REPLAY_LINE_SKIP
 * for a blank or comment line (*out untouched), or REPLAY_LINE_ERROR with a one-line reason
 * written to err (NUL-terminated, truncated to errlen; err may be NULL when errlen is 0). The
 * reason names neither file nor line: the caller adds them. Never allocates, never reads
 * beyond line[len - 1].
 */
int replay_parse_line(const char *line, size_t len, int64_t unit_ns, struct replay_request *out,
                      char *err, size_t errlen);

/* One key's counts in a replay. */
typedef struct replay_tally_key {
    char *key;         /* owned copy, key_len bytes */
    size_t key_len;    /* bytes */
    uint64_t hash;     /* of the key, cached for rehashing */
    uint64_t admitted; /* requests with ALLOWED 1 */
    uint64_t rejected; /* requests with ALLOWED 0 */
} replay_tally_key_t;

/*
 * Asked by a tally before it allocates: it would then hold `bytes` in all (what it holds now and
 * the allocation asked for). True lets it allocate; false refuses, and the request being counted
 * is not counted (replay_step returns SL_EFULL).
 */
typedef bool (*replay_tally_ask_fn)(void *arg, size_t bytes);

/* Every key's counts, in first-seen order, and the totals. Zero-initialise (then it never
 * asks); set ask and ask_arg to keep it within a budget. Free with replay_tally_free. */
typedef struct replay_tally {
    replay_tally_key_t *keys; /* first-seen order */
    size_t n;                 /* keys in use */
    size_t cap;               /* keys allocated */
    size_t *index;            /* open addressing: entry number + 1, 0 = empty */
    size_t nindex;            /* slots, a power of two, >= 2 * n */
    uint64_t admitted;        /* over all keys */
    uint64_t rejected;        /* over all keys */
    size_t bytes;             /* held: keys[cap], index[nindex] and the key copies, bytes */
    replay_tally_ask_fn ask;  /* asked before each allocation; NULL: never asked */
    void *ask_arg;            /* ask's first argument */
} replay_tally_t;

/*
 * Decides req on table (a fresh table of the rule replayed, fed every request in order) into
 * *d and counts it in tally (NULL: not counted). Returns SL_OK, a table error (sl_strerror()),
 * SL_ENOMEM when the tally could not grow, or SL_EFULL when its ask refused the growth. After
 * a tally error the decision was made (the table holds it) but not counted.
 */
int replay_step(sl_table_t *table, replay_tally_t *tally, const struct replay_request *req,
                sl_decision_t *d);

/* Frees what the tally holds (not t itself). */
void replay_tally_free(replay_tally_t *t);

#endif /* SLUICE_PROTO_REPLAY_H */
