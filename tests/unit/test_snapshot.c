/*
 * test_snapshot.c - snapshots: round trips of all six algorithms' states (produced by
 * sl_decide on seeded random requests, written packed), sections over the 1 MiB write buffer and
 * a section count split by it, direct I/O and the page cache, empty and missing snapshots, every
 * single-byte corruption and every truncation of a small snapshot, structural errors behind a
 * correct CRC (recomputed here with an independent bitwise CRC-32C), files of formats 1 and 2
 * (states whole, a sliding_log's ring of one stamp per unit) read and converted, a failed commit
 * that leaves the old snapshot, and setting a corrupt snapshot aside.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "rules.h"
#include "store/snapshot.h"
#include "tmpdir.h"

#define NOW_NS    (INT64_C(1700000000) * SL_NS_PER_SEC)
#define MAX_SECT  8
#define MAX_ENTRY 512
#define HEADER    24 /* magic, version, flags, written_at */

static int group_setup(void **unused)
{
    return tmpdir_create("snapshot");
}

static void new_path(char *path, size_t size)
{
    tmpdir_file(path, size, "snap", "");
}

static bool exists(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0;
}

/* ---- an independent CRC-32C (bitwise) ---------------------------------------------------- */

static uint32_t crc32c_bitwise(const uint8_t *p, size_t n)
{
    uint32_t c = 0xffffffffu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++)
            c = c & 1 ? (c >> 1) ^ 0x82f63b78u : c >> 1;
    }
    return ~c;
}

/* Rewrites the trailing CRC so that only the structure can be wrong. */
static void fix_crc(uint8_t *data, size_t len)
{
    uint32_t crc = crc32c_bitwise(data, len - 4);
    for (int i = 0; i < 4; i++)
        data[len - 4 + i] = (uint8_t)(crc >> (8 * i));
}

static void put_le32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/* ---- what the test writes and what the visitor saw ------------------------------------- */

typedef struct entry {
    uint8_t key[16];
    size_t key_len;
    uint8_t *state; /* written: sl_state_size() bytes; seen: the state's packed form */
    size_t packed;  /* seen: bytes of the packed form */
} entry_t;

typedef struct section {
    char id[32];
    sl_rule_t rule;
    snapshot_closed_t closed;
    size_t n;
    entry_t entries[MAX_ENTRY];
} section_t;

typedef struct seen {
    size_t nsections;
    section_t sections[MAX_SECT];
    const char *skip_id; /* the section callback refuses this id */
    size_t entries;      /* entries visited, all sections */
} seen_t;

static bool on_section(void *arg, const void *id, size_t id_len, const sl_rule_t *rule,
                       const snapshot_closed_t *closed)
{
    seen_t *s = arg;
    assert_true(s->nsections < MAX_SECT && id_len < sizeof(s->sections[0].id));
    section_t *sec = &s->sections[s->nsections++];
    memcpy(sec->id, id, id_len);
    sec->id[id_len] = '\0';
    sec->rule = *rule;
    sec->closed = *closed;
    sec->n = 0;
    return s->skip_id == NULL || strcmp(s->skip_id, sec->id) != 0;
}

static void on_entry(void *arg, const void *key, size_t key_len, const void *state,
                     size_t state_len)
{
    seen_t *s = arg;
    assert_true(s->nsections > 0);
    section_t *sec = &s->sections[s->nsections - 1];
    assert_true(sec->n < MAX_ENTRY && key_len <= sizeof(sec->entries[0].key));
    assert_true(state_len <= sl_state_size(&sec->rule));
    assert_int_equal(sl_state_check_len(&sec->rule, state, state_len), SL_OK);
    entry_t *e = &sec->entries[sec->n++];
    memcpy(e->key, key, key_len);
    e->key_len = key_len;
    e->state = malloc(sl_state_packed_max(&sec->rule));
    e->packed = sl_state_pack(&sec->rule, state, e->state);
    s->entries++;
}

static void seen_free(seen_t *s)
{
    for (size_t i = 0; i < s->nsections; i++)
        for (size_t j = 0; j < s->sections[i].n; j++)
            free(s->sections[i].entries[j].state);
    memset(s, 0, sizeof(*s));
}

static const snapshot_visitor_t *visitor(seen_t *s)
{
    static snapshot_visitor_t v;
    v = (snapshot_visitor_t){.section = on_section, .entry = on_entry, .arg = s};
    return &v;
}

/* ---- building sections from sl_decide ---------------------------------------------------- */

static uint64_t rng = 0x9e3779b97f4a7c15u;

static uint64_t next_rand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static sl_rule_t prepared(sl_rule_t r)
{
    assert_int_equal(sl_rule_prepare(&r), SL_OK);
    return r;
}

/* n keys (binary, one empty), each the state left by a few random decisions. */
static void fill_section(section_t *sec, const char *id, sl_rule_t rule, size_t n)
{
    snprintf(sec->id, sizeof(sec->id), "%s", id);
    sec->rule = rule;
    sec->closed = (snapshot_closed_t){0, 0};
    sec->n = n;
    size_t size = sl_state_size(&rule);
    for (size_t i = 0; i < n; i++) {
        entry_t *e = &sec->entries[i];
        e->key_len = i == 0 ? 0 : 1 + next_rand() % sizeof(e->key);
        for (size_t k = 0; k < e->key_len; k++)
            e->key[k] = (uint8_t)next_rand();
        if (e->key_len > 0)
            e->key[0] = (uint8_t)i; /* distinct keys; some start with a NUL */
        e->state = calloc(1, size);
        int64_t now = NOW_NS - rule.window_ns;
        int requests = 1 + (int)(next_rand() % 12);
        for (int r = 0; r < requests; r++) {
            sl_decision_t d;
            now += (int64_t)(next_rand() % (uint64_t)(rule.window_ns / 4));
            assert_int_equal(sl_decide(&rule, e->state, (int64_t)(next_rand() % 4), now, &d),
                             SL_OK);
        }
    }
}

