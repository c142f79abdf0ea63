/*
 * snapshot.c - the memory request store on disk: write, verify, read (see snapshot.h for the
 * format).
 *
 * Writing streams: bytes go through a 1 MiB buffer to "<path>.tmp" with one running CRC-32C.
 * The file is written with direct I/O (O_DIRECT) where the file system allows it: whole 4 KiB
 * blocks from the buffer to the device, the last few bytes at commit. A snapshot is read only
 * when sluiced starts, so the page cache gains nothing from holding it; and the writeback of
 * hundreds of megabytes of cached pages is kernel work that runs in bursts of up to a
 * millisecond, which a kernel without preemption does not interrupt for the event loop that
 * shares the core (docs/dev/design.md, "Snapshots"). Where direct I/O is refused (some file systems
 * do), the file is written through the page cache instead.
 *
 * A section's entry count is known only when the section ends, so the section header is written
 * with a count of 0 and patched when the next section starts (or at commit): in the buffer where
 * it still is, with a small write through the page cache where it was written out already
 * (whole blocks below the buffer's start, which no later direct write touches). The running CRC is
 * corrected at the same time without reading anything back (crc32c_shift, crc32c.h).
 *
 * Reading maps the whole file and walks it twice: first to check every tag, length, rule, count
 * and state against the file and the CRC, then, only when all of it is good, to hand the sections
 * and entries to the visitor. The visiting walk cannot fail (its states fit the buffer the first
 * walk grew).
 *
 * Integers are read and written byte by byte, little-endian, so the format does not depend on
 * the host's byte order or alignment.
 *
 * This file is long because the writer and the reader of one format belong together: each field
 * the writer puts at an offset, the reader checks at the same offset, for every format version.
 */
#define _GNU_SOURCE
#include "store/snapshot.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/core.h"
#include "store/crc32c.h"

#define SNAPSHOT_MAGIC           "SLUICESN"
#define SNAPSHOT_MAGIC_LEN       8
#define SNAPSHOT_HEADER_SIZE     24 /* magic, u32 version, u32 flags, i64 written_at_ns */
#define SNAPSHOT_TAG_SECTION     'S'
#define SNAPSHOT_TAG_END         'E'
#define SNAPSHOT_RULE_SIZE       44 /* u32 algorithm, 5 x i64 */
#define SNAPSHOT_ADAPTIVE_SIZE   44 /* format 4 on: u32 algorithm, 5 x i64 */
#define SNAPSHOT_CLOSED_SIZE     16 /* format 2: i64 closed_from_ns, closed_until_ns */
#define SNAPSHOT_TRAILER_SIZE    21 /* u8 tag, u64 sections, u64 entries, u32 CRC */
#define SNAPSHOT_BUF_SIZE        SNAPSHOT_WRITE_BUFFER /* bytes: whole blocks */
#define SNAPSHOT_BLOCK           4096 /* direct I/O: alignment of address, offset, size */
#define SNAPSHOT_SET_ASIDE_MAX   4096 /* set_aside_path buffer, bytes */
#define SNAPSHOT_SET_ASIDE_TRIES 100  /* ".corrupt-<secs>", then "-1" .. "-99" */

/* ---- little-endian encoding ------------------------------------------------------------- */

