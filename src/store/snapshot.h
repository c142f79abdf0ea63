/*
 * snapshot.h - sluiced's memory request store on disk (SPEC §4): the per-key states of every
 * table, written on clean shutdown and every interval, read back on start so a restart does not
 * hand every client a fresh quota.
 *
 * A snapshot is a sequence of sections, one per table. A section is identified by an opaque
 * `id` chosen by the caller (sluiced writes the rule name and its canonical parameters) and
 * carries the sl_rule_t the states belong to, then (key, state) entries.
 *
 * Format (all integers little-endian; documented in docs/dev/design.md):
 *   header   magic "SLUICESN", u32 format version, u32 flags (0), i64 written_at_ns
 *   section  u8 tag 'S', u32 id_len, id bytes, the rule's public fields (u32 algorithm, i64
 *            limit, window_ns, burst, buckets, max_delay_ns), u32 state_size (sl_state_size():
 *            the most a state can take), i64 closed_from_ns, i64 closed_until_ns (format 2 on;
 *            0 and 0 when none), the adaptive limit's settings (format 4 on: u32 algorithm,
 *            i64 min_limit, max_limit, backoff_pct, timeout_ns, probe; all 0 for a fixed limit),
 *            u64 entry count
 *   entry    u32 key_len, key bytes, u32 state_len, the state's packed form (sl_state_pack(),
 *            state_len bytes: a sliding_log key weighs what its entries take)
 *
 * Formats 1 and 2 held every state whole, state_size bytes, in the layouts of their time (a
 * sliding_log's ring of one stamp per unit): they are read, and their states converted.
 *   trailer  u8 tag 'E', u64 section count, u64 total entries, u32 CRC-32C of every byte before
 *            the CRC
 *
 * Writing goes to "<path>.tmp" in the same directory, then fsync, rename over path, fsync of the
 * directory: a crash leaves either the old snapshot or the new one, never a torn file.
 *
 * Reading checks the whole file (magic, version, every length against the file size, counts,
 * CRC) before it hands out a single entry, so a corrupt file yields an error and no states at
 * all; the caller sets it aside (snapshot_set_aside) and starts per cold_start.
 */
#ifndef SLUICE_STORE_SNAPSHOT_H
#define SLUICE_STORE_SNAPSHOT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sluice/sluice.h"

#define SNAPSHOT_ERR_MAX 256
#define SNAPSHOT_FORMAT                                                                            \
    4 /* the format written; 1 (no closed window), 2 (states whole) and 3 (no                      \
         adaptive limit: its states are sized by max_limit) read */

typedef struct snapshot_writer snapshot_writer_t;

/* Starts writing a snapshot for `path` (into path.tmp). Returns 0, or -1 with err. */
int snapshot_begin(const char *path, int64_t now_ns, snapshot_writer_t **out, char *err);

/* A rule's `cold_start: closed` window, [from_ns, until_ns): keys it has not seen since the start
 * count as having used their whole quota at from_ns. {0, 0}: none. */
typedef struct snapshot_closed {
    int64_t from_ns;  /* ns, realtime */
    int64_t until_ns; /* ns, realtime */
} snapshot_closed_t;

/* Starts a section for one table, with its rule's closed window (NULL: none). The entries that
 * follow belong to it. */
int snapshot_section(snapshot_writer_t *w, const void *id, size_t id_len, const sl_rule_t *rule,
                     const snapshot_closed_t *closed, char *err);

/* Adds one entry to the current section: a state of its rule in a buffer of state_len bytes
 * (sl_state_size() of the rule, or fewer for a sliding_log state that says so), checked, and
 * written packed. Buffered. */
int snapshot_entry(snapshot_writer_t *w, const void *key, size_t key_len, const void *state,
                   size_t state_len, char *err);

/* Whether w writes its file with direct I/O (O_DIRECT), past the page cache; false where the
 * file system refuses it, which the writer then goes through. */
bool snapshot_writes_direct(const snapshot_writer_t *w);

/* The write buffer, bytes: the file is written in pieces of this size. */
#define SNAPSHOT_WRITE_BUFFER (1024 * 1024)

/* Writes the trailer, fsyncs, renames over path, fsyncs the directory, frees w. Returns 0 or -1
 * (the old snapshot, if any, is then untouched and path.tmp is removed). */
int snapshot_commit(snapshot_writer_t *w, char *err);

/* Abandons a snapshot being written: removes path.tmp, frees w. NULL is a no-op. */
void snapshot_abort(snapshot_writer_t *w);

/* What snapshot_load calls: once per section, then once per entry of that section. A section
 * callback returning false skips the section's entries (unknown rule, changed parameters).
 * `closed` is the section's closed window ({0, 0} when none, and in format 1 files). An entry's
 * state is a state of the section's rule, checked, in a buffer of state_len bytes (valid for
 * the call only). */
typedef struct snapshot_visitor {
    bool (*section)(void *arg, const void *id, size_t id_len, const sl_rule_t *rule,
                    const snapshot_closed_t *closed);
    void (*entry)(void *arg, const void *key, size_t key_len, const void *state, size_t state_len);
    void *arg;
} snapshot_visitor_t;

enum snapshot_load_status {
    SNAPSHOT_LOADED = 0,   /* every section and entry was visited */
    SNAPSHOT_MISSING = 1,  /* no file at path: nothing visited */
    SNAPSHOT_CORRUPT = -1, /* malformed, truncated, bad CRC, unknown version: nothing visited */
    SNAPSHOT_EIO = -2,     /* could not read it: nothing visited */
};

/*
 * Reads the snapshot at path, verifies all of it, then visits it. *written_at_ns (may be NULL)
 * gets the time it was written. Returns a snapshot_load_status; on CORRUPT / EIO err says what
 * and where ("snapshot.db: offset 1234: entry key length 70000 beyond the file").
 * The rule handed to `section` is prepared (sl_rule_prepare) and the states are checked by the
 * caller (sl_table_put does).
 */
int snapshot_load(const char *path, const snapshot_visitor_t *v, int64_t *written_at_ns, char *err);

/* Moves a corrupt snapshot aside to "<path>.corrupt-<unix seconds>" so the next snapshot does not
 * overwrite the evidence. Returns 0, or -1 with err. `set_aside_path` (may be NULL, 4096 bytes)
 * gets the new name. */
int snapshot_set_aside(const char *path, int64_t now_ns, char *set_aside_path, char *err);

/* Validates and parses a snapshot already in memory (the loader's core; used by the fuzz
 * target): same contract as snapshot_load. */
int snapshot_parse(const void *data, size_t len, const snapshot_visitor_t *v,
                   int64_t *written_at_ns, char *err);

#endif /* SLUICE_STORE_SNAPSHOT_H */