static void sections_free(section_t *secs, size_t n)
{
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < secs[i].n; j++)
            free(secs[i].entries[j].state);
}

/* The six algorithms, each with its optional parameters in use. */
static size_t six_sections(section_t *secs, size_t entries_each)
{
    const sl_rule_t rules[] = {
        rule_fields(SL_FIXED_WINDOW, 5, SL_NS_PER_SEC, SL_DEFAULT, SL_DEFAULT, 0),
        rule_fields(SL_SLIDING_LOG, 4, SL_NS_PER_SEC, SL_DEFAULT, SL_DEFAULT, 0),
        rule_fields(SL_SLIDING_WINDOW, 10, 2 * SL_NS_PER_SEC, 0, 0, 0),
        rule_fields(SL_SLIDING_BUCKETS, 6, SL_NS_PER_SEC, SL_DEFAULT, 4, 0),
        rule_fields(SL_TOKEN_BUCKET, 3, SL_NS_PER_SEC, 5, SL_DEFAULT, 100 * SL_NS_PER_MS),
        rule_fields(SL_GCRA, 2, SL_NS_PER_SEC, 3, SL_DEFAULT, 0),
    };
    for (size_t i = 0; i < 6; i++) {
        char id[32];
        snprintf(id, sizeof(id), "rule-%s", sl_algorithm_name(rules[i].algorithm));
        fill_section(&secs[i], id, prepared(rules[i]), entries_each);
        if (i % 2 == 1) /* some rules in a cold_start: closed window */
            secs[i].closed = (snapshot_closed_t){NOW_NS - (int64_t)i * SL_NS_PER_MS,
                                                 NOW_NS + (int64_t)i * SL_NS_PER_SEC};
    }
    return 6;
}

static void write_snapshot(const char *path, const section_t *secs, size_t n)
{
    snapshot_writer_t *w = NULL;
    char err[SNAPSHOT_ERR_MAX] = "";
    if (snapshot_begin(path, NOW_NS, &w, err) != 0)
        fail_msg("begin: %s", err);
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(snapshot_section(w, secs[i].id, strlen(secs[i].id), &secs[i].rule,
                                          &secs[i].closed, err),
                         0);
        for (size_t j = 0; j < secs[i].n; j++)
            assert_int_equal(snapshot_entry(w, secs[i].entries[j].key, secs[i].entries[j].key_len,
                                            secs[i].entries[j].state, sl_state_size(&secs[i].rule),
                                            err),
                             0);
    }
    if (snapshot_commit(w, err) != 0)
        fail_msg("commit: %s", err);
}

static void assert_rule_equal(const sl_rule_t *a, const sl_rule_t *b)
{
    assert_int_equal(a->algorithm, b->algorithm);
    assert_int_equal(a->limit, b->limit);
    assert_int_equal(a->window_ns, b->window_ns);
    assert_int_equal(a->burst, b->burst);
    assert_int_equal(a->buckets, b->buckets);
    assert_int_equal(a->max_delay_ns, b->max_delay_ns);
    assert_int_equal(a->interval_ns, b->interval_ns);
    assert_int_equal(a->tolerance_ns, b->tolerance_ns);
    assert_int_equal(a->bucket_ns, b->bucket_ns);
    assert_int_equal(a->capacity, b->capacity);
    assert_int_equal(a->state_size, b->state_size);
    assert_memory_equal(&a->adaptive, &b->adaptive, sizeof a->adaptive);
}

/* What was visited is exactly what was written, in order (skip_id's entries excepted): the same
 * states, as their packed forms say (one state always packs to one form). */
static void assert_seen(const seen_t *seen, const section_t *secs, size_t n, const char *skip_id)
{
    assert_int_equal(seen->nsections, n);
    for (size_t i = 0; i < n; i++) {
        const section_t *got = &seen->sections[i], *want = &secs[i];
        assert_string_equal(got->id, want->id);
        assert_rule_equal(&got->rule, &want->rule);
        assert_int_equal(got->closed.from_ns, want->closed.from_ns);
        assert_int_equal(got->closed.until_ns, want->closed.until_ns);
        bool skipped = skip_id != NULL && strcmp(skip_id, want->id) == 0;
        assert_int_equal(got->n, skipped ? 0 : want->n);
        for (size_t j = 0; j < got->n; j++) {
            assert_int_equal(got->entries[j].key_len, want->entries[j].key_len);
            assert_memory_equal(got->entries[j].key, want->entries[j].key,
                                want->entries[j].key_len);
            uint8_t *packed = malloc(sl_state_packed_max(&want->rule));
            size_t n_packed = sl_state_pack(&want->rule, want->entries[j].state, packed);
            assert_int_equal(got->entries[j].packed, n_packed);
            assert_memory_equal(got->entries[j].state, packed, n_packed);
            free(packed);
        }
    }
}

/* Reads a whole file into memory. */
static uint8_t *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *data = malloc((size_t)size + 1);
    assert_int_equal(fread(data, 1, (size_t)size, f), (size_t)size);
    fclose(f);
    *len = (size_t)size;
    return data;
}

static void spit(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, len, f), len);
    fclose(f);
}

