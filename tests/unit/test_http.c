/*
 * test_http.c - the HTTP/1.1 codec: complete, partial, pipelined, chunked and malformed
 * requests, every limit exactly at and one over, the request helpers (headers, query, path
 * segments, CIDR, X-Forwarded-For) and the exact bytes of every response builder. Each parse
 * input is placed right before a PROT_NONE page (picohttpparser's trick), so reading one byte
 * past the end crashes the test.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cmocka.h>
#include <http_parser.h>

#include "proto/http.h"

#define AREA (64 * 1024) /* bytes in front of the guard page */

static char *area; /* AREA bytes, then a PROT_NONE page */
static size_t page;

static int setup(void **unused)
{
    page = (size_t)sysconf(_SC_PAGESIZE);
    area = mmap(NULL, AREA + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    assert_true(area != MAP_FAILED);
    assert_int_equal(mprotect(area + AREA, page, PROT_NONE), 0);
    return 0;
}

static int teardown(void **unused)
{
    munmap(area, AREA + page);
    return 0;
}

/* Copies len bytes so that they end exactly at the guard page; returns the copy. */
static char *place(const char *bytes, size_t len)
{
    assert_true(len <= AREA);
    char *p = area + AREA - len;
    memmove(p, bytes, len);
    return p;
}

typedef struct parsed {
    long rc;
    int status;
    char *buf; /* where the input was placed */
    http_request_t req;
    char err[HTTP_ERR_MAX];
} parsed_t;

static parsed_t *parse_with(const char *bytes, size_t len, const http_limits_t *limits)
{
    static parsed_t p;
    memset(&p, 0, sizeof(p));
    p.buf = place(bytes, len);
    p.rc = http_parse(p.buf, len, limits, &p.req, &p.status, p.err);
    return &p;
}

static parsed_t *parse(const char *s)
{
    return parse_with(s, strlen(s), NULL);
}

static void assert_span(const char *p, size_t len, const char *want)
{
    if (len != strlen(want) || memcmp(p, want, len) != 0)
        fail_msg("got \"%.*s\", want \"%s\"", (int)len, p, want);
}

static void assert_header(const http_request_t *r, const char *name, const char *want)
{
    const char *v;
    size_t vlen;
    if (!http_header_get(r, name, &v, &vlen))
        fail_msg("no header %s", name);
    assert_span(v, vlen, want);
}

/* Every pointer of a parsed request lies inside the rc bytes it used (or is a literal). */
static void assert_inside(const parsed_t *p)
{
    const char *lo = p->buf, *hi = p->buf + p->rc;
    const http_request_t *r = &p->req;
    assert_true(r->path >= lo && r->path + r->path_len <= hi);
    assert_true(r->query >= lo && r->query + r->query_len <= hi);
    assert_true(r->body >= lo && r->body + r->body_len <= hi);
    for (size_t i = 0; i < r->nheaders; i++) {
        assert_true(r->headers[i].name >= lo && r->headers[i].name + r->headers[i].name_len <= hi);
        assert_true(r->headers[i].value >= lo &&
                    r->headers[i].value + r->headers[i].value_len <= hi);
    }
}

static void assert_buf(const buf_t *b, const char *want);

/* ---- parsing ------------------------------------------------------------------------------ */

static void test_simple_get(void **unused)
{
    const char req[] = "GET /v1/auth/api?key=u%2042&x HTTP/1.1\r\n"
                       "Host: example.com\r\n"
                       "X-Api-Key:   secret \t\r\n"
                       "Accept: */*\r\n"
                       "\r\n";
    parsed_t *p = parse(req);
    assert_int_equal(p->rc, (long)strlen(req));
    assert_int_equal(p->req.method, HTTP_GET);
    assert_span(p->req.path, p->req.path_len, "/v1/auth/api");
    assert_span(p->req.query, p->req.query_len, "key=u%2042&x");
    assert_int_equal(p->req.nheaders, 3);
    assert_span(p->req.headers[0].name, p->req.headers[0].name_len, "Host");
    assert_header(&p->req, "x-api-key", "secret"); /* OWS trimmed on both sides */
    assert_header(&p->req, "ACCEPT", "*/*");
    assert_int_equal(p->req.body_len, 0);
    assert_true(p->req.keep_alive);
    assert_int_equal(p->req.http_major, 1);
    assert_int_equal(p->req.http_minor, 1);
    assert_inside(p);
}

static void test_target_forms(void **unused)
{
    parsed_t *p = parse("GET /p#frag HTTP/1.1\r\nHost: h\r\n\r\n");
    assert_true(p->rc > 0);
    assert_span(p->req.path, p->req.path_len, "/p");
    assert_int_equal(p->req.query_len, 0);

    p = parse("GET /p?a=1#frag?x HTTP/1.1\r\nHost: h\r\n\r\n");
    assert_span(p->req.path, p->req.path_len, "/p");
    assert_span(p->req.query, p->req.query_len, "a=1");

    p = parse("GET http://example.com:8390/v1/rules?x=1 HTTP/1.1\r\nHost: h\r\n\r\n");
    assert_true(p->rc > 0);
    assert_span(p->req.path, p->req.path_len, "/v1/rules");
    assert_span(p->req.query, p->req.query_len, "x=1");

    p = parse("GET http://example.com HTTP/1.1\r\nHost: h\r\n\r\n");
    assert_true(p->rc > 0);
    assert_span(p->req.path, p->req.path_len, "/");

    p = parse("OPTIONS * HTTP/1.1\r\nHost: h\r\n\r\n");
    assert_true(p->rc > 0);
    assert_int_equal(p->req.method, HTTP_OPTIONS);
    assert_span(p->req.path, p->req.path_len, "*");

    /* empty lines before a request are skipped (RFC 9112 §2.2) and count as used */
    const char blank_lines[] = "\r\n\nGET / HTTP/1.1\r\nHost: h\r\n\r\n";
    p = parse(blank_lines);
    assert_int_equal(p->rc, (long)strlen(blank_lines));
    assert_span(p->req.path, p->req.path_len, "/");
}

static void test_post_body(void **unused)
{
    const char req[] = "POST /v1/allow HTTP/1.1\r\nHost: h\r\nContent-Length: 24\r\n\r\n"
                       "{\"rule\":\"api\",\"key\":\"u\"}X";
    parsed_t *p = parse(req);
    assert_int_equal(p->rc, (long)strlen(req) - 1); /* the X is the next request */
    assert_int_equal(p->req.method, HTTP_POST);
    assert_span(p->req.body, p->req.body_len, "{\"rule\":\"api\",\"key\":\"u\"}");
    assert_inside(p);
}

static void test_pipelined(void **unused)
{
    const char *reqs[] = {
        "GET /healthz HTTP/1.1\r\nHost: h\r\n\r\n",
        "POST /v1/allow HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nabc",
        "POST /c HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nde\r\n0\r\n\r\n",
        "DELETE /v1/rules/x HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n",
    };
    const char *paths[] = {"/healthz", "/v1/allow", "/c", "/v1/rules/x"};
    const char *bodies[] = {"", "abc", "de", ""};
    int methods[] = {HTTP_GET, HTTP_POST, HTTP_POST, HTTP_DELETE};
    char all[1024] = "";
    for (size_t i = 0; i < 4; i++)
        strcat(all, reqs[i]);
    size_t len = strlen(all);
    char *buf = place(all, len);
    size_t off = 0;
    for (size_t i = 0; i < 4; i++) {
        http_request_t r;
        int status;
        char err[HTTP_ERR_MAX];
        long rc = http_parse(buf + off, len - off, NULL, &r, &status, err);
        assert_int_equal(rc, (long)strlen(reqs[i]));
        assert_int_equal(r.method, methods[i]);
        assert_span(r.path, r.path_len, paths[i]);
        assert_span(r.body, r.body_len, bodies[i]);
        assert_int_equal(r.keep_alive, i != 3);
        off += (size_t)rc;
    }
    assert_int_equal(off, len);
}

/* Every strict prefix of a request is partial and leaves the bytes as they were; the whole
 * request then parses to its full length. */
static void test_every_split_point(void **unused)
{
    const char *reqs[] = {
        "GET /a?b=c HTTP/1.1\r\nHost: h\r\nX-Forwarded-For: 1.2.3.4\r\n\r\n",
        "\r\nPOST /p HTTP/1.0\r\nContent-Length: 5\r\n\r\nhello",
        ("PUT /r HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
         "5;ext=1\r\nhello\r\na\r\n0123456789\r\n0\r\nTrailer: x\r\n\r\n"),
        "GET / HTTP/1.1\nHost: h\n\n", /* bare LFs */
        "M-SEARCH * HTTP/1.1\r\nHost: h\r\n\r\n",
    };
    for (size_t r = 0; r < sizeof(reqs) / sizeof(reqs[0]); r++) {
        size_t len = strlen(reqs[r]);
        for (size_t n = 0; n < len; n++) {
            parsed_t *p = parse_with(reqs[r], n, NULL);
            if (p->rc != HTTP_PARSE_PARTIAL)
                fail_msg("request %zu prefix %zu: rc %ld (%d %s)", r, n, p->rc, p->status, p->err);
            assert_memory_equal(p->buf, reqs[r], n);
        }
        parsed_t *p = parse_with(reqs[r], len, NULL);
        if (p->rc != (long)len)
            fail_msg("request %zu: rc %ld (%d %s)", r, p->rc, p->status, p->err);
    }
}

static void test_chunked(void **unused)
{
    const char req[] = "POST /v1/allow HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
                       "4;name=value;flag\r\n{\"a\"\r\n"
                       "A\r\n:1,\"b\":\"\r\n\r\n"
                       "2\r\n\"}\r\n"
                       "0\r\nX-Trailer: t\r\nY: 2\r\n\r\n"
                       "GET";
    size_t len = strlen(req);
    parsed_t *p = parse(req);
    assert_int_equal(p->rc, (long)len - 3);
    assert_span(p->req.body, p->req.body_len, "{\"a\":1,\"b\":\"\r\n\"}");
    assert_int_equal(p->req.nheaders, 2); /* trailers are dropped */
    const char *v;
    size_t vlen;
    assert_false(http_header_get(&p->req, "X-Trailer", &v, &vlen));
    assert_inside(p);
    assert_memory_equal(p->buf + p->rc, "GET", 3); /* the next request is untouched */

    p = parse("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n");
    assert_true(p->rc > 0);
    assert_int_equal(p->req.body_len, 0);
}

/* A head just under HTTP_HEAD_MAX arriving one byte per read, then a body one byte per read:
 * with one reader for the connection every byte is examined a bounded number of times
 * (parsing each read's buffer from its first byte would examine about len^2 / 2 bytes). */
static void test_byte_by_byte_work(void **unused)
{
    static char req[HTTP_HEAD_MAX + 64];
    size_t len = (size_t)snprintf(req, sizeof(req), "POST /v1/allow HTTP/1.1\r\nHost: h\r\n");
    char pad[251];
    memset(pad, 'v', sizeof(pad) - 1);
    pad[sizeof(pad) - 1] = '\0';
    for (int i = 0; i < 60; i++)
        len += (size_t)snprintf(req + len, sizeof(req) - len, "X-Pad-%02d: %s\r\n", i, pad);
    len += (size_t)snprintf(req + len, sizeof(req) - len, "Content-Length: 5\r\n\r\nhello");
    size_t head = len - 5;
    assert_true(head < HTTP_HEAD_MAX && head > HTTP_HEAD_MAX - 1024);

    http_reader_t rd;
    http_reader_init(&rd);
    http_request_t r;
    int status;
    char err[HTTP_ERR_MAX];
    for (size_t n = 1; n < len; n++) { /* each read's bytes placed anew before the guard page */
        char *buf = place(req, n);
        long rc = http_parse_more(&rd, buf, n, NULL, &r, &status, err);
        if (rc != HTTP_PARSE_PARTIAL)
            fail_msg("prefix %zu: rc %ld (%d %s)", n, rc, status, err);
    }
    char *buf = place(req, len);
    assert_int_equal(http_parse_more(&rd, buf, len, NULL, &r, &status, err), (long)len);
    assert_int_equal(r.nheaders, 62);
    assert_header(&r, "x-pad-59", pad);
    assert_span(r.body, r.body_len, "hello");
    if (rd.work > 4 * (uint64_t)len)
        fail_msg("%llu bytes examined for a request of %zu", (unsigned long long)rd.work, len);
}

/* Parses req whole with a fresh reader, and again in two reads (its first byte, then the
 * rest); both must give the same request. Returns the whole parse's work counter. */
static uint64_t parse_both_ways(const char *req, http_request_t *whole)
{
    size_t len = strlen(req);
    int status;
    char err[HTTP_ERR_MAX];
    http_reader_t rd;
    http_reader_init(&rd);
    char *buf = place(req, len);
    assert_int_equal(http_parse_more(&rd, buf, len, NULL, whole, &status, err), (long)len);
    uint64_t work = rd.work;
    http_reader_t rd2;
    http_reader_init(&rd2);
    http_request_t split;
    static char copy[AREA];
    memcpy(copy, buf, len); /* whole's fields point into buf: compare against a second copy */
    assert_int_equal(http_parse_more(&rd2, copy, 1, NULL, &split, &status, err), 0);
    assert_int_equal(http_parse_more(&rd2, copy, len, NULL, &split, &status, err), (long)len);
    assert_int_equal(split.method, whole->method);
    assert_int_equal(split.http_minor, whole->http_minor);
    assert_int_equal(split.keep_alive, whole->keep_alive);
    assert_int_equal(split.path - copy, whole->path - buf);
    assert_int_equal(split.path_len, whole->path_len);
    assert_int_equal(split.query_len, whole->query_len);
    assert_int_equal(split.body_len, whole->body_len);
    assert_int_equal(split.nheaders, whole->nheaders);
    for (size_t i = 0; i < split.nheaders; i++) {
        assert_int_equal(split.headers[i].name - copy, whole->headers[i].name - buf);
        assert_int_equal(split.headers[i].value - copy, whole->headers[i].value - buf);
        assert_int_equal(split.headers[i].value_len, whole->headers[i].value_len);
    }
    return work;
}

/* The plainest requests (GET or HEAD, no body framing, printable ASCII) arriving whole are read
 * in one pass over the head (work = its length); any other, or one that arrives in pieces, takes
 * the general parser's passes (work >= twice the head). Both ways give the same request. */
static void test_fast_path_one_pass(void **unused)
{
    static const char *plain[] = {
        "GET /v1/auth/api?key=k1 HTTP/1.1\r\nHost: h\r\nX-Api-Key:  abc \r\n\r\n",
        "HEAD / HTTP/1.1\r\nhost: h\r\nConnection: close\r\n\r\n",
        "GET /a/b;c=d?x=%20&y=@: HTTP/1.0\r\n\r\n",
        "GET /x HTTP/1.0\r\nConnection: Keep-Alive\r\nConnection: close\r\n\r\n",
        "GET /x HTTP/1.1\r\nHost: h\r\nConnection: keep-alive\r\nConnection: close\r\n\r\n",
        "GET /?q HTTP/1.1\r\nHost:\th\t\r\nEmpty:\r\n\r\n",
    };
    static const char *general[] = {
        "POST /v1/allow HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n",
        "GET /x HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n",
        "GET /x#frag HTTP/1.1\r\nHost: h\r\n\r\n",
        "GET /x HTTP/1.1\nHost: h\n\n",
        "GET /x HTTP/1.1\r\nHost: h\r\nConnection: keep-alive, Upgrade\r\nUpgrade: h2c\r\n\r\n",
        "GET /x HTTP/1.1\r\nHost: h\r\nX: caf\xc3\xa9\r\n\r\n",
        "GET http://h/x HTTP/1.1\r\nHost: h\r\n\r\n",
        "\r\nGET /x HTTP/1.1\r\nHost: h\r\n\r\n",
        "GET /x HTTP/1.0\r\nProxy-Connection: keep-alive\r\n\r\n",
        "GET /x HTTP/1.1\r\nHost: h\r\nConnectionx: close\r\n\r\n",
    };
    http_request_t r;
    for (size_t i = 0; i < sizeof(plain) / sizeof(plain[0]); i++) {
        uint64_t work = parse_both_ways(plain[i], &r);
        if (work != strlen(plain[i]))
            fail_msg("plain request %zu: %llu bytes examined for a head of %zu", i,
                     (unsigned long long)work, strlen(plain[i]));
    }
    for (size_t i = 0; i < sizeof(general) / sizeof(general[0]); i++) {
        uint64_t work = parse_both_ways(general[i], &r);
        if (work < 2 * strlen(general[i]))
            fail_msg("request %zu took the fast path (%llu bytes examined)", i,
                     (unsigned long long)work);
    }
    /* a name that only begins with Transfer-Encoding: http-parser takes it for one (and the
     * request, without chunked, for an error); arriving whole it is answered the same way */
    parsed_t *p = parse("GET /x HTTP/1.1\r\nHost: h\r\nTransfer-Encodingch: unked\r\n\r\n");
    assert_int_equal(p->rc, HTTP_PARSE_ERROR);
    assert_int_equal(p->status, 400);
    /* what the fast path read: HTTP/1.0 with keep-alive and close (close does not win there, as
     * http-parser decides), HTTP/1.1 with both (close wins) */
    parse_both_ways(plain[3], &r);
    assert_true(r.keep_alive);
    parse_both_ways(plain[4], &r);
    assert_false(r.keep_alive);
    parse_both_ways(plain[0], &r);
    assert_header(&r, "x-api-key", "abc");
    assert_span(r.query, r.query_len, "key=k1");
}

/* A "Transfer-Encoding" among the trailers changes nothing: the head decided the framing, so the
 * body is de-chunked and its framing checked strictly (http-parser alone would forget chunked
 * at such a trailer and hand back the framing bytes as the body). */
static void test_chunked_transfer_encoding_trailer(void **unused)
{
    parsed_t *p = parse("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
                        "3\r\nabc\r\n2\r\nde\r\n0\r\nTransfer-Encoding: x\r\n\r\n");
    assert_true(p->rc > 0);
    assert_span(p->req.body, p->req.body_len, "abcde");
    assert_inside(p);

    p = parse("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
              "3\r\nabcXY0\r\nTransfer-Encoding: x\r\n\r\n");
    assert_int_equal(p->rc, HTTP_PARSE_ERROR);
    assert_int_equal(p->status, 400);
    assert_string_equal(p->err, "chunk data not followed by CRLF (line 6, column 4)");
}

static void test_chunked_malformed(void **unused)
{
    static const struct {
        const char *body;
        const char *err;
    } cases[] = {
        /* http-parser as Debian builds it accepts these; the strict decoder does not */
        {"3\r\nabcXY0\r\n\r\n", "chunk data not followed by CRLF (line 6, column 4)"},
        {"3 \r\nabc\r\n0\r\n\r\n", "malformed chunk extension (line 5, column 3)"},
        {"3\rXabc\r\n0\r\n\r\n", "chunk size line not ended by CRLF (line 5, column 2)"},
        {"3\r\nabc\r\n0\r\nT: 1\r\n\rX", "malformed trailer line (line 9, column 1)"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char req[256];
        snprintf(req, sizeof(req),
                 "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n"
                 "\r\n%s",
                 cases[i].body);
        parsed_t *p = parse(req);
        if (p->rc != HTTP_PARSE_ERROR)
            fail_msg("case %zu: rc %ld", i, p->rc);
        assert_int_equal(p->status, 400);
        assert_string_equal(p->err, cases[i].err);
    }
    /* rejected by http-parser itself: a size that is not hex */
    parsed_t *p = parse("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n");
    assert_int_equal(p->rc, HTTP_PARSE_ERROR);
    assert_int_equal(p->status, 400);
    assert_string_equal(p->err, "invalid chunk size (line 5, column 1)");
}

/* A request whose head is exactly head_len bytes (padding in an X-Pad header). */
static size_t make_head(char *out, size_t head_len, const char *extra)
{
    const char *fmt = "GET / HTTP/1.1\r\nHost: h\r\n%sX-Pad: ";
    int n = snprintf(out, head_len, fmt, extra);
    assert_true(n > 0 && (size_t)n + 4 < head_len);
    memset(out + n, 'p', head_len - (size_t)n - 4);
    memcpy(out + head_len - 4, "\r\n\r\n", 4);
    return head_len;
}

static void test_head_limit(void **unused)
{
    static char req[HTTP_HEAD_MAX + 64];
    size_t len = make_head(req, HTTP_HEAD_MAX, "");
    parsed_t *p = parse_with(req, len, NULL);
    assert_int_equal(p->rc, HTTP_HEAD_MAX); /* exactly at the limit */
    assert_int_equal(p->req.nheaders, 2);

    len = make_head(req, HTTP_HEAD_MAX + 1, "");
    p = parse_with(req, len, NULL);
    assert_int_equal(p->rc, HTTP_PARSE_ERROR);
    assert_int_equal(p->status, 431);
    assert_string_equal(p->err, "request head of 16385 bytes exceeds the limit of 16384");

    /* slowloris: a head that is still incomplete at the limit is an error, not buffered */
    p = parse_with(req, HTTP_HEAD_MAX - 1, NULL);
    assert_int_equal(p->rc, HTTP_PARSE_PARTIAL);
    p = parse_with(req, HTTP_HEAD_MAX, NULL);
    assert_int_equal(p->rc, HTTP_PARSE_ERROR);
    assert_int_equal(p->status, 431);
    assert_string_equal(p->err, "request head exceeds 16384 bytes");

    /* endless empty lines before the request line are bounded the same way */
    memset(req, '\n', HTTP_HEAD_MAX);
    p = parse_with(req, HTTP_HEAD_MAX, NULL);
    assert_int_equal(p->status, 431);

    /* a lower configured limit */
    http_limits_t lim = {.head_max = 100};
    len = make_head(req, 100, "");
    assert_int_equal(parse_with(req, len, &lim)->rc, 100);
    len = make_head(req, 101, "");
    assert_int_equal(parse_with(req, len, &lim)->status, 431);
    /* a bad byte past the limit is still "too large": the limit was broken first */
    len = make_head(req, 300, "");
    req[150] = '\x01';
    assert_int_equal(parse_with(req, len, &lim)->status, 431);
    req[50] = '\x01'; /* ...and one before it is a 400 */
    assert_int_equal(parse_with(req, len, &lim)->status, 400);
}

static void test_header_count_limit(void **unused)
{
    char extra[4096] = "", req[8192];
    /* Host + 62 X-N headers + X-Pad = 64 fields: accepted */
    for (int i = 0; i < 62; i++)
        snprintf(extra + strlen(extra), sizeof(extra) - strlen(extra), "X-%d: %d\r\n", i, i);
    size_t len = make_head(req, 2000, extra);
    parsed_t *p = parse_with(req, len, NULL);
    assert_int_equal(p->rc, 2000);
    assert_int_equal(p->req.nheaders, HTTP_HEADERS_MAX);
    assert_header(&p->req, "X-61", "61");

    strcat(extra, "X-62: 62\r\n"); /* 65 */
    len = make_head(req, 2000, extra);
    p = parse_with(req, len, NULL);
    assert_int_equal(p->rc, HTTP_PARSE_ERROR);
    assert_int_equal(p->status, 431);
    assert_string_equal(p->err, "more than 64 header fields");
    /* decided at the 65th name's ':': before it, the request is only incomplete */
    const char *colon = strstr(req, "X-Pad:") + 5;
    p = parse_with(req, (size_t)(colon - req), NULL);
    assert_int_equal(p->rc, HTTP_PARSE_PARTIAL);
    p = parse_with(req, (size_t)(colon - req) + 1, NULL);
    assert_int_equal(p->status, 431);

    http_limits_t lim = {.headers_max = 2};
    p = parse_with("GET / HTTP/1.1\r\nHost: h\r\nA: 1\r\n\r\n", 33, &lim);
    assert_int_equal(p->rc, 33);
    p = parse_with("GET / HTTP/1.1\r\nHost: h\r\nA: 1\r\nB: 2\r\n\r\n", 39, &lim);
    assert_int_equal(p->status, 431);
    assert_string_equal(p->err, "more than 2 header fields");
}

static void test_body_limit(void **unused)
{
    http_limits_t lim = {.body_max = 10};
    const char at[] = "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 10\r\n\r\n0123456789";
    parsed_t *p = parse_with(at, strlen(at), &lim);
    assert_int_equal(p->rc, (long)strlen(at));
    assert_int_equal(p->req.body_len, 10);

    /* one over: refused as soon as the head is complete, before any body byte */
    const char over[] = "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 11\r\n\r\n";
    p = parse_with(over, strlen(over), &lim);
    assert_int_equal(p->rc, HTTP_PARSE_ERROR);
    assert_int_equal(p->status, 413);
    assert_string_equal(p->err, "Content-Length 11 exceeds the limit of 10 bytes");

    p = parse("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 65537\r\n\r\n");
    assert_int_equal(p->status, 413); /* the default, 64 KiB */
    p = parse("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 65536\r\n\r\n");
    assert_int_equal(p->rc, HTTP_PARSE_PARTIAL);

    const char chunked_at[] = "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
                              "6\r\n012345\r\n4\r\n6789\r\n0\r\n\r\n";
    p = parse_with(chunked_at, strlen(chunked_at), &lim);
    assert_int_equal(p->rc, (long)strlen(chunked_at));
    assert_span(p->req.body, p->req.body_len, "0123456789");

    /* one over: refused when the size line of the chunk that breaks it is complete */
    const char chunked_over[] = "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
                                "6\r\n012345\r\n5\r\n";
    p = parse_with(chunked_over, strlen(chunked_over), &lim);
    assert_int_equal(p->status, 413);
    assert_string_equal(p->err, "chunked body exceeds the limit of 10 bytes");
    p = parse_with(chunked_over, strlen(chunked_over) - 1, &lim);
    assert_int_equal(p->rc, HTTP_PARSE_PARTIAL);
}

static void test_chunk_framing_limit(void **unused)
{
    static char req[HTTP_CHUNK_FRAMING_MAX + 256];
    int n = snprintf(req, sizeof(req),
                     "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n1;");
    memset(req + n, 'e', sizeof(req) - (size_t)n);
    parsed_t *p = parse_with(req, (size_t)n + 100, NULL);
    assert_int_equal(p->rc, HTTP_PARSE_PARTIAL);
    p = parse_with(req, sizeof(req), NULL); /* an endless chunk extension */
    assert_int_equal(p->rc, HTTP_PARSE_ERROR);
    assert_int_equal(p->status, 413);
    assert_string_equal(p->err, "chunk framing exceeds 16384 bytes");
}

typedef struct bad_case {
    const char *req;
    int status;
    const char *err;
} bad_case_t;

#define HOST "Host: h\r\n"

static const bad_case_t bad_cases[] = {
    /* request line */
    {"GET / HTTX/1.1\r\n" HOST "\r\n", 400,
     "malformed request line: expected HTTP/<d>.<d>, got 'H' (line 1, column 7)"},
    {"GET  / HTTP/1.1\r\n" HOST "\r\n", 400,
     "malformed request line: expected target and a space, got 0x20 (line 1, column 5)"},
    {"GET / HTTP/1.1 \r\n" HOST "\r\n", 400, "invalid HTTP version (line 1, column 15)"},
    {"GET /\x80 HTTP/1.1\r\n" HOST "\r\n", 400,
     "malformed request line: expected target and a space, got 0x80 (line 1, column 6)"},
    {"GET /a b HTTP/1.1\r\n" HOST "\r\n", 400, "malformed request line (line 1, column 8)"},
    {"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", 400,
     "invalid request method, got 0x16 (line 1, column 1)"},
    {"get / HTTP/1.1\r\n" HOST "\r\n", 501, "method get is not supported"},
    {"FROBNICATE / HTTP/1.1\r\n" HOST "\r\n", 501, "method FROBNICATE is not supported"},
    {"GET\t/ HTTP/1.1\r\n" HOST "\r\n", 400, "invalid request method, got 0x09 (line 1, column 4)"},
    {"ABCDEFGHIJKLMNOPQRSTUVWXYZABCDEFGHIJ / HTTP/1.1\r\n", 400,
     "request method longer than 32 bytes"},
    {"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 505, "HTTP/2 is not supported, use HTTP/1.1"},
    {"GET / HTTP/2.0\r\n" HOST "\r\n", 505, "HTTP/2.0 is not supported, use HTTP/1.1"},
    {"GET /\r\n\r\n", 400, /* HTTP/0.9 */
     "malformed request line: expected target and a space, got 0x0d (line 1, column 6)"},
    {"CONNECT example.com:443 HTTP/1.1\r\n" HOST "\r\n", 501, "method CONNECT is not supported"},
    /* headers */
    {"GET / HTTP/1.1\r\n\r\n", 400, "HTTP/1.1 request without a Host header"},
    {"GET / HTTP/1.1\r\n" HOST "host: i\r\n\r\n", 400, "more than one Host header"},
    {"GET / HTTP/1.1\r\n" HOST "X : a\r\n\r\n", 400,
     "malformed header: expected a name and ':', got 0x20 (line 3, column 2)"},
    {"GET / HTTP/1.1\r\n" HOST "X: a\r\n continued\r\n\r\n", 400,
     "obsolete line folding is not accepted, got 0x20 (line 4, column 1)"},
    {"GET / HTTP/1.1\r\n" HOST "X: a\x01\r\n\r\n", 400,
     "invalid character in a header field (line 3, column 5)"},
    {"GET / HTTP/1.1\r\n" HOST "X: a\rb\r\n\r\n", 400, "CR not followed by LF (line 3, column 6)"},
    {"GET / HTTP/1.1\r\n" HOST "\r\rX", 400, /* http-parser takes the second CR as LF */
     "malformed header: expected a name and ':', got 0x0d (line 3, column 1)"},
    {"GET / HTTP/1.1\r\n" HOST "Caf\xc3\xa9: 1\r\n\r\n", 400,
     "invalid character in a header field (line 3, column 4)"},
    /* body framing */
    {"POST / HTTP/1.1\r\n" HOST "Content-Length: 1\r\nContent-Length: 1\r\n\r\nx", 400,
     "Content-Length repeated or sent with Transfer-Encoding (line 4, column 17)"},
    {"POST / HTTP/1.1\r\n" HOST "Transfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\nabc", 400,
     "Content-Length repeated or sent with Transfer-Encoding (line 5, column 2)"},
    {"POST / HTTP/1.1\r\n" HOST "Transfer-Encoding: gzip\r\n\r\n", 400,
     "Transfer-Encoding does not end in chunked (line 4, column 2)"},
    {"POST / HTTP/1.1\r\n" HOST "Content-Length: 1x\r\n\r\n", 400,
     "invalid Content-Length (line 3, column 18)"},
    {"POST / HTTP/1.1\r\n" HOST "Content-Length: -1\r\n\r\n", 400,
     "invalid Content-Length (line 3, column 17)"},
};

static void test_malformed(void **unused)
{
    for (size_t i = 0; i < sizeof(bad_cases) / sizeof(bad_cases[0]); i++) {
        const bad_case_t *c = &bad_cases[i];
        parsed_t *p = parse(c->req);
        if (p->rc != HTTP_PARSE_ERROR || p->status != c->status || strcmp(p->err, c->err) != 0)
            fail_msg("case %zu: rc %ld status %d \"%s\", want %d \"%s\"", i, p->rc, p->status,
                     p->err, c->status, c->err);
        /* no prefix gives another answer: partial, or the same error */
        size_t len = strlen(c->req);
        for (size_t n = 0; n < len; n++) {
            parsed_t *q = parse_with(c->req, n, NULL);
            if (q->rc != HTTP_PARSE_PARTIAL && q->status != c->status)
                fail_msg("case %zu prefix %zu: rc %ld status %d", i, n, q->rc, q->status);
        }
    }
    /* an unknown method's token is read to its end before it is judged */
    assert_int_equal(parse("FROBNICATE")->rc, HTTP_PARSE_PARTIAL);
}

static void test_versions_and_keep_alive(void **unused)
{
    static const struct {
        const char *req;
        bool keep_alive;
    } cases[] = {
        {"GET / HTTP/1.1\r\nHost: h\r\n\r\n", true},
        {"GET / HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n", false},
        {"GET / HTTP/1.1\r\nHost: h\r\nConnection: Close\r\n\r\n", false},
        {"GET / HTTP/1.0\r\n\r\n", false}, /* HTTP/1.0 needs no Host */
        {"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", true},
        {"GET / HTTP/1.2\r\nHost: h\r\n\r\n", true}, /* a later 1.x is served as 1.1 */
        /* RFC 9112 §6.1: HTTP/1.0 with Transfer-Encoding is served, then the connection closed */
        {"POST / HTTP/1.0\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n"
         "0\r\n\r\n",
         false},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        parsed_t *p = parse(cases[i].req);
        if (p->rc != (long)strlen(cases[i].req))
            fail_msg("case %zu: rc %ld (%s)", i, p->rc, p->err);
        assert_int_equal(p->req.keep_alive, cases[i].keep_alive);
    }
}

/* Expect: 100-continue: partial with status 100 while the body is missing, then parsed as any
 * other request. */
static void test_expect_continue(void **unused)
{
    const char head[] = "POST /v1/allow HTTP/1.1\r\nHost: h\r\nExpect: 100-Continue\r\n"
                        "Content-Length: 2\r\n\r\n";
    char req[256];
    snprintf(req, sizeof(req), "%s{}", head);
    parsed_t *p = parse_with(head, strlen(head) - 1, NULL); /* head incomplete */
    assert_int_equal(p->rc, HTTP_PARSE_PARTIAL);
    assert_int_equal(p->status, 0);
    p = parse(head);
    assert_int_equal(p->rc, HTTP_PARSE_PARTIAL);
    assert_int_equal(p->status, 100);
    snprintf(req, sizeof(req), "%s{", head);
    p = parse(req);
    assert_int_equal(p->status, 100);
    /* a body over the limit is refused before the client sends it */
    const char big[] = "POST / HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\n"
                       "Content-Length: 1000000\r\n\r\n";
    assert_int_equal(parse(big)->status, 413);
    /* no Expect, or HTTP/1.0 (which has no 100 responses): plain partial */
    assert_int_equal(parse("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\n\r\n")->status, 0);
    assert_int_equal(parse("POST / HTTP/1.0\r\nExpect: 100-continue\r\nContent-Length: 2\r\n"
                           "\r\n")
                         ->status,
                     0);
    buf_t b = {0};
    http_continue(&b);
    assert_buf(&b, "HTTP/1.1 100 Continue\r\n\r\n");
    buf_free(&b);

    snprintf(req, sizeof(req), "%s{}", head);
    p = parse(req);
    assert_int_equal(p->rc, (long)strlen(req));
    assert_span(p->req.body, p->req.body_len, "{}");
    assert_header(&p->req, "expect", "100-Continue");
}

/* Upgrade (h2c, websocket) is ignored: answered as HTTP/1.1, and the next request follows. */
static void test_upgrade_ignored(void **unused)
{
    const char req[] = "GET / HTTP/1.1\r\nHost: h\r\nConnection: Upgrade, HTTP2-Settings\r\n"
                       "Upgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQCAAAAAAIAAAAA\r\n\r\n";
    char two[512];
    snprintf(two, sizeof(two), "%sGET /b HTTP/1.1\r\nHost: h\r\n\r\n", req);
    parsed_t *p = parse(two);
    assert_int_equal(p->rc, (long)strlen(req));
    assert_true(p->req.keep_alive);
    p = parse(two + strlen(req));
    assert_span(p->req.path, p->req.path_len, "/b");
}

/* ---- request helpers ------------------------------------------------------------------------ */

static void test_header_get(void **unused)
{
    parsed_t *p = parse("GET / HTTP/1.1\r\nHost: h\r\nX-Key: first\r\nx-key: second\r\n"
                        "Empty:\r\n\r\n");
    assert_true(p->rc > 0);
    assert_header(&p->req, "X-KEY", "first");
    assert_header(&p->req, "x-key", "first");
    assert_header(&p->req, "empty", "");
    const char *v = NULL;
    size_t vlen = 99;
    assert_false(http_header_get(&p->req, "X-Ke", &v, &vlen));
    assert_false(http_header_get(&p->req, "X-Keys", &v, &vlen));
    assert_null(v);
}

static http_request_t with_query(const char *q)
{
    http_request_t r = {.query = q, .query_len = strlen(q)};
    return r;
}

static void test_query_get(void **unused)
{
    http_request_t r = with_query("key=tenant%3Aacme+x&cost=2&flag&e=&k%65y2=v&bad=%G1&nul=a%00"
                                  "&cut=%4&plus=a%2Bb&dup=1&dup=2");
    char out[64];
    size_t len;
    assert_true(http_query_get(&r, "key", out, sizeof(out), &len));
    assert_string_equal(out, "tenant:acme x");
    assert_int_equal(len, 13);
    assert_true(http_query_get(&r, "cost", out, sizeof(out), &len));
    assert_string_equal(out, "2");
    assert_true(http_query_get(&r, "flag", out, sizeof(out), &len)); /* no '=' */
    assert_int_equal(len, 0);
    assert_true(http_query_get(&r, "e", out, sizeof(out), &len));
    assert_int_equal(len, 0);
    assert_true(http_query_get(&r, "key2", out, sizeof(out), &len)); /* encoded name */
    assert_string_equal(out, "v");
    assert_true(http_query_get(&r, "plus", out, sizeof(out), &len));
    assert_string_equal(out, "a+b");
    assert_true(http_query_get(&r, "dup", out, sizeof(out), &len));
    assert_string_equal(out, "1");
    assert_false(http_query_get(&r, "bad", out, sizeof(out), &len));
    assert_false(http_query_get(&r, "nul", out, sizeof(out), &len));
    assert_false(http_query_get(&r, "cut", out, sizeof(out), &len));
    assert_false(http_query_get(&r, "absent", out, sizeof(out), &len));
    assert_false(http_query_get(&r, "ke", out, sizeof(out), &len));
    /* capacity: the value and its NUL */
    assert_true(http_query_get(&r, "cost", out, 2, &len));
    assert_false(http_query_get(&r, "key", out, 13, &len));
    assert_true(http_query_get(&r, "key", out, 14, &len));

    http_request_t empty = with_query("");
    assert_false(http_query_get(&empty, "key", out, sizeof(out), &len));
    http_request_t trailing = with_query("a=1&");
    assert_true(http_query_get(&trailing, "a", out, sizeof(out), &len));
    assert_string_equal(out, "1");
    assert_false(http_query_get(&trailing, "", out, sizeof(out), &len));
}

static void test_path_segments(void **unused)
{
    const char *path = "/v1/rules/api%2Fv2/overrides/tenant%3Aacme+1";
    char storage[64];
    http_segment_t segs[8];
    long n = http_path_segments(path, strlen(path), storage, sizeof(storage), segs, 8);
    assert_int_equal(n, 5);
    const char *want[] = {"v1", "rules", "api/v2", "overrides", "tenant:acme+1"};
    for (long i = 0; i < n; i++) {
        assert_string_equal(segs[i].ptr, want[i]);
        assert_int_equal(segs[i].len, strlen(want[i]));
    }
    /* storage of path_len + 1 is always enough */
    assert_int_equal(http_path_segments(path, strlen(path), storage, strlen(path) + 1, segs, 8), 5);

    n = http_path_segments("/", 1, storage, sizeof(storage), segs, 8);
    assert_int_equal(n, 1);
    assert_int_equal(segs[0].len, 0);
    n = http_path_segments("/a//b/", 6, storage, sizeof(storage), segs, 8);
    assert_int_equal(n, 4);
    assert_string_equal(segs[1].ptr, "");
    assert_string_equal(segs[2].ptr, "b");
    assert_string_equal(segs[3].ptr, "");

    assert_int_equal(http_path_segments("a/b", 3, storage, sizeof(storage), segs, 8), -1);
    assert_int_equal(http_path_segments("", 0, storage, sizeof(storage), segs, 8), -1);
    assert_int_equal(http_path_segments("/a%2", 4, storage, sizeof(storage), segs, 8), -1);
    assert_int_equal(http_path_segments("/a%zz", 5, storage, sizeof(storage), segs, 8), -1);
    assert_int_equal(http_path_segments("/a%00", 5, storage, sizeof(storage), segs, 8), -1);
    assert_int_equal(http_path_segments("/a/b/c", 6, storage, sizeof(storage), segs, 2), -1);
    assert_int_equal(http_path_segments("/abc", 4, storage, 3, segs, 8), -1);
    char out[8];
    assert_int_equal(http_pct_decode("a%41+", 5, out, sizeof(out)), 3);
    assert_string_equal(out, "aA+");
}

static netaddr_net_t cidr(const char *s)
{
    netaddr_net_t c;
    if (netaddr_net_parse(s, strlen(s), &c) != NETADDR_OK)
        fail_msg("cidr %s does not parse", s);
    return c;
}

/* The client behind trusted proxies as text, for a peer given as text (NULL when the peer is
 * not an address: the server then has no parsed peer to start from). */
static const char *client_text(const http_request_t *r, const char *peer,
                               const netaddr_net_t *trusted, size_t n, char *out, size_t cap)
{
    netaddr_t p, client;
    if (netaddr_parse(peer, strlen(peer), &p) != NETADDR_OK ||
        http_client_addr(r, &p, trusted, n, &client) != 0)
        return NULL;
    return netaddr_format(&client, out, cap);
}

/* The client address of a request with the given X-Forwarded-For headers ("" for none). */
static const char *client_of(const char *peer, const char *xff1, const char *xff2)
{
    static char out[NETADDR_STRLEN];
    char req[1024];
    int n = snprintf(req, sizeof(req), "GET / HTTP/1.1\r\nHost: h\r\n");
    if (*xff1)
        n += snprintf(req + n, sizeof(req) - (size_t)n, "X-Forwarded-For: %s\r\n", xff1);
    n += snprintf(req + n, sizeof(req) - (size_t)n, "X-Other: 9.9.9.9\r\n");
    if (*xff2)
        n += snprintf(req + n, sizeof(req) - (size_t)n, "x-forwarded-for: %s\r\n", xff2);
    snprintf(req + n, sizeof(req) - (size_t)n, "\r\n");
    parsed_t *p = parse(req);
    assert_true(p->rc > 0);
    netaddr_net_t trusted[] = {cidr("10.0.0.0/8"), cidr("127.0.0.1"), cidr("fd00::/8")};
    return client_text(&p->req, peer, trusted, 3, out, sizeof(out));
}

static void test_client_ip(void **unused)
{
    /* an untrusted peer is the client, whatever it claims */
    assert_string_equal(client_of("203.0.113.5", "1.1.1.1", ""), "203.0.113.5");
    /* a trusted peer without X-Forwarded-For is the client */
    assert_string_equal(client_of("10.0.0.1", "", ""), "10.0.0.1");
    /* one proxy */
    assert_string_equal(client_of("10.0.0.1", "198.51.100.7", ""), "198.51.100.7");
    /* spoofed leftmost entries are never believed: walking from the right */
    assert_string_equal(client_of("10.0.0.1", "6.6.6.6, 198.51.100.7", ""), "198.51.100.7");
    assert_string_equal(client_of("10.0.0.1", "6.6.6.6, 198.51.100.7, 10.2.2.2", ""),
                        "198.51.100.7");
    /* a chain of trusted hops, and two header lines read as one list */
    assert_string_equal(client_of("127.0.0.1", "6.6.6.6,198.51.100.7", "10.1.1.1 , 10.2.2.2"),
                        "198.51.100.7");
    /* every entry trusted: the leftmost */
    assert_string_equal(client_of("10.0.0.1", "10.9.9.9, 10.8.8.8", ""), "10.9.9.9");
    /* an entry that is not an address stops the walk at the last trusted hop */
    assert_string_equal(client_of("10.0.0.1", "198.51.100.7, unknown, 10.3.3.3", ""), "10.3.3.3");
    assert_string_equal(client_of("10.0.0.1", "198.51.100.7, unknown", ""), "10.0.0.1");
    /* empty entries are skipped; ports and brackets are accepted */
    assert_string_equal(client_of("10.0.0.1", "198.51.100.7:5555, ,", ""), "198.51.100.7");
    assert_string_equal(client_of("10.0.0.1", "[2001:db8::1]:443", ""), "2001:db8::1");
    assert_string_equal(client_of("10.0.0.1", "[2001:db8::2]", ""), "2001:db8::2");
    assert_string_equal(client_of("10.0.0.1", "2001:db8::3", ""), "2001:db8::3");
    assert_string_equal(client_of("10.0.0.1", "198.51.100.7:99999", ""), "10.0.0.1");
    assert_string_equal(client_of("10.0.0.1", "[1.2.3.4]", ""), "10.0.0.1");
    /* IPv4-mapped peers and entries count as IPv4 */
    assert_string_equal(client_of("::ffff:10.0.0.1", "198.51.100.7", ""), "198.51.100.7");
    assert_string_equal(client_of("::ffff:203.0.113.9", "198.51.100.7", ""), "203.0.113.9");
    assert_string_equal(client_of("10.0.0.1", "::ffff:10.4.4.4", ""), "10.4.4.4");
    assert_string_equal(client_of("fd00::5", "2001:db8::9, fd12::1", ""), "2001:db8::9");
    /* a peer that is not an address */
    assert_null(client_of("not-an-ip", "", ""));

    http_request_t none = {0};
    char out[NETADDR_STRLEN];
    assert_string_equal(client_text(&none, "10.0.0.1", NULL, 0, out, sizeof(out)), "10.0.0.1");
}

/* ---- responses ---------------------------------------------------------------------------- */

static void assert_buf(const buf_t *b, const char *want)
{
    assert_false(b->failed);
    if (b->len != strlen(want) || memcmp(b->data, want, b->len) != 0)
        fail_msg("got\n%.*s\nwant\n%s", (int)b->len, b->data, want);
}

static void test_response_bytes(void **unused)
{
    buf_t b = {0};
    http_begin(&b, 200);
    http_header(&b, "X-Sluice", "%d-%s", 7, "ok");
    http_end(&b, true, "application/json", "{\"a\":1}", 7);
    assert_buf(&b, "HTTP/1.1 200 OK\r\nX-Sluice: 7-ok\r\n"
                   "Content-Type: application/json\r\nContent-Length: 7\r\n\r\n{\"a\":1}");
    buf_free(&b);

    http_begin(&b, 404);
    http_end(&b, false, NULL, NULL, 0);
    assert_buf(&b, "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
    buf_free(&b);

    /* 204: no Content-Length (RFC 9110 §8.6), even after another response in the buffer */
    http_begin(&b, 200);
    http_end(&b, true, "text/plain", "HTTP/1.1 200 x\r\n", 16);
    size_t first = b.len;
    http_begin(&b, 204);
    http_header(&b, "Retry-After", "%d", 0);
    http_end(&b, true, NULL, NULL, 0);
    assert_int_equal(b.len - first, strlen("HTTP/1.1 204 No Content\r\nRetry-After: 0\r\n\r\n"));
    assert_memory_equal(b.data + first, "HTTP/1.1 204 No Content\r\nRetry-After: 0\r\n\r\n",
                        b.len - first);
    buf_free(&b);

    /* a value cannot inject a header or end the head */
    http_begin(&b, 429);
    http_header(&b, "X-Echo", "%s", "a\r\nSet-Cookie: x\r\n\r\n\tb\x7f");
    http_end(&b, true, NULL, "", 0);
    assert_buf(&b, "HTTP/1.1 429 Too Many Requests\r\nX-Echo: a  Set-Cookie: x    \tb \r\n"
                   "Content-Length: 0\r\n\r\n");
    buf_free(&b);

    static const struct {
        int status;
        const char *reason;
    } reasons[] = {{200, "OK"},
                   {204, "No Content"},
                   {400, "Bad Request"},
                   {401, "Unauthorized"},
                   {403, "Forbidden"},
                   {404, "Not Found"},
                   {405, "Method Not Allowed"},
                   {409, "Conflict"},
                   {413, "Payload Too Large"},
                   {429, "Too Many Requests"},
                   {431, "Request Header Fields Too Large"},
                   {500, "Internal Server Error"},
                   {501, "Not Implemented"},
                   {503, "Service Unavailable"},
                   {505, "HTTP Version Not Supported"},
                   {299, "Unknown"}};
    for (size_t i = 0; i < sizeof(reasons) / sizeof(reasons[0]); i++)
        assert_string_equal(http_reason(reasons[i].status), reasons[i].reason);
}

static void test_ratelimit_headers(void **unused)
{
    buf_t b = {0};
    http_ratelimit_headers(&b, "api", 100, 1, 42, 1);
    assert_buf(&b, "RateLimit-Policy: \"api\";q=100;w=1\r\nRateLimit: \"api\";r=42;t=1\r\n");
    buf_free(&b);

    /* sf-string escaping; non-printable bytes replaced; integers clamped to sf-integer */
    http_ratelimit_headers(&b, "a\"b\\c\r\n\xc3\xa9", 1000000000000000000LL, 86400, -5, -1);
    assert_buf(&b, "RateLimit-Policy: \"a\\\"b\\\\c????\";q=999999999999999;w=86400\r\n"
                   "RateLimit: \"a\\\"b\\\\c????\";r=0;t=0\r\n");
    buf_free(&b);
}

/* http_header_int writes any int64_t in decimal as printf's %lld would, over random values and
 * the edges (seeded). */
static void test_header_int(void **unused)
{
    (void)unused;
    const int64_t edges[] = {0, 1, -1, 9, 10, -10, 999999999999999LL, INT64_MAX, INT64_MIN};
    uint64_t x = 0x9e3779b97f4a7c15ULL; /* a fixed seed: the values are the same every run */
    for (size_t i = 0; i < 2000; i++) {
        int64_t v;
        if (i < sizeof edges / sizeof edges[0]) {
            v = edges[i];
        } else {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            v = (int64_t)(x >> (x % 64)) * ((x & 1) ? -1 : 1);
        }
        char want[64];
        snprintf(want, sizeof want, "Content-Length: %lld\r\n", (long long)v);
        buf_t b = {0};
        http_header_int(&b, "Content-Length", v);
        assert_buf(&b, want);
        buf_free(&b);
    }
}

/* A HEAD answer is the GET answer's head: the body goes, Content-Length and earlier responses
 * in the buffer stay. */
static void test_head_only(void **unused)
{
    (void)unused;
    buf_t b = {0};
    http_head_only(&b, 0); /* nothing yet */
    assert_int_equal(b.len, 0);
    http_begin(&b, 200);
    http_end(&b, true, "text/plain", "first\r\n\r\nbody", 13);
    size_t first = b.len;
    http_begin(&b, 200);
    http_end(&b, true, "text/plain", "ok\n", 3);
    http_head_only(&b, first);
    assert_int_equal(
        b.len - first,
        strlen("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 3\r\n\r\n"));
    assert_memory_equal(b.data + first - 4, "body", 4); /* the first response is whole */
    http_head_only(&b, b.len);                          /* from the end: nothing to cut */
    assert_memory_equal(b.data + b.len - 4, "\r\n\r\n", 4);
    buf_free(&b);
}

static void test_problem(void **unused)
{
    buf_t b = {0};
    http_problem(&b, 429, true, NULL, "rule \"api\": key u42\n over limit");
    const char body[] = "{\"type\":\"about:blank\",\"title\":\"Too Many Requests\",\"status\":429,"
                        "\"detail\":\"rule \\\"api\\\": key u42\\n over limit\"}";
    char want[512];
    snprintf(want, sizeof(want),
             "HTTP/1.1 429 Too Many Requests\r\nContent-Type: application/problem+json\r\n"
             "Content-Length: %zu\r\n\r\n%s",
             strlen(body), body);
    assert_buf(&b, want);
    buf_free(&b);

    /* extra headers between begin and the problem body; no detail; connection close */
    http_begin(&b, 413);
    http_header(&b, "Retry-After", "%d", 3);
    http_problem_end(&b, 413, false, "Too big", NULL);
    const char body2[] = "{\"type\":\"about:blank\",\"title\":\"Too big\",\"status\":413}";
    snprintf(want, sizeof(want),
             "HTTP/1.1 413 Payload Too Large\r\nRetry-After: 3\r\n"
             "Content-Type: application/problem+json\r\nContent-Length: %zu\r\n"
             "Connection: close\r\n\r\n%s",
             strlen(body2), body2);
    assert_buf(&b, want);
    buf_free(&b);
}

static void test_json_escape(void **unused)
{
    static const struct {
        const char *in;
        size_t len;
        const char *out;
    } cases[] = {
        {"plain", 5, "plain"},
        {"q\"b\\s/", 6, "q\\\"b\\\\s/"},
        {"\b\f\n\r\t", 5, "\\b\\f\\n\\r\\t"},
        {"\x01\x1f\x7f", 3, "\\u0001\\u001f\\u007f"},
        {"a\0b", 3, "a\\u0000b"},
        {"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", 14,
         "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"},
        {"\xff", 1, "\\ufffd"},                                  /* never valid */
        {"\xc3", 1, "\\ufffd"},                                  /* truncated */
        {"\xc0\xaf", 2, "\\ufffd\\ufffd"},                       /* overlong '/' */
        {"\xed\xa0\x80", 3, "\\ufffd\\ufffd\\ufffd"},            /* a surrogate */
        {"\xf4\x90\x80\x80", 4, "\\ufffd\\ufffd\\ufffd\\ufffd"}, /* above U+10FFFF */
        {"\xe2\x82x", 3, "\\ufffd\\ufffdx"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char out[128];
        size_t n = http_json_escape(out, sizeof(out), cases[i].in, cases[i].len);
        if (n != strlen(cases[i].out) || strcmp(out, cases[i].out) != 0)
            fail_msg("case %zu: got \"%s\" (%zu)", i, out, n);
    }
    /* like snprintf: the full length is returned, the output is cut and terminated */
    char small[5];
    assert_int_equal(http_json_escape(small, sizeof(small), "ab\"cd", 5), 6);
    assert_string_equal(small, "ab\\\"");
    assert_int_equal(http_json_escape(NULL, 0, "\n", 1), 2);

    buf_t b = {0};
    buf_add(&b, "[", 1);
    http_json_append(&b, "x\"y", 3);
    buf_add(&b, ",", 1);
    http_json_append(&b, "", 0);
    buf_add(&b, "]", 1);
    assert_buf(&b, "[\"x\\\"y\",\"\"]");
    buf_free(&b);
}

static void test_date(void **unused)
{
    char out[HTTP_DATE_LEN];
    assert_string_equal(http_date(784111777, out), "Sun, 06 Nov 1994 08:49:37 GMT");
    assert_string_equal(http_date(0, out), "Thu, 01 Jan 1970 00:00:00 GMT");
    assert_string_equal(http_date(1709251199, out), "Thu, 29 Feb 2024 23:59:59 GMT");
    assert_string_equal(http_date(-1, out), "Thu, 01 Jan 1970 00:00:00 GMT");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_simple_get),
        cmocka_unit_test(test_target_forms),
        cmocka_unit_test(test_post_body),
        cmocka_unit_test(test_pipelined),
        cmocka_unit_test(test_every_split_point),
        cmocka_unit_test(test_chunked),
        cmocka_unit_test(test_byte_by_byte_work),
        cmocka_unit_test(test_fast_path_one_pass),
        cmocka_unit_test(test_chunked_transfer_encoding_trailer),
        cmocka_unit_test(test_chunked_malformed),
        cmocka_unit_test(test_head_limit),
        cmocka_unit_test(test_header_count_limit),
        cmocka_unit_test(test_body_limit),
        cmocka_unit_test(test_chunk_framing_limit),
        cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_versions_and_keep_alive),
        cmocka_unit_test(test_expect_continue),
        cmocka_unit_test(test_upgrade_ignored),
        cmocka_unit_test(test_header_get),
        cmocka_unit_test(test_query_get),
        cmocka_unit_test(test_path_segments),
        cmocka_unit_test(test_client_ip),
        cmocka_unit_test(test_response_bytes),
        cmocka_unit_test(test_ratelimit_headers),
        cmocka_unit_test(test_header_int),
        cmocka_unit_test(test_head_only),
        cmocka_unit_test(test_problem),
        cmocka_unit_test(test_json_escape),
        cmocka_unit_test(test_date),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