static void put_u32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void put_u64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get_u32(const uint8_t *p)
{
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static uint64_t get_u64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

/* ---- writing ----------------------------------------------------------------------------- */

struct snapshot_writer {
    int fd;                   /* path.tmp, open for writing; -1 once closed */
    char *path;               /* the snapshot being replaced */
    char *tmp_path;           /* path + ".tmp" */
    uint8_t *buf;             /* SNAPSHOT_BUF_SIZE bytes not yet written, block-aligned */
    size_t used;              /* bytes in buf */
    uint64_t flushed;         /* file offset of buf[0]: bytes already written to the file */
    bool direct;              /* fd has O_DIRECT: flushed is a multiple of SNAPSHOT_BLOCK */
    uint32_t crc;             /* CRC register over every byte so far, as the file will hold them */
    bool in_section;          /* a section is open */
    uint64_t count_off;       /* file offset of the open section's entry count (written as 0) */
    uint64_t section_entries; /* entries in the open section */
    sl_rule_t rule;           /* the open section's rule (its states are packed under it) */
    uint8_t *packed;          /* a state's packed form, packed_cap bytes */
    size_t packed_cap;
    uint64_t sections;              /* sections written */
    uint64_t entries;               /* entries written, all sections */
    bool failed;                    /* sticky: an I/O error happened; commit refuses */
    char failure[SNAPSHOT_ERR_MAX]; /* what failed */
};

static int fail(char *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int fail(char *err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, SNAPSHOT_ERR_MAX, fmt, ap);
    va_end(ap);
    return -1;
}

/* Records an I/O error (errno) as the writer's sticky failure and copies it to err. */
static int writer_fail(snapshot_writer_t *w, const char *what, char *err)
{
    int e = errno;
    if (!w->failed) {
        w->failed = true;
        snprintf(w->failure, sizeof(w->failure), "%s: %s: %s", w->tmp_path, what, strerror(e));
    }
    if (err != NULL)
        snprintf(err, SNAPSHOT_ERR_MAX, "%s", w->failure);
    return -1;
}

/* Writes p[0..n) at file offset `off`, whatever the file position. */
static int pwrite_all(int fd, const uint8_t *p, size_t n, uint64_t off)
{
    while (n > 0) {
        ssize_t done = pwrite(fd, p, n, (off_t)off);
        if (done < 0 && errno == EINTR)
            continue;
        if (done <= 0) {
            if (done == 0)
                errno = EIO;
            return -1;
        }
        p += done;
        n -= (size_t)done;
        off += (uint64_t)done;
    }
    return 0;
}

/* Turns direct I/O on (where the file system and the system have it; else the file is written
 * through the page cache) or off. Returns 0, or -1 when it cannot be turned off. */
static int set_direct(snapshot_writer_t *w, bool on)
{
#ifdef O_DIRECT
    int flags = fcntl(w->fd, F_GETFL);
    if (flags < 0 || fcntl(w->fd, F_SETFL, on ? flags | O_DIRECT : flags & ~O_DIRECT) != 0)
        return on ? (w->direct = false, 0) : -1;
    w->direct = on;
#else
    w->direct = false;
#endif
    return 0;
}

/* Writes p[0..n) at `off`; a direct write the file system refuses is written through the page
 * cache, as is everything after it. */
static int write_at(snapshot_writer_t *w, const uint8_t *p, size_t n, uint64_t off)
{
    if (pwrite_all(w->fd, p, n, off) == 0)
        return 0;
    if (!w->direct || errno != EINVAL || set_direct(w, false) != 0)
        return -1;
    return pwrite_all(w->fd, p, n, off);
}

/*
 * Writes the buffer out. It is full (whole blocks, at a multiple of its size) but for the last
 * write, which, when it is not whole blocks, goes through the page cache.
 */
static int flush(snapshot_writer_t *w, char *err)
{
    if (w->used == 0)
        return 0;
    if (w->direct && w->used % SNAPSHOT_BLOCK != 0 && set_direct(w, false) != 0)
        return writer_fail(w, "fcntl (O_DIRECT off)", err);
    if (write_at(w, w->buf, w->used, w->flushed) != 0)
        return writer_fail(w, "write", err);
    w->flushed += w->used;
    w->used = 0;
    return 0;
}

/* Appends n bytes (through the buffer) and advances the CRC. */
static int emit(snapshot_writer_t *w, const void *data, size_t n, char *err)
{
    const uint8_t *p = data;
    w->crc = crc32c_update(w->crc, p, n);
    while (n > 0) {
        if (w->used == SNAPSHOT_BUF_SIZE && flush(w, err) != 0)
            return -1;
        size_t room = SNAPSHOT_BUF_SIZE - w->used;
        size_t take = n < room ? n : room;
        memcpy(w->buf + w->used, p, take);
        w->used += take;
        p += take;
        n -= take;
    }
    return 0;
}

/* Ends the open section: writes its real entry count over the 0 and corrects the CRC. */
static int end_section(snapshot_writer_t *w, char *err)
{
    if (!w->in_section)
        return 0;
    w->in_section = false;
    if (w->section_entries == 0)
        return 0; /* the 0 written is right */
    uint8_t count[8];
    put_u64(count, w->section_entries);
    uint64_t end = w->flushed + w->used;
    w->crc ^= crc32c_shift(crc32c_update(0, count, 8), end - (w->count_off + 8));
    /* the count's first bytes may be in the file, the rest in the buffer */
    size_t in_file = w->count_off >= w->flushed ? 0 : (size_t)(w->flushed - w->count_off);
    in_file = in_file < 8 ? in_file : 8;
    if (in_file < 8) /* then count_off + in_file >= flushed */
        memcpy(w->buf + (w->count_off + in_file - w->flushed), count + in_file, 8 - in_file);
    if (in_file == 0)
        return 0;
    bool direct = w->direct;
    if ((direct && set_direct(w, false) != 0) ||
        pwrite_all(w->fd, count, in_file, w->count_off) != 0)
        return writer_fail(w, "write (section count)", err);
    if (direct)
        set_direct(w, true);
    return 0;
}

/* Frees the writer; removes path.tmp when `remove_tmp`. */
static void writer_free(snapshot_writer_t *w, bool remove_tmp)
{
    if (w->fd >= 0)
        close(w->fd);
    if (remove_tmp)
        unlink(w->tmp_path);
    free(w->buf);
    free(w->packed);
    free(w->path);
    free(w->tmp_path);
    free(w);
}

int snapshot_begin(const char *path, int64_t now_ns, snapshot_writer_t **out, char *err)
{
    if (path == NULL || *path == '\0' || out == NULL)
        return fail(err, "snapshot: no path");
    snapshot_writer_t *w = calloc(1, sizeof(*w));
    size_t len = strlen(path);
    if (w == NULL || (w->path = strdup(path)) == NULL ||
        (w->tmp_path = malloc(len + sizeof(".tmp"))) == NULL ||
        posix_memalign((void **)&w->buf, SNAPSHOT_BLOCK, SNAPSHOT_BUF_SIZE) != 0) {
        if (w != NULL) {
            free(w->path);
            free(w->tmp_path);
            free(w);
        }
        return fail(err, "snapshot %s: out of memory", path);
    }
    memcpy(w->tmp_path, path, len);
    memcpy(w->tmp_path + len, ".tmp", sizeof(".tmp"));
    w->crc = ~(uint32_t)0;
    /* 0600: keys are client identifiers (addresses, API keys) */
    w->fd = open(w->tmp_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    struct stat st;
    if (w->fd >= 0 && fstat(w->fd, &st) == 0 && S_ISREG(st.st_mode))
        set_direct(w, true); /* or not, where the file system refuses it */
    if (w->fd < 0) {
        fail(err, "%s: open: %s", w->tmp_path, strerror(errno));
        writer_free(w, false);
        return -1;
    }
    uint8_t header[SNAPSHOT_HEADER_SIZE];
    memcpy(header, SNAPSHOT_MAGIC, SNAPSHOT_MAGIC_LEN);
    put_u32(header + 8, SNAPSHOT_FORMAT);
    put_u32(header + 12, 0);
    put_u64(header + 16, (uint64_t)now_ns);
    if (emit(w, header, sizeof(header), err) != 0) {
        writer_free(w, true);
        return -1;
    }
    *out = w;
    return 0;
}

int snapshot_section(snapshot_writer_t *w, const void *id, size_t id_len, const sl_rule_t *rule,
                     const snapshot_closed_t *closed, char *err)
{
    if (w->failed)
        return fail(err, "%s", w->failure);
    if (rule == NULL || (id == NULL && id_len > 0) || id_len > UINT32_MAX)
        return fail(err, "snapshot section: no rule, or an id of %zu bytes", id_len);
    /* the open section ends even when this one is refused, so that entries which follow a
     * refused section fail rather than land in the previous one */
    if (end_section(w, err) != 0)
        return -1;
    /* the rule as the reader will rebuild it: its public fields, prepared */
    sl_rule_t check = {.algorithm = rule->algorithm,
                       .limit = rule->limit,
                       .window_ns = rule->window_ns,
                       .burst = rule->burst,
                       .buckets = rule->buckets,
                       .max_delay_ns = rule->max_delay_ns,
                       .adaptive = rule->adaptive};
    int rc = sl_rule_prepare(&check);
    if (rc != SL_OK || sl_state_size(&check) != sl_state_size(rule))
        return fail(err, "snapshot section: the rule is not prepared or invalid: %s",
                    rc != SL_OK ? sl_strerror(rc) : "state size differs");

    uint8_t head[1 + 4];
    head[0] = SNAPSHOT_TAG_SECTION;
    put_u32(head + 1, (uint32_t)id_len);
    uint8_t fields[SNAPSHOT_RULE_SIZE + 4 + SNAPSHOT_CLOSED_SIZE + SNAPSHOT_ADAPTIVE_SIZE];
    put_u32(fields, (uint32_t)check.algorithm);
    put_u64(fields + 4, (uint64_t)check.limit);
    put_u64(fields + 12, (uint64_t)check.window_ns);
    put_u64(fields + 20, (uint64_t)check.burst);
    put_u64(fields + 28, (uint64_t)check.buckets);
    put_u64(fields + 36, (uint64_t)check.max_delay_ns);
    put_u32(fields + 44, check.state_size);
    put_u64(fields + 48, closed != NULL ? (uint64_t)closed->from_ns : 0);
    put_u64(fields + 56, closed != NULL ? (uint64_t)closed->until_ns : 0);
    put_u32(fields + 64, (uint32_t)check.adaptive.algorithm);
    put_u64(fields + 68, (uint64_t)check.adaptive.min_limit);
    put_u64(fields + 76, (uint64_t)check.adaptive.max_limit);
    put_u64(fields + 84, (uint64_t)check.adaptive.backoff_pct);
    put_u64(fields + 92, (uint64_t)check.adaptive.timeout_ns);
    put_u64(fields + 100, (uint64_t)check.adaptive.probe);
    uint8_t count[8] = {0}; /* patched by end_section */
    if (emit(w, head, sizeof(head), err) != 0 || emit(w, id, id_len, err) != 0 ||
        emit(w, fields, sizeof(fields), err) != 0)
        return -1;
    w->count_off = w->flushed + w->used;
    if (emit(w, count, sizeof(count), err) != 0)
        return -1;
    w->in_section = true;
    w->section_entries = 0;
    w->rule = check;
    w->sections++;
    return 0;
}

/* Makes w->packed hold at least `need` bytes. */
static int packed_room(snapshot_writer_t *w, size_t need, char *err)
{
    if (need <= w->packed_cap)
        return 0;
    size_t cap = need > 2 * w->packed_cap ? need : 2 * w->packed_cap;
    uint8_t *p = realloc(w->packed, cap);
    if (p == NULL)
        return fail(err, "snapshot entry: out of memory for a state of %zu bytes", need);
    w->packed = p;
    w->packed_cap = cap;
    return 0;
}

int snapshot_entry(snapshot_writer_t *w, const void *key, size_t key_len, const void *state,
                   size_t state_len, char *err)
{
    if (w->failed)
        return fail(err, "%s", w->failure);
    if (!w->in_section)
        return fail(err, "snapshot entry: no section started");
    if ((key == NULL && key_len > 0) || key_len > UINT32_MAX || state == NULL)
        return fail(err, "snapshot entry: no state, or a key of %zu bytes", key_len);
    if (core_state_check(&w->rule, state, state_len) != SL_OK)
        return fail(err, "snapshot entry: not a state of the section's rule (%zu bytes)",
                    state_len);
    if (packed_room(w, core_state_packed_need(&w->rule, state), err) != 0)
        return -1;
    size_t packed = sl_state_pack(&w->rule, state, w->packed);
    uint8_t len[4], plen[4];
    put_u32(len, (uint32_t)key_len);
    put_u32(plen, (uint32_t)packed);
    if (emit(w, len, sizeof(len), err) != 0 || emit(w, key, key_len, err) != 0 ||
        emit(w, plen, sizeof(plen), err) != 0 || emit(w, w->packed, packed, err) != 0)
        return -1;
    w->section_entries++;
    w->entries++;
    return 0;
}

/* fsyncs the directory holding path, so a rename in it is durable. */
static int fsync_dir(const char *path, char *err)
{
    const char *slash = strrchr(path, '/');
    char *dir =
        slash == NULL ? strdup(".") : strndup(path, slash == path ? 1 : (size_t)(slash - path));
    if (dir == NULL)
        return fail(err, "snapshot %s: out of memory", path);
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    int rc = fd < 0 ? -1 : fsync(fd);
    if (rc != 0 && errno != EINVAL) /* EINVAL: the file system cannot sync directories */
        fail(err, "%s: fsync of the directory: %s", dir, strerror(errno));
    else
        rc = 0;
    if (fd >= 0)
        close(fd);
    free(dir);
    return rc;
}

/*
 * Writes the trailer, makes path.tmp durable and renames it over path. A failure before the
 * rename removes path.tmp and leaves the old snapshot; a failure of the directory's fsync after
 * the rename (rare: EIO) returns -1 too, though the new snapshot is then already in place.
 */
int snapshot_commit(snapshot_writer_t *w, char *err)
{
    if (w->failed) {
        fail(err, "%s", w->failure);
        writer_free(w, true);
        return -1;
    }
    uint8_t trailer[SNAPSHOT_TRAILER_SIZE];
    trailer[0] = SNAPSHOT_TAG_END;
    put_u64(trailer + 1, w->sections);
    put_u64(trailer + 9, w->entries);
    if (end_section(w, err) != 0 || emit(w, trailer, SNAPSHOT_TRAILER_SIZE - 4, err) != 0)
        goto fail;
    put_u32(trailer, ~w->crc);
    if (emit(w, trailer, 4, err) != 0 || flush(w, err) != 0)
        goto fail;
    if (fsync(w->fd) != 0) {
        writer_fail(w, "fsync", err);
        goto fail;
    }
    int fd = w->fd;
    w->fd = -1;
    if (close(fd) != 0) {
        writer_fail(w, "close", err);
        goto fail;
    }
    if (rename(w->tmp_path, w->path) != 0) {
        fail(err, "%s: rename to %s: %s", w->tmp_path, w->path, strerror(errno));
        goto fail;
    }
    int rc = fsync_dir(w->path, err);
    writer_free(w, false);
    return rc;
fail:
    writer_free(w, true);
    return -1;
}

bool snapshot_writes_direct(const snapshot_writer_t *w)
{
    return w->direct;
}

void snapshot_abort(snapshot_writer_t *w)
{
    if (w != NULL)
        writer_free(w, true);
}

/* ---- reading ----------------------------------------------------------------------------- */

/* A position in the file being read. */
typedef struct cursor {
    const uint8_t *data;
    size_t len; /* bytes in data */
    size_t off; /* next byte to read */
    char *err;
    const char *name; /* prefix for messages (the path), or NULL */
    uint32_t version; /* the file's format */
    uint8_t *state;   /* an entry's state, unpacked (format 3) or converted (older) */
    size_t state_cap; /* bytes allocated at state */
} cursor_t;

static int corrupt(cursor_t *c, size_t off, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Writes "[name: ]offset N: <message>" and returns SNAPSHOT_CORRUPT. */
static int corrupt(cursor_t *c, size_t off, const char *fmt, ...)
{
    int n = c->name != NULL ? snprintf(c->err, SNAPSHOT_ERR_MAX, "%s: offset %zu: ", c->name, off)
                            : snprintf(c->err, SNAPSHOT_ERR_MAX, "offset %zu: ", off);
    if (n >= 0 && n < SNAPSHOT_ERR_MAX) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(c->err + n, SNAPSHOT_ERR_MAX - (size_t)n, fmt, ap);
        va_end(ap);
    }
    return SNAPSHOT_CORRUPT;
}

static size_t left(const cursor_t *c)
{
    return c->len - c->off;
}

/* Reads fixed-size fields; false when the file ends first (the caller names what). */
static bool take(cursor_t *c, size_t n, const uint8_t **p)
{
    if (n > left(c))
        return false;
    *p = c->data + c->off;
    c->off += n;
    return true;
}

/* One section header, read and checked: its rule prepared, its entry count plausible. */
typedef struct section_head {
    const uint8_t *id;
    size_t id_len;
    sl_rule_t rule;
    snapshot_closed_t closed;
    uint64_t count;
} section_head_t;

static int read_section_head(cursor_t *c, section_head_t *s)
{
    size_t at = c->off;
    const uint8_t *p;
    if (!take(c, 4, &p))
        return corrupt(c, at, "section id length cut off by the end of the file");
    uint32_t id_len = get_u32(p);
    if (!take(c, id_len, &s->id))
        return corrupt(c, at, "section id length %u beyond the file", id_len);
    s->id_len = id_len;
    at = c->off;
    size_t closed_size = c->version >= 2 ? SNAPSHOT_CLOSED_SIZE : 0;
    size_t adaptive_size = c->version >= 4 ? SNAPSHOT_ADAPTIVE_SIZE : 0;
    if (!take(c, SNAPSHOT_RULE_SIZE + 4 + closed_size + adaptive_size + 8, &p))
        return corrupt(c, at, "section rule cut off by the end of the file");
    uint32_t algorithm = get_u32(p);
    if (core_algorithm_at(algorithm) == NULL)
        return corrupt(c, at, "unknown algorithm %u", algorithm);
    s->rule = (sl_rule_t){.algorithm = (sl_algorithm_t)algorithm,
                          .limit = (int64_t)get_u64(p + 4),
                          .window_ns = (int64_t)get_u64(p + 12),
                          .burst = (int64_t)get_u64(p + 20),
                          .buckets = (int64_t)get_u64(p + 28),
                          .max_delay_ns = (int64_t)get_u64(p + 36)};
    if (adaptive_size > 0) {
        const uint8_t *a = p + 48 + closed_size;
        if (get_u32(a) > SL_ADAPTIVE_VEGAS)
            return corrupt(c, at + 48 + closed_size, "unknown adaptive algorithm %u", get_u32(a));
        s->rule.adaptive = (sl_adaptive_t){.algorithm = (sl_adaptive_algorithm_t)get_u32(a),
                                           .min_limit = (int64_t)get_u64(a + 4),
                                           .max_limit = (int64_t)get_u64(a + 12),
                                           .backoff_pct = (int64_t)get_u64(a + 20),
                                           .timeout_ns = (int64_t)get_u64(a + 28),
                                           .probe = (int64_t)get_u64(a + 36)};
    }
    int rc = sl_rule_prepare(&s->rule);
    if (rc != SL_OK)
        return corrupt(c, at, "section rule (%s): %s", sl_algorithm_name(s->rule.algorithm),
                       sl_strerror(rc));
    /* the largest state the rule can need; formats 1 and 2 hold every state at that size, in
     * the layouts of their time (sliding_log's: one stamp per unit) */
    uint32_t state_size = get_u32(p + 44);
    size_t want = c->version >= 3 ? sl_state_size(&s->rule) : core_state_legacy_size(&s->rule);
    if (state_size != want)
        return corrupt(c, at + 44, "state size %u, the rule needs %zu", state_size, want);
    s->closed = (snapshot_closed_t){0, 0};
    if (closed_size > 0) {
        s->closed.from_ns = (int64_t)get_u64(p + 48);
        s->closed.until_ns = (int64_t)get_u64(p + 56);
        if (s->closed.until_ns < s->closed.from_ns || s->closed.from_ns < 0)
            return corrupt(c, at + 48, "closed window [%lld, %lld) runs backwards",
                           (long long)s->closed.from_ns, (long long)s->closed.until_ns);
    }
    size_t count_at = 48 + closed_size + adaptive_size;
    s->count = get_u64(p + count_at);
    /* every entry takes at least a key length and a state (format 3: its length, and a byte) */
    uint64_t least = c->version >= 3 ? 4 + 4 + 1 : 4 + (uint64_t)state_size;
    if (s->count > left(c) / least)
        return corrupt(c, at + count_at, "section entry count %llu beyond the file",
                       (unsigned long long)s->count);
    return SNAPSHOT_LOADED;
}

/* Makes c->state hold at least `need` bytes; false when memory ran out. */
static bool state_room(cursor_t *c, size_t need)
{
    if (need <= c->state_cap)
        return true;
    uint8_t *p = realloc(c->state, need);
    if (p == NULL)
        return false;
    c->state = p;
    c->state_cap = need;
    return true;
}

/*
 * Reads one entry of a section under `rule` into *key and the state, unpacked (format 3: the
 * state's packed form, its length first) or converted (older formats: the state in the layout
 * of their time, sl_state_size() bytes of then) into c->state, *state_len bytes: checked as
 * sl_state_check_len() does, so the visiting walk hands out only states of the rule.
 */
static int read_entry(cursor_t *c, const sl_rule_t *rule, const uint8_t **key, size_t *key_len,
                      size_t *state_len)
{
    size_t at = c->off;
    const uint8_t *p, *raw;
    if (!take(c, 4, &p))
        return corrupt(c, at, "entry key length cut off by the end of the file");
    uint32_t len = get_u32(p);
    if (!take(c, len, key))
        return corrupt(c, at, "entry key length %u beyond the file", len);
    *key_len = len;
    at = c->off;
    size_t raw_len = core_state_legacy_size(rule);
    if (c->version >= 3) {
        if (!take(c, 4, &p))
            return corrupt(c, at, "entry state length cut off by the end of the file");
        raw_len = get_u32(p);
    }
    if (!take(c, raw_len, &raw))
        return corrupt(c, at, "entry state (%zu bytes) cut off by the end of the file", raw_len);
    size_t need = c->version >= 3 ? core_state_unpack_need(rule, raw, raw_len)
                                  : core_state_legacy_need(rule, raw, raw_len);
    if (need == 0)
        return corrupt(c, at, "entry state of %zu bytes is no state of its section's rule",
                       raw_len);
    if (!state_room(c, need))
        return corrupt(c, at, "no memory for an entry state of %zu bytes", need);
    int rc = c->version >= 3 ? core_state_unpack(rule, raw, raw_len, c->state, need)
                             : core_state_from_legacy(rule, raw, raw_len, c->state, need);
    if (rc != SL_OK)
        return corrupt(c, at, "entry state of %zu bytes is no state of its section's rule",
                       raw_len);
    *state_len = need;
    return SNAPSHOT_LOADED;
}

/*
 * Walks the sections and entries after the header up to and including the trailer's counts.
 * With v NULL it only checks; with v it visits (and, the file checked, cannot fail).
 */
static int walk(cursor_t *c, const snapshot_visitor_t *v)
{
    uint64_t sections = 0, entries = 0;
    for (;;) {
        size_t at = c->off;
        const uint8_t *tag;
        if (!take(c, 1, &tag))
            return corrupt(c, at, "the file ends without a trailer");
        if (*tag == SNAPSHOT_TAG_END)
            break;
        if (*tag != SNAPSHOT_TAG_SECTION)
            return corrupt(c, at, "unknown tag 0x%02x (want a section or the trailer)", *tag);
        section_head_t s;
        int rc = read_section_head(c, &s);
        if (rc != SNAPSHOT_LOADED)
            return rc;
        bool wanted = v != NULL && (v->section == NULL ||
                                    v->section(v->arg, s.id, s.id_len, &s.rule, &s.closed));
        for (uint64_t i = 0; i < s.count; i++) {
            const uint8_t *key = NULL;
            size_t key_len = 0, state_len = 0;
            rc = read_entry(c, &s.rule, &key, &key_len, &state_len);
            if (rc != SNAPSHOT_LOADED)
                return rc;
            if (wanted && v->entry != NULL)
                v->entry(v->arg, key, key_len, c->state, state_len);
        }
        sections++;
        entries += s.count;
    }
    size_t at = c->off;
    const uint8_t *p;
    if (left(c) != SNAPSHOT_TRAILER_SIZE - 1)
        return corrupt(c, at, "trailer of %zu bytes, want %d", left(c), SNAPSHOT_TRAILER_SIZE - 1);
    take(c, SNAPSHOT_TRAILER_SIZE - 1, &p);
    if (get_u64(p) != sections || get_u64(p + 8) != entries)
        return corrupt(c, at,
                       "trailer counts %llu sections and %llu entries, the file holds %llu and "
                       "%llu",
                       (unsigned long long)get_u64(p), (unsigned long long)get_u64(p + 8),
                       (unsigned long long)sections, (unsigned long long)entries);
    return SNAPSHOT_LOADED;
}

/* The header: magic, version, flags. Leaves the cursor after it. */
static int read_header(cursor_t *c, int64_t *written_at_ns)
{
    const uint8_t *p;
    if (c->len < SNAPSHOT_MAGIC_LEN || memcmp(c->data, SNAPSHOT_MAGIC, SNAPSHOT_MAGIC_LEN) != 0)
        return corrupt(c, 0, "not a sluice snapshot (no \"%s\" magic)", SNAPSHOT_MAGIC);
    if (!take(c, SNAPSHOT_HEADER_SIZE, &p))
        return corrupt(c, 0, "header cut off by the end of the file (%zu bytes)", c->len);
    uint32_t version = get_u32(p + 8);
    if (version < 1 || version > SNAPSHOT_FORMAT)
        return corrupt(c, 8, "format version %u; this sluiced reads versions 1 to %d", version,
                       SNAPSHOT_FORMAT);
    c->version = version;
    uint32_t flags = get_u32(p + 12);
    if (flags != 0)
        return corrupt(c, 12, "unknown flags 0x%x", flags);
    *written_at_ns = (int64_t)get_u64(p + 16);
    return SNAPSHOT_LOADED;
}

/* snapshot_parse with a name to put before error messages (NULL: none). */
static int parse_named(const void *data, size_t len, const snapshot_visitor_t *v,
                       int64_t *written_at_ns, const char *name, char *err)
{
    cursor_t c = {.data = data, .len = len, .err = err, .name = name};
    int64_t written = 0;
    int rc = read_header(&c, &written);
    if (rc == SNAPSHOT_LOADED)
        rc = walk(&c, NULL); /* checks, and sizes c.state for the largest state */
    uint32_t stored = rc == SNAPSHOT_LOADED ? get_u32(c.data + len - 4) : 0;
    uint32_t computed = rc == SNAPSHOT_LOADED ? crc32c(data, len - 4) : 0;
    if (rc == SNAPSHOT_LOADED && stored != computed)
        rc = corrupt(&c, len - 4, "CRC-32C %08x does not match the contents' %08x", stored,
                     computed);
    if (rc == SNAPSHOT_LOADED && v != NULL) {
        c.off = SNAPSHOT_HEADER_SIZE;
        walk(&c, v); /* cannot fail: the same entries, into a state buffer large enough */
    }
    free(c.state);
    if (rc == SNAPSHOT_LOADED && written_at_ns != NULL)
        *written_at_ns = written;
    return rc;
}

int snapshot_parse(const void *data, size_t len, const snapshot_visitor_t *v,
                   int64_t *written_at_ns, char *err)
{
    if (data == NULL && len > 0) {
        fail(err, "snapshot: no data");
        return SNAPSHOT_CORRUPT;
    }
    return parse_named(len ? data : "", len, v, written_at_ns, NULL, err);
}

int snapshot_load(const char *path, const snapshot_visitor_t *v, int64_t *written_at_ns, char *err)
{
    if (path == NULL) {
        fail(err, "snapshot: no path");
        return SNAPSHOT_EIO;
    }
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        fail(err, "%s: %s", path, strerror(e));
        return e == ENOENT ? SNAPSHOT_MISSING : SNAPSHOT_EIO;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        fail(err, "%s: fstat: %s", path, strerror(errno));
        close(fd);
        return SNAPSHOT_EIO;
    }
    if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size > SIZE_MAX) {
        fail(err, "%s: not a regular file", path);
        close(fd);
        return SNAPSHOT_EIO;
    }
    size_t len = (size_t)st.st_size;
    if (len == 0) {
        close(fd);
        cursor_t c = {.data = (const uint8_t *)"", .err = err, .name = path};
        return corrupt(&c, 0, "empty file");
    }
    void *data = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
    int e = errno;
    close(fd);
    if (data == MAP_FAILED) {
        fail(err, "%s: mmap: %s", path, strerror(e));
        return SNAPSHOT_EIO;
    }
    madvise(data, len, MADV_SEQUENTIAL);
    int rc = parse_named(data, len, v, written_at_ns, path, err);
    munmap(data, len);
    return rc;
}