/* ---- tests ------------------------------------------------------------------------------- */

static void test_crc_reference(void **unused)
{
    /* the check value of CRC-32C: the test's reference must be right for fix_crc to mean much */
    assert_int_equal(crc32c_bitwise((const uint8_t *)"123456789", 9), 0xe3069283u);
}

static section_t secs[MAX_SECT];

static void test_round_trip_six_algorithms(void **unused)
{
    char path[256];
    new_path(path, sizeof(path));
    size_t n = six_sections(secs, 20);
    write_snapshot(path, secs, n);
    char tmp[300];
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    assert_false(exists(tmp));

    /* the trailer's CRC is the CRC of everything before it (the writer patched counts) */
    size_t len;
    uint8_t *data = slurp(path, &len);
    uint32_t stored = (uint32_t)data[len - 4] | (uint32_t)data[len - 3] << 8 |
                      (uint32_t)data[len - 2] << 16 | (uint32_t)data[len - 1] << 24;
    assert_int_equal(stored, crc32c_bitwise(data, len - 4));
    assert_memory_equal(data, "SLUICESN\x04\0\0\0\0\0\0\0", 16);
    free(data);

    seen_t seen = {0};
    int64_t written = 0;
    char err[SNAPSHOT_ERR_MAX] = "";
    int rc = snapshot_load(path, visitor(&seen), &written, err);
    if (rc != SNAPSHOT_LOADED)
        fail_msg("load: %s", err);
    assert_int_equal(written, NOW_NS);
    assert_seen(&seen, secs, n, NULL);
    seen_free(&seen);

    /* a section refused by the visitor: its entries are skipped, the others visited */
    seen.skip_id = "rule-sliding_log";
    assert_int_equal(snapshot_load(path, visitor(&seen), NULL, err), SNAPSHOT_LOADED);
    assert_seen(&seen, secs, n, "rule-sliding_log");
    assert_int_equal(seen.entries, 5 * 20);
    seen_free(&seen);
    sections_free(secs, n);
}

/* Sections far beyond the write buffer: a count patched in the file (pwrite) and a CRC shifted
 * over hundreds of KiB; an empty section between them. (sliding_buckets' states pack to
 * themselves, 8 KiB each; sliding_log's to their entries.) */
static void test_round_trip_large_sections(void **unused)
{
    char path[256];
    new_path(path, sizeof(path));
    sl_rule_t log = prepared(rule_fields(SL_SLIDING_LOG, 1000, SL_NS_PER_SEC, 0, 0, 0));
    sl_rule_t buckets =
        prepared(rule_fields(SL_SLIDING_BUCKETS, 100, 4 * SL_NS_PER_SEC, 0, 1000, 0));
    fill_section(&secs[0], "big-log", log, 300); /* 300 states of up to 12 entries */
    fill_section(&secs[1], "empty", buckets, 0);
    fill_section(&secs[2], "big-buckets", buckets, 400); /* 400 x 8024-byte states */
    fill_section(&secs[3], "last", log, 1);
    write_snapshot(path, secs, 4);

    seen_t seen = {0};
    char err[SNAPSHOT_ERR_MAX] = "";
    int rc = snapshot_load(path, visitor(&seen), NULL, err);
    if (rc != SNAPSHOT_LOADED)
        fail_msg("load: %s", err);
    assert_seen(&seen, secs, 4, NULL);
    seen_free(&seen);
    sections_free(secs, 4);
}

/* An in-flight rule whose limit adapts: its states are sized by max_limit, so the section
 * carries the adaptive settings (format 4) and its keys come back whole. */
static void test_round_trip_adaptive(void **unused)
{
    char path[256];
    new_path(path, sizeof(path));
    sl_rule_t r = rule_fields(SL_CONCURRENCY, 4, SL_NS_PER_SEC, SL_DEFAULT, SL_DEFAULT, 0);
    r.adaptive = (sl_adaptive_t){.algorithm = SL_ADAPTIVE_AIMD, .min_limit = 1, .max_limit = 10};
    fill_section(&secs[0], "adaptive", prepared(r), 5);
    r = rule_fields(SL_CONCURRENCY, 4, SL_NS_PER_SEC, SL_DEFAULT, SL_DEFAULT, 0);
    fill_section(&secs[1], "fixed", prepared(r), 5);
    assert_true(secs[0].rule.state_size > secs[1].rule.state_size);
    write_snapshot(path, secs, 2);
    seen_t seen = {0};
    char err[SNAPSHOT_ERR_MAX] = "";
    int rc = snapshot_load(path, visitor(&seen), NULL, err);
    if (rc != SNAPSHOT_LOADED)
        fail_msg("load: %s", err);
    assert_seen(&seen, secs, 2, NULL);
    assert_int_equal(seen.sections[0].rule.adaptive.algorithm, SL_ADAPTIVE_AIMD);
    assert_int_equal(seen.sections[0].rule.adaptive.max_limit, 10);
    seen_free(&seen);
    sections_free(secs, 2);
}

/*
 * A section's count that straddles the first write of the buffer: its first 4 bytes are in the
 * file when the section ends, its last 4 still buffered. Sections: A (sliding_buckets, whose
 * states pack to themselves, key length 16), F (gcra, key lengths chosen to place B exactly),
 * B (whose count is at 1 MiB - 4).
 */
