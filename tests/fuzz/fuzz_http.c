/*
 * fuzz_http.c - libFuzzer target for the HTTP/1.1 request parser and its helpers.
 *
 * Input layout: bytes 0-3 seed the split into reads, byte 4 picks the limits (small ones, so
 * that short inputs reach them), the rest is what a client sends on one connection.
 *
 * The stream is fed to http_parse_more() as a connection would: append what arrived, parse,
 * consume, repeat until partial; stop at the first error (the connection is closed). Each time
 * the unconsumed bytes are an exact-size heap copy at a new address, so ASan catches any read
 * past them and the reader cannot keep a pointer into an old buffer. Checked for any input: a
 * request uses between 1 and len bytes, every field points inside them, an error carries one of
 * the statuses the contract names and a message; the stream arriving in random pieces (from one
 * byte at a time to large reads, chosen by the seed) gives the same requests, byte for byte,
 * and the same final error status or leftover as the stream arriving whole, and as every piece
 * parsed again from the request's first byte with a fresh reader (http_parse); and the reader's
 * work counter stays within a constant times the bytes, however they were split. The helpers
 * (query, path segments, client address, JSON escaping, responses) run on every parsed request.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proto/http.h"

/* The outcome of a connection, serialized for comparison. */
static void log_bytes(buf_t *log, const void *p, size_t n)
{
    buf_add(log, &n, sizeof(n));
    buf_add(log, p, n);
}

static bool inside(const char *p, size_t n, const char *lo, size_t len)
{
    return p >= lo && n <= len && p - lo <= (long)(len - n);
}

/* A valid UTF-8 string with no control bytes: what http_json_escape() must produce. */
static bool json_safe(const unsigned char *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        unsigned char c = s[i];
        size_t k = c < 0x80 ? 1 : c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3 : 4;
        if (c < 0x20 || c == 0x7f || (c >= 0x80 && c < 0xc2) || c > 0xf4 || i + k > n)
            return false;
        for (size_t j = 1; j < k; j++)
            if ((s[i + j] & 0xc0) != 0x80)
                return false;
        i += k;
    }
    return true;
}

static void exercise_helpers(const http_request_t *r)
{
    char out[256];
    size_t len;
    if (http_query_get(r, "key", out, sizeof(out), &len) && (len >= sizeof(out) || out[len]))
        abort();

    char storage[HTTP_HEAD_MAX + 1];
    http_segment_t segs[16];
    long n = http_path_segments(r->path, r->path_len, storage, r->path_len + 1, segs, 16);
    for (long i = 0; i < n; i++)
        if (segs[i].ptr[segs[i].len] != '\0')
            abort();

    static const char *nets[] = {"10.0.0.0/8", "127.0.0.1", "::1/128", "fd00::/8"};
    netaddr_net_t trusted[4];
    for (size_t i = 0; i < 4; i++)
        if (netaddr_net_parse(nets[i], strlen(nets[i]), &trusted[i]) != NETADDR_OK)
            abort();
    netaddr_t peer = {.family = 4, .addr = {10, 0, 0, 1}}, client;
    char ip[NETADDR_STRLEN];
    if (http_client_addr(r, &peer, trusted, 4, &client) != 0 ||
        netaddr_format(&client, ip, sizeof(ip)) == NULL)
        abort();

    /* the raw path as a problem detail and a policy name: escaped, never broken */
    char detail[256];
    size_t dlen = r->path_len < sizeof(detail) - 1 ? r->path_len : sizeof(detail) - 1;
    memcpy(detail, r->path, dlen);
    detail[dlen] = '\0';
    char esc[1600];
    size_t elen = http_json_escape(esc, sizeof(esc), r->path, dlen);
    if (elen >= sizeof(esc) || !json_safe((const unsigned char *)esc, elen))
        abort();
    buf_t b = {0};
    http_begin(&b, 429);
    http_ratelimit_headers(&b, detail, 10, 1, 0, 1);
    http_problem_end(&b, 429, r->keep_alive, NULL, detail);
    if (b.failed || memchr(b.data, '\0', b.len) != NULL)
        abort();
    buf_free(&b);
}

static void check_request(const http_request_t *r, const char *buf, size_t used)
{
    bool root = r->path_len == 1 && r->path[0] == '/'; /* absolute-form without a path */
    if (!inside(r->path, r->path_len, buf, used) && !root)
        abort();
    if (r->query_len > 0 && !inside(r->query, r->query_len, buf, used))
        abort();
    if (r->body_len > 0 && !inside(r->body, r->body_len, buf, used))
        abort();
    if (r->nheaders > HTTP_HEADERS_MAX)
        abort();
    for (size_t i = 0; i < r->nheaders; i++) {
        const http_header_t *h = &r->headers[i];
        if (!inside(h->name, h->name_len, buf, used) || !inside(h->value, h->value_len, buf, used))
            abort();
    }
}