int snapshot_set_aside(const char *path, int64_t now_ns, char *set_aside_path, char *err)
{
    if (path == NULL)
        return fail(err, "snapshot: no path");
    char name[SNAPSHOT_SET_ASIDE_MAX];
    long long secs = (long long)(now_ns / SL_NS_PER_SEC);
    for (int i = 0; i < SNAPSHOT_SET_ASIDE_TRIES; i++) {
        int n = i == 0 ? snprintf(name, sizeof(name), "%s.corrupt-%lld", path, secs)
                       : snprintf(name, sizeof(name), "%s.corrupt-%lld-%d", path, secs, i);
        if (n < 0 || (size_t)n >= sizeof(name))
            return fail(err, "%s: path too long to set aside", path);
        struct stat st;
        if (lstat(name, &st) == 0)
            continue; /* earlier evidence: keep it */
        if (errno != ENOENT)
            return fail(err, "%s: %s", name, strerror(errno));
        if (rename(path, name) != 0)
            return fail(err, "%s: rename to %s: %s", path, name, strerror(errno));
        if (set_aside_path != NULL)
            memcpy(set_aside_path, name, (size_t)n + 1);
        return 0;
    }
    return fail(err, "%s: %d set-aside copies already exist for second %lld", path,
                SNAPSHOT_SET_ASIDE_TRIES, secs);
}