static void straddle_in(const char *path)
{
    sl_rule_t log = prepared(rule_fields(SL_SLIDING_BUCKETS, 500, SL_NS_PER_SEC, 0, 500, 0));
    sl_rule_t gcra = prepared(rule_fields(SL_GCRA, 10, SL_NS_PER_SEC, 0, 0, 0));
    const size_t head = 1 + 4 + 44 + 4 + 16 + 44 + 8; /* a section's bytes but its id */
    const size_t nf = MAX_ENTRY, ef_min = 4 + 4 + sl_state_size(&gcra),
                 ea = 4 + 16 + 4 + sl_state_size(&log);
    size_t room = SNAPSHOT_WRITE_BUFFER - 4 - HEADER - (head + 1) - (head + 1) - (head - 8 + 1);
    size_t na = (room - nf * ef_min) / ea;
    size_t extra = room - na * ea - nf * ef_min; /* key bytes of F: < ea <= 16 per entry */
    assert_true(na < MAX_ENTRY && extra <= nf * 16);
    fill_section(&secs[0], "A", log, na);
    for (size_t i = 0; i < na; i++)
        secs[0].entries[i].key_len = 16;
    fill_section(&secs[1], "F", gcra, nf);
    for (size_t i = 0; i < nf; i++) {
        secs[1].entries[i].key_len = extra < 16 ? extra : 16;
        extra -= secs[1].entries[i].key_len;
    }
    fill_section(&secs[2], "B", log, 3); /* past the buffer: it is written out */
    write_snapshot(path, secs, 3);

    size_t len;
    uint8_t *data = slurp(path, &len);
    uint8_t want[8] = {3, 0, 0, 0, 0, 0, 0, 0};
    assert_memory_equal(data + SNAPSHOT_WRITE_BUFFER - 4, want, 8); /* B's count, in place */
    free(data);
    seen_t seen = {0};
    char err[SNAPSHOT_ERR_MAX] = "";
    if (snapshot_load(path, visitor(&seen), NULL, err) != SNAPSHOT_LOADED)
        fail_msg("load %s: %s", path, err);
    assert_seen(&seen, secs, 3, NULL);
    seen_free(&seen);
    sections_free(secs, 3);
}

/* Whether files in path's directory can be opened for direct I/O. */
static bool dir_takes_direct(const char *path)
{
    char probe[700];
    snprintf(probe, sizeof(probe), "%s.probe", path);
    int fd = open(probe, O_WRONLY | O_CREAT | O_TRUNC | O_DIRECT, 0600);
    if (fd >= 0) {
        close(fd);
        unlink(probe);
    }
    return fd >= 0;
}

/* Direct I/O where the file system has it, through the page cache where it does not: the
 * writer says which it used (as a probe of the directory finds), and both files read back
 * right. The test directory and tmpfs (/dev/shm); tmpfs refuses direct I/O before Linux 6.6. */
static void test_direct_and_page_cache(void **unused)
{
    char paths[2][300];
    new_path(paths[0], sizeof(paths[0]));
    snprintf(paths[1], sizeof(paths[1]), "/dev/shm/sluice-test-snapshot-%d", (int)getpid());
    for (int i = 0; i < 2; i++) {
        if (i == 1 && !exists("/dev/shm"))
            continue;
        snapshot_writer_t *w = NULL;
        char err[SNAPSHOT_ERR_MAX] = "";
        assert_int_equal(snapshot_begin(paths[i], NOW_NS, &w, err), 0);
        assert_int_equal(snapshot_writes_direct(w), dir_takes_direct(paths[i]));
        snapshot_abort(w);
        straddle_in(paths[i]);
        if (i == 1)
            unlink(paths[i]);
    }
}

static void test_empty_snapshot(void **unused)
{
    char path[256];
    new_path(path, sizeof(path));
    write_snapshot(path, NULL, 0);
    size_t len;
    uint8_t *data = slurp(path, &len);
    assert_int_equal(len, HEADER + 21);
    free(data);
    seen_t seen = {0};
    int64_t written = 0;
    char err[SNAPSHOT_ERR_MAX] = "";
    assert_int_equal(snapshot_load(path, visitor(&seen), &written, err), SNAPSHOT_LOADED);
    assert_int_equal(seen.nsections, 0);
    assert_int_equal(written, NOW_NS);
    /* a visitor without callbacks, or none at all, only checks */
    snapshot_visitor_t none = {0};
    assert_int_equal(snapshot_load(path, &none, NULL, err), SNAPSHOT_LOADED);
    assert_int_equal(snapshot_load(path, NULL, NULL, err), SNAPSHOT_LOADED);
}

static void test_missing_and_unreadable(void **unused)
{
    char path[256];
    new_path(path, sizeof(path));
    seen_t seen = {0};
    int64_t written = 42;
    char err[SNAPSHOT_ERR_MAX] = "";
    assert_int_equal(snapshot_load(path, visitor(&seen), &written, err), SNAPSHOT_MISSING);
    assert_int_equal(seen.nsections, 0);
    assert_int_equal(written, 42);

    assert_int_equal(mkdir(path, 0700), 0); /* a directory is no snapshot */
    assert_int_equal(snapshot_load(path, visitor(&seen), NULL, err), SNAPSHOT_EIO);
    assert_non_null(strstr(err, path));

    new_path(path, sizeof(path));
    spit(path, "", 0);
    assert_int_equal(snapshot_load(path, visitor(&seen), NULL, err), SNAPSHOT_CORRUPT);
    assert_non_null(strstr(err, "empty file"));
    spit(path, "SLUICESN\x01", 9);
    assert_int_equal(snapshot_load(path, visitor(&seen), NULL, err), SNAPSHOT_CORRUPT);
    assert_int_equal(strncmp(err, path, strlen(path)), 0); /* "<path>: offset 0: ..." */
    assert_non_null(strstr(err, ": offset 0: header cut off"));
    assert_int_equal(seen.nsections, 0);
}