static void log_request(buf_t *log, const http_request_t *r, long rc)
{
    int32_t fixed[5] = {(int32_t)rc, r->method, r->http_major, r->http_minor, r->keep_alive};
    buf_add(log, fixed, sizeof(fixed));
    log_bytes(log, r->path, r->path_len);
    log_bytes(log, r->query, r->query_len);
    for (size_t i = 0; i < r->nheaders; i++) {
        log_bytes(log, r->headers[i].name, r->headers[i].name_len);
        log_bytes(log, r->headers[i].value, r->headers[i].value_len);
    }
    log_bytes(log, r->body, r->body_len);
}

enum mode { INCREMENTAL, REPARSE };

/* Feeds data in pieces ending at cuts[0..ncuts) (ascending), then the rest; logs what the
 * connection saw. INCREMENTAL keeps one reader for the connection, REPARSE parses the unconsumed
 * bytes from their first byte on every call. Returns the reader's work counter. */
static uint64_t run(const uint8_t *data, size_t size, const size_t *cuts, size_t ncuts,
                    const http_limits_t *lim, enum mode mode, buf_t *log)
{
    char *conn = NULL;
    size_t have = 0, from = 0;
    http_reader_t rd;
    http_reader_init(&rd);
    for (size_t piece = 0; piece <= ncuts; piece++) {
        size_t to = piece < ncuts ? cuts[piece] : size;
        char *grown = malloc(have + (to - from) + 1); /* exact size (+1 for malloc(0)) */
        if (have > 0)
            memcpy(grown, conn, have);
        memcpy(grown + have, data + from, to - from);
        free(conn);
        conn = grown;
        have += to - from;
        from = to;
        for (;;) {
            http_request_t r;
            int status = -7;
            char err[HTTP_ERR_MAX];
            long rc = mode == INCREMENTAL ? http_parse_more(&rd, conn, have, lim, &r, &status, err)
                                          : http_parse(conn, have, lim, &r, &status, err);
            if (rc == HTTP_PARSE_PARTIAL) {
                if (status != 0 && status != 100)
                    abort();
                break;
            }
            if (rc < 0) {
                if (rc != HTTP_PARSE_ERROR || memchr(err, '\0', HTTP_ERR_MAX) == NULL ||
                    err[0] == '\0' ||
                    (status != 400 && status != 413 && status != 431 && status != 501 &&
                     status != 505))
                    abort();
                int32_t fixed[2] = {-1, status};
                buf_add(log, fixed, sizeof(fixed));
                free(conn);
                return rd.work;
            }
            if ((size_t)rc > have)
                abort();
            check_request(&r, conn, (size_t)rc);
            log_request(log, &r, rc);
            exercise_helpers(&r);
            memmove(conn, conn + rc, have - (size_t)rc);
            have -= (size_t)rc;
        }
    }
    int32_t fixed[2] = {0, (int32_t)have};
    buf_add(log, fixed, sizeof(fixed));
    free(conn);
    return rd.work;
}

/* Cut points for reads of 1 .. 2^(seed >> 28) bytes each, chosen by the seed (xorshift32). */
static size_t split_points(uint32_t seed, size_t size, size_t *cuts)
{
    uint32_t x = seed | 1, max = UINT32_C(1) << (seed >> 28);
    size_t n = 0, at = 0;
    for (;;) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        at += 1 + x % max;
        if (at >= size)
            return n;
        cuts[n++] = at;
    }
}

static void same(buf_t *a, buf_t *b)
{
    if (a->failed || b->failed || a->len != b->len || memcmp(a->data, b->data, a->len) != 0)
        abort();
    buf_free(b);
}

/* Bytes each pass may examine per byte received (http-parser, the head scanned at most twice,
 * a chunked body twice), plus the head's last byte fed again once per request. */
#define WORK_PER_BYTE 4

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 5)
        return 0;
    uint32_t seed = (uint32_t)data[0] | (uint32_t)data[1] << 8 | (uint32_t)data[2] << 16 |
                    (uint32_t)data[3] << 24;
    uint8_t pick = data[4];
    data += 5;
    size -= 5;
    http_limits_t lim = {0};
    if (pick & 1)
        lim.body_max = 1 + (pick >> 1 & 0x1f);
    if (pick & 0x40)
        lim.head_max = 24 + (size_t)(pick & 0x3f) * 4;
    if (pick & 0x80)
        lim.headers_max = 1 + (pick >> 2 & 7);

    size_t *cuts = malloc((size + 1) * sizeof(*cuts));
    size_t ncuts = split_points(seed, size, cuts);
    buf_t whole = {0}, split = {0}, reparsed = {0};
    uint64_t work_whole = run(data, size, NULL, 0, &lim, INCREMENTAL, &whole);
    uint64_t work_split = run(data, size, cuts, ncuts, &lim, INCREMENTAL, &split);
    if (work_whole > WORK_PER_BYTE * (uint64_t)size || work_split > WORK_PER_BYTE * (uint64_t)size)
        abort();
    same(&whole, &split);
    if (size <= 4096) { /* quadratic when the pieces are small */
        run(data, size, cuts, ncuts, &lim, REPARSE, &reparsed);
        same(&whole, &reparsed);
    }
    buf_free(&whole);
    free(cuts);
    return 0;
}