/* A small snapshot in memory: two sections, a few entries with small states. */
static uint8_t *small_snapshot(size_t *len)
{
    char path[256];
    new_path(path, sizeof(path));
    fill_section(&secs[0], "a", prepared(rule_fields(SL_GCRA, 2, SL_NS_PER_SEC, 1, 0, 0)), 3);
    fill_section(&secs[1], "bb", prepared(rule_fields(SL_FIXED_WINDOW, 9, SL_NS_PER_SEC, 0, 0, 0)),
                 2);
    write_snapshot(path, secs, 2);
    sections_free(secs, 2);
    return slurp(path, len);
}

static void test_every_byte_flip_is_corrupt(void **unused)
{
    size_t len;
    uint8_t *data = small_snapshot(&len);
    seen_t seen = {0};
    char err[SNAPSHOT_ERR_MAX];
    assert_int_equal(snapshot_parse(data, len, visitor(&seen), NULL, err), SNAPSHOT_LOADED);
    assert_int_equal(seen.nsections, 2);
    seen_free(&seen);
    const uint8_t flips[] = {0x01, 0x80, 0xff};
    for (size_t i = 0; i < len; i++) {
        for (size_t f = 0; f < sizeof(flips); f++) {
            data[i] ^= flips[f];
            int64_t written = -7;
            err[0] = '\0';
            int rc = snapshot_parse(data, len, visitor(&seen), &written, err);
            if (rc != SNAPSHOT_CORRUPT)
                fail_msg("byte %zu ^ 0x%02x: rc %d", i, flips[f], rc);
            assert_int_equal(seen.nsections, 0);
            assert_int_equal(written, -7);
            assert_int_equal(strncmp(err, "offset ", 7), 0);
            data[i] ^= flips[f];
        }
    }
    free(data);
}

static void test_every_truncation_is_corrupt(void **unused)
{
    size_t len;
    uint8_t *data = small_snapshot(&len);
    seen_t seen = {0};
    char err[SNAPSHOT_ERR_MAX];
    for (size_t cut = 0; cut < len; cut++) {
        /* an exact-size copy, so ASan catches a read past the end */
        uint8_t *copy = malloc(cut ? cut : 1);
        memcpy(copy, data, cut);
        int rc = snapshot_parse(copy, cut, visitor(&seen), NULL, err);
        if (rc != SNAPSHOT_CORRUPT)
            fail_msg("cut at %zu: rc %d", cut, rc);
        assert_int_equal(seen.nsections, 0);
        free(copy);
    }
    /* one byte too many is corrupt as well */
    uint8_t *longer = calloc(1, len + 1);
    memcpy(longer, data, len);
    assert_int_equal(snapshot_parse(longer, len + 1, visitor(&seen), NULL, err), SNAPSHOT_CORRUPT);
    fix_crc(longer, len + 1);
    assert_int_equal(snapshot_parse(longer, len + 1, visitor(&seen), NULL, err), SNAPSHOT_CORRUPT);
    assert_non_null(strstr(err, "trailer of"));
    free(longer);
    free(data);
}

/* Edits one field, recomputes the CRC, and expects CORRUPT with `want` in the message. */
static void assert_edit_corrupt(const uint8_t *orig, size_t len, size_t off, const void *bytes,
                                size_t n, const char *want)
{
    uint8_t *data = malloc(len);
    memcpy(data, orig, len);
    memcpy(data + off, bytes, n);
    fix_crc(data, len);
    seen_t seen = {0};
    char err[SNAPSHOT_ERR_MAX] = "";
    assert_int_equal(snapshot_parse(data, len, visitor(&seen), NULL, err), SNAPSHOT_CORRUPT);
    assert_int_equal(seen.nsections, 0);
    if (strstr(err, want) == NULL)
        fail_msg("edit at %zu: '%s' lacks '%s'", off, err, want);
    free(data);
}

static void test_structure_errors_behind_a_good_crc(void **unused)
{
    size_t len;
    uint8_t *data = small_snapshot(&len);
    uint8_t b4[4];
    /* section "a": tag at 24, id_len at 25, id at 29, rule at 30, state_size at 74, closed
     * window at 78, adaptive limit at 94, count at 138, first entry at 146 */
    const size_t rule_at = HEADER + 1 + 4 + 1, closed_at = rule_at + 44 + 4,
                 adaptive_at = closed_at + 16, count_at = adaptive_at + 44, entry_at = count_at + 8;

    put_le32(b4, 5);
    assert_edit_corrupt(data, len, 8, b4, 4, "offset 8: format version 5; this sluiced reads");
    put_le32(b4, 3);
    assert_edit_corrupt(data, len, adaptive_at, b4, 4, "unknown adaptive algorithm 3");
    put_le32(b4, SL_ADAPTIVE_AIMD); /* gcra cannot adapt */
    assert_edit_corrupt(data, len, adaptive_at, b4, 4, "section rule (gcra)");
    put_le32(b4, 0);
    assert_edit_corrupt(data, len, 8, b4, 4, "offset 8: format version 0; this sluiced reads");
    uint8_t later[8] = {5};
    assert_edit_corrupt(data, len, closed_at, later, 8, "closed window [5, 0) runs backwards");
    put_le32(b4, 1);
    assert_edit_corrupt(data, len, 12, b4, 4, "offset 12: unknown flags 0x1");
    assert_edit_corrupt(data, len, HEADER, "X", 1, "offset 24: unknown tag 0x58");
    put_le32(b4, 70000);
    assert_edit_corrupt(data, len, HEADER + 1, b4, 4, "offset 25: section id length 70000");
    put_le32(b4, 9);
    assert_edit_corrupt(data, len, rule_at, b4, 4, "unknown algorithm 9");
    uint8_t zero8[8] = {0};
    assert_edit_corrupt(data, len, rule_at + 4, zero8, 8, "section rule (gcra): limit must");
    put_le32(b4, 16);
    assert_edit_corrupt(data, len, rule_at + 44, b4, 4, "state size 16, the rule needs 8");
    uint8_t many[8] = {0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0};
    assert_edit_corrupt(data, len, count_at, many, 8, "section entry count 4294967295 beyond");
    uint8_t two[8] = {2};
    assert_edit_corrupt(data, len, count_at, two, 8, "unknown tag"); /* the 3rd entry is read
                                                                          as a tag */
    char want[80];
    snprintf(want, sizeof(want), "offset %zu: entry key length 70000 beyond the file", entry_at);
    put_le32(b4, 70000);
    assert_edit_corrupt(data, len, entry_at, b4, 4, want);
    /* the first entry's state: its length (a gcra state packs to its 8 bytes), then the bytes */
    size_t key_len = data[entry_at] | (size_t)data[entry_at + 1] << 8;
    size_t state_at = entry_at + 4 + key_len;
    put_le32(b4, 7);
    snprintf(want, sizeof(want), "offset %zu: entry state of 7 bytes is no state", state_at);
    assert_edit_corrupt(data, len, state_at, b4, 4, want);
    put_le32(b4, 70000);
    snprintf(want, sizeof(want), "offset %zu: entry state (70000 bytes) cut off", state_at);
    assert_edit_corrupt(data, len, state_at, b4, 4, want);
    uint8_t past[8] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}; /* a TAT before 0 */
    snprintf(want, sizeof(want), "offset %zu: entry state of 8 bytes is no state", state_at);
    assert_edit_corrupt(data, len, state_at + 4, past, 8, want);
    uint8_t sections[8] = {3};
    assert_edit_corrupt(data, len, len - 20, sections, 8,
                        "trailer counts 3 sections and 5 entries, the file holds 2 and 5");
    free(data);
}

static void put_le64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/*
 * A file of an older format, by hand: format 1 (no closed window) or 2, one section "a" of
 * `rule` whose state size field says state_size, and n entries (keys "k0", "k1", ...) whose
 * states are written whole, state_size bytes each, as those formats did. Returns it (malloc'ed)
 * with its length.
 */
static uint8_t *old_format(uint32_t version, const sl_rule_t *rule, uint32_t state_size,
                           uint8_t *const *states, size_t n, size_t *len)
{
    size_t cap = 256 + n * (8 + state_size);
    uint8_t *d = calloc(1, cap), *p = d;
    memcpy(p, "SLUICESN", 8);
    put_le32(p + 8, version);
    put_le64(p + 16, (uint64_t)NOW_NS);
    p += HEADER;
    *p++ = 'S';
    put_le32(p, 1);
    p[4] = 'a';
    p += 5;
    put_le32(p, (uint32_t)rule->algorithm);
    put_le64(p + 4, (uint64_t)rule->limit);
    put_le64(p + 12, (uint64_t)rule->window_ns);
    put_le64(p + 20, (uint64_t)rule->burst);
    put_le64(p + 28, (uint64_t)rule->buckets);
    put_le64(p + 36, (uint64_t)rule->max_delay_ns);
    put_le32(p + 44, state_size);
    p += 48 + (version >= 2 ? 16 : 0); /* the closed window: none */
    put_le64(p, n);
    p += 8;
    for (size_t i = 0; i < n; i++) {
        put_le32(p, 2);
        p[4] = 'k';
        p[5] = (uint8_t)('0' + i);
        memcpy(p + 6, states[i], state_size);
        p += 6 + state_size;
    }
    *p++ = 'E';
    put_le64(p, 1);
    put_le64(p + 8, n);
    p += 16 + 4;
    *len = (size_t)(p - d);
    fix_crc(d, *len);
    return d;
}

/* Files of formats 1 and 2, as older sluiced wrote them, are read: states whole, in the layouts
 * of their time, handed out as today's. gcra's layout is today's; sliding_log's was a ring of one
 * stamp per unit (8 + 8 N bytes), which is converted, exactly (a stamp a unit). */
static void test_reads_older_formats(void **unused)
{
    fill_section(&secs[0], "a", prepared(rule_fields(SL_GCRA, 2, SL_NS_PER_SEC, 1, 0, 0)), 3);
    uint8_t *states[3];
    for (size_t i = 0; i < 3; i++) { /* the keys old_format writes */
        states[i] = secs[0].entries[i].state;
        secs[0].entries[i].key_len = 2;
        memcpy(secs[0].entries[i].key, (char[]){'k', (char)('0' + i)}, 2);
    }
    for (uint32_t version = 1; version <= 2; version++) {
        size_t len;
        uint8_t *data = old_format(version, &secs[0].rule, 8, states, 3, &len);
        seen_t seen = {0};
        char err[SNAPSHOT_ERR_MAX] = "";
        if (snapshot_parse(data, len, visitor(&seen), NULL, err) != SNAPSHOT_LOADED)
            fail_msg("format %u: %s", version, err);
        assert_seen(&seen, secs, 1, NULL);
        seen_free(&seen);
        /* the same bytes read as the other old format are short or long by a closed window */
        put_le32(data + 8, 3 - version);
        fix_crc(data, len);
        assert_int_equal(snapshot_parse(data, len, visitor(&seen), NULL, err), SNAPSHOT_CORRUPT);
        free(data);
    }
    sections_free(secs, 1);

    /* sliding_log, limit 5: a ring of 3 stamps (head 0, count 3), 48 bytes */
    sl_rule_t log = prepared(rule_fields(SL_SLIDING_LOG, 5, SL_NS_PER_SEC, 0, 0, 0));
    uint8_t ring[48] = {0}, *rings[2] = {ring, ring};
    put_le32(ring + 4, 3);
    for (int i = 0; i < 3; i++)
        put_le64(ring + 8 + 8 * i, (uint64_t)(NOW_NS + i * 10 * SL_NS_PER_MS));
    size_t len;
    uint8_t *data = old_format(2, &log, 48, rings, 1, &len);
    seen_t seen = {0};
    char err[SNAPSHOT_ERR_MAX] = "";
    if (snapshot_parse(data, len, visitor(&seen), NULL, err) != SNAPSHOT_LOADED)
        fail_msg("sliding_log ring: %s", err);
    assert_int_equal(seen.sections[0].n, 1);
    uint8_t *state = calloc(1, sl_state_size(&log));
    assert_int_equal(sl_state_unpack(&log, seen.sections[0].entries[0].state,
                                     seen.sections[0].entries[0].packed, state),
                     SL_OK);
    sl_decision_t d;
    assert_int_equal(sl_decide(&log, state, 0, NOW_NS + 30 * SL_NS_PER_MS, &d), SL_OK);
    assert_int_equal(d.remaining, 2); /* the three stamps, each a unit */
    assert_int_equal(sl_decide(&log, state, 0, NOW_NS + SL_NS_PER_SEC + 1, &d), SL_OK);
    assert_int_equal(d.remaining, 3); /* the first left the window */
    free(state);
    seen_free(&seen);
    /* a ring whose stamps go back is no state of the rule */
    put_le64(ring + 16, (uint64_t)(NOW_NS - SL_NS_PER_SEC));
    free(data);
    data = old_format(2, &log, 48, rings, 1, &len);
    assert_int_equal(snapshot_parse(data, len, visitor(&seen), NULL, err), SNAPSHOT_CORRUPT);
    assert_non_null(strstr(err, "entry state of 48 bytes is no state"));
    /* and format 3 sections give today's state size */
    put_le32(data + 8, 3);
    fix_crc(data, len);
    assert_int_equal(snapshot_parse(data, len, visitor(&seen), NULL, err), SNAPSHOT_CORRUPT);
    char want[64];
    snprintf(want, sizeof(want), "state size 48, the rule needs %zu", sl_state_size(&log));
    assert_non_null(strstr(err, want));
    free(data);
}

static void test_failed_commit_keeps_old_snapshot(void **unused)
{
    char parent[256], path[300], tmp[310], inner[320];
    new_path(parent, sizeof(parent));
    assert_int_equal(mkdir(parent, 0700), 0);
    snprintf(path, sizeof(path), "%s/snapshot.db", parent);
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    char err[SNAPSHOT_ERR_MAX] = "";
    snapshot_writer_t *w = NULL;
    size_t n = six_sections(secs, 4);

    /* the target is a (non-empty) directory: the rename fails, the directory stays */
    assert_int_equal(mkdir(path, 0700), 0);
    snprintf(inner, sizeof(inner), "%s/keep", path);
    spit(inner, "x", 1);
    assert_int_equal(snapshot_begin(path, NOW_NS, &w, err), 0);
    assert_true(exists(tmp));
    assert_int_equal(snapshot_section(w, "s", 1, &secs[0].rule, NULL, err), 0);
    assert_int_equal(
        snapshot_entry(w, "k", 1, secs[0].entries[0].state, sl_state_size(&secs[0].rule), err), 0);
    assert_int_equal(snapshot_commit(w, err), -1);
    assert_non_null(strstr(err, "rename"));
    assert_false(exists(tmp));
    assert_true(exists(inner));
    assert_int_equal(remove(inner), 0);
    assert_int_equal(remove(path), 0);

    /* an old snapshot, then a write that fails (the file size limit stands in for a full
     * disk): the old one is what loads */
    write_snapshot(path, secs, 1);
    struct rlimit old_limit, small;
    assert_int_equal(getrlimit(RLIMIT_FSIZE, &old_limit), 0);
    small = old_limit;
    small.rlim_cur = 128 * 1024;
    signal(SIGXFSZ, SIG_IGN);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &small), 0);
    assert_int_equal(snapshot_begin(path, NOW_NS + 1, &w, err), 0);
    sl_rule_t big = prepared(rule_fields(SL_SLIDING_BUCKETS, 1000, SL_NS_PER_SEC, 0, 1000, 0));
    uint8_t *state = calloc(1, sl_state_size(&big)); /* 8 KiB, packed as it is */
    assert_int_equal(snapshot_section(w, "big", 3, &big, NULL, err), 0);
    int rc = 0;
    for (int i = 0; i < 400 && rc == 0; i++) /* 3.2 MB: the buffer is written out */
        rc = snapshot_entry(w, &i, sizeof(i), state, sl_state_size(&big), err);
    assert_int_equal(rc, -1);
    assert_non_null(strstr(err, "File too large"));
    /* the failure is sticky: later calls and the commit fail too */
    assert_int_equal(snapshot_entry(w, "k", 1, state, sl_state_size(&big), err), -1);
    assert_int_equal(snapshot_commit(w, err), -1);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &old_limit), 0);
    signal(SIGXFSZ, SIG_DFL);
    free(state);
    assert_false(exists(tmp));
    seen_t seen = {0};
    int64_t written = 0;
    assert_int_equal(snapshot_load(path, visitor(&seen), &written, err), SNAPSHOT_LOADED);
    assert_int_equal(written, NOW_NS);
    assert_seen(&seen, secs, 1, NULL);
    seen_free(&seen);

    /* abandoned: the old one stays as well */
    assert_int_equal(snapshot_begin(path, NOW_NS + 2, &w, err), 0);
    assert_int_equal(snapshot_section(w, "s", 1, &secs[1].rule, NULL, err), 0);
    snapshot_abort(w);
    snapshot_abort(NULL);
    assert_false(exists(tmp));
    assert_int_equal(snapshot_load(path, NULL, &written, err), SNAPSHOT_LOADED);
    assert_int_equal(written, NOW_NS);

    /* a directory that does not exist: begin fails, nothing is created */
    char nowhere[300];
    snprintf(nowhere, sizeof(nowhere), "%s/no/such/snapshot.db", parent);
    assert_int_equal(snapshot_begin(nowhere, NOW_NS, &w, err), -1);
    assert_non_null(strstr(err, "No such file"));
    sections_free(secs, n);
}

static void test_writer_misuse(void **unused)
{
    char path[256];
    new_path(path, sizeof(path));
    snapshot_writer_t *w = NULL;
    char err[SNAPSHOT_ERR_MAX] = "";
    assert_int_equal(snapshot_begin(path, NOW_NS, &w, err), 0);
    uint8_t state[16] = {0};
    assert_int_equal(snapshot_entry(w, "k", 1, state, 16, err), -1);
    assert_non_null(strstr(err, "no section"));
    sl_rule_t fw = prepared(rule_fields(SL_FIXED_WINDOW, 3, SL_NS_PER_SEC, 0, 0, 0));
    assert_int_equal(snapshot_section(w, "s", 1, &fw, NULL, err), 0);
    assert_int_equal(snapshot_entry(w, "k", 1, state, 15, err), -1); /* short of a state */
    assert_non_null(strstr(err, "not a state of the section's rule"));
    assert_int_equal(snapshot_entry(w, "k", 1, state, 16, err), 0);
    /* a refused section ends the one before: its entries cannot land there */
    sl_rule_t unprepared = rule_fields(SL_FIXED_WINDOW, 0, SL_NS_PER_SEC, 0, 0, 0);
    assert_int_equal(snapshot_section(w, "bad", 3, &unprepared, NULL, err), -1);
    assert_non_null(strstr(err, "limit must"));
    assert_int_equal(snapshot_entry(w, "k2", 2, state, 16, err), -1);
    assert_non_null(strstr(err, "no section"));
    /* none of these errors broke the writer */
    assert_int_equal(snapshot_section(w, "t", 1, &fw, NULL, err), 0);
    assert_int_equal(snapshot_entry(w, "k3", 2, state, 16, err), 0);
    assert_int_equal(snapshot_commit(w, err), 0);
    seen_t seen = {0};
    assert_int_equal(snapshot_load(path, visitor(&seen), NULL, err), SNAPSHOT_LOADED);
    assert_int_equal(seen.nsections, 2);
    assert_int_equal(seen.sections[0].n, 1);
    assert_int_equal(seen.sections[1].n, 1);
    assert_memory_equal(seen.sections[1].entries[0].key, "k3", 2);
    seen_free(&seen);
}

static void test_set_aside(void **unused)
{
    char path[256], want[300], aside[4096];
    new_path(path, sizeof(path));
    char err[SNAPSHOT_ERR_MAX] = "";
    spit(path, "junk 1", 6);
    assert_int_equal(snapshot_set_aside(path, NOW_NS + 5, aside, err), 0);
    snprintf(want, sizeof(want), "%s.corrupt-1700000000", path);
    assert_string_equal(aside, want);
    assert_false(exists(path));
    size_t len;
    uint8_t *data = slurp(want, &len);
    assert_memory_equal(data, "junk 1", 6);
    free(data);

    /* a second one in the same second does not overwrite the first */
    spit(path, "junk 2", 6);
    assert_int_equal(snapshot_set_aside(path, NOW_NS, NULL, err), 0);
    snprintf(want, sizeof(want), "%s.corrupt-1700000000-1", path);
    data = slurp(want, &len);
    assert_memory_equal(data, "junk 2", 6);
    free(data);
    assert_false(exists(path));

    assert_int_equal(snapshot_set_aside(path, NOW_NS, aside, err), -1);
    assert_non_null(strstr(err, "No such file"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_crc_reference),
        cmocka_unit_test(test_round_trip_six_algorithms),
        cmocka_unit_test(test_round_trip_large_sections),
        cmocka_unit_test(test_direct_and_page_cache),
        cmocka_unit_test(test_round_trip_adaptive),
        cmocka_unit_test(test_empty_snapshot),
        cmocka_unit_test(test_missing_and_unreadable),
        cmocka_unit_test(test_every_byte_flip_is_corrupt),
        cmocka_unit_test(test_every_truncation_is_corrupt),
        cmocka_unit_test(test_structure_errors_behind_a_good_crc),
        cmocka_unit_test(test_reads_older_formats),
        cmocka_unit_test(test_failed_commit_keeps_old_snapshot),
        cmocka_unit_test(test_writer_misuse),
        cmocka_unit_test(test_set_aside),
    };
    return cmocka_run_group_tests(tests, group_setup, tmpdir_remove);
}
