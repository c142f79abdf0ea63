/*
 * http_parse.c - the HTTP/1.1 request parser (see http.h for the contract).
 *
 * A parse is two or three passes over the caller's bytes, all bounded by the limits:
 *
 *   1. http_parser_execute() with callbacks that count header fields and body bytes. It is fed
 *      each byte once, as it arrives: its state and ours (http_reader_t) carry over from one
 *      call to the next. It is paused at the end of the head (to learn the head's exact length
 *      and check it before any body is looked at) and at the end of the message (so one call
 *      parses one pipelined request).
 *   2. Once the head is complete, a strict scan of its syntax (RFC 9112 §2-5), which also
 *      records the target and the header fields. Debian builds http-parser with
 *      HTTP_PARSER_STRICT 0, which accepts "HTTX/1.1", "X : v" (a space in a field name), a
 *      bare CR ending the head, and two arbitrary bytes after chunk data. The scan runs again
 *      when the request completes in a later call than its head (the buffer may have moved).
 *   3. For a chunked body, once the message is complete, a strict chunked decoder over the body
 *      bytes: it first checks the framing, then moves the chunk data together in place.
 *
 * So each byte is examined a bounded number of times however the request is split into reads;
 * http_reader_t.work counts the bytes every pass examines, for tests and benchmarks.
 *
 * A fast path comes first: when the request's first call already holds a complete head of the
 * plainest kind (GET or HEAD, an origin-form target of ordinary characters, HTTP/1.0 or 1.1,
 * CRLF line ends, printable ASCII values, no header that frames a body or changes the
 * connection beyond close/keep-alive), one pass reads it into the request, and the request ends
 * with its head: what the three passes would have produced, field for field. Anything else,
 * including a head not complete yet, goes the general way above, which alone reports errors. A
 * nginx-fronted /v1/auth request is of this kind; the fuzz target compares the two ways (a
 * request arriving whole takes the fast one, in pieces the general one) byte for byte. This
 * file is long because both ways fill the same request and must agree field for field: they
 * share the helpers that record fields and classify bytes.
 *
 * Why a result never depends on how the bytes were split: every error is decided by a byte at
 * a known position q (the byte the parser rejected, the ':' ending the field name that is one
 * too many, the end of the head, the line ending a chunk size). A buffer that ends before q is
 * partial, unless the bytes it holds already break a size limit -- and then the whole message
 * breaks the same limit at q, which is checked first: head bytes >= head_max before the head
 * is complete, or chunk framing bytes > HTTP_CHUNK_FRAMING_MAX in the body. http-parser is a
 * byte-at-a-time state machine, so feeding it in pieces decides every byte as feeding it whole.
 */
#include "proto/http.h"

#include "proto/codec.h"
#include "proto/text.h"

#include <assert.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- parsing: pass 1, http-parser callbacks ---------------------------------------------- */

enum last_cb { CB_NONE, CB_FIELD, CB_VALUE };

/* One call: the reader, the caller's buffer and limits, and where an error goes. */
typedef struct parse_ctx {
    http_reader_t *rd;
    http_request_t *req;
    const char *buf;      /* the request's first byte: positions are counted from here */
    const char *exec_end; /* end of the bytes given to http_parser_execute() */
    size_t head_max, headers_max, body_max;
    int status;     /* an error found by a callback (0: none) */
    size_t err_pos; /* position of the byte that decided that error */
    char *err;      /* the caller's message buffer */
} parse_ctx_t;

static void vmsg(char *err, const char *fmt, va_list ap)
{
    vsnprintf(err, HTTP_ERR_MAX, fmt, ap);
}

static void msg(char *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void msg(char *err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vmsg(err, fmt, ap);
    va_end(ap);
}

/* Records a callback's error; returns non-zero, which makes http-parser stop. */
static int cb_fail(parse_ctx_t *c, int status, size_t pos, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int cb_fail(parse_ctx_t *c, int status, size_t pos, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vmsg(c->err, fmt, ap);
    va_end(ap);
    c->status = status;
    c->err_pos = pos;
    return -1;
}

static int on_header_field(http_parser *p, const char *at, size_t n)
{
    parse_ctx_t *c = p->data;
    http_reader_t *rd = c->rd;
    if (rd->head_done) /* a trailer field: dropped */
        return 0;
    if (rd->last != CB_FIELD) /* else the next piece of the same name */
        rd->nfields++;
    rd->last = CB_FIELD;
    if (rd->nfields <= c->headers_max)
        return 0;
    /* A name that runs to the end of the bytes may not be complete: decide at its ':'. */
    if (at + n == c->exec_end)
        return 0;
    return cb_fail(c, 431, (size_t)(at + n - c->buf), "more than %zu header fields",
                   c->headers_max);
}

static int on_header_value(http_parser *p, const char *at, size_t n)
{
    (void)at;
    (void)n;
    parse_ctx_t *c = p->data;
    if (!c->rd->head_done)
        c->rd->last = CB_VALUE;
    return 0;
}

static int on_headers_complete(http_parser *p)
{
    parse_ctx_t *c = p->data;
    c->rd->head_done = true;
    http_parser_pause(p, 1); /* http_parse_more() checks the head before the body is parsed */
    return 0;
}

static int on_chunk_header(http_parser *p)
{
    parse_ctx_t *c = p->data;
    /* The chunk's size line is complete; content_length is its size. */
    if (p->content_length > c->body_max - c->rd->body_total)
        return cb_fail(c, 413, 0, "chunked body exceeds the limit of %zu bytes", c->body_max);
    return 0;
}

static int on_body(http_parser *p, const char *at, size_t n)
{
    (void)at;
    parse_ctx_t *c = p->data;
    c->rd->body_total += n;
    return 0;
}

static int on_message_complete(http_parser *p)
{
    parse_ctx_t *c = p->data;
    c->rd->message_done = true;
    c->rd->keep_alive = http_should_keep_alive(p) != 0;
    http_parser_pause(p, 1); /* one request per call */
    return 0;
}

static const http_parser_settings parse_settings = {
    .on_header_field = on_header_field,
    .on_header_value = on_header_value,
    .on_headers_complete = on_headers_complete,
    .on_body = on_body,
    .on_message_complete = on_message_complete,
    .on_chunk_header = on_chunk_header,
};

/* ---- error messages ---------------------------------------------------------------------- */

/* A printable rendering of one byte: 'x', 0x01 (the space too), or EOF. */
static const char *byte_name(int c, char out[TEXT_BYTE_CAP])
{
    return text_byte(c, TEXT_BYTE_0X | TEXT_BYTE_SPACE, out);
}

/* Writes "<what> (line L, column C)" for byte pos of buf. */
static void msg_at(char *err, const char *buf, size_t pos, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void msg_at(char *err, const char *buf, size_t pos, const char *fmt, ...)
{
    size_t line = 1, start = 0;
    for (size_t i = 0; i < pos; i++) {
        if (buf[i] == '\n') {
            line++;
            start = i + 1;
        }
    }
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(err, HTTP_ERR_MAX, fmt, ap);
    va_end(ap);
    if (n >= 0 && n < HTTP_ERR_MAX)
        snprintf(err + n, HTTP_ERR_MAX - (size_t)n, " (line %zu, column %zu)", line,
                 pos - start + 1);
}

static const char *describe(enum http_errno e)
{
    switch (e) {
    case HPE_INVALID_VERSION:
        return "invalid HTTP version";
    case HPE_INVALID_CONSTANT:
        return "malformed request line";
    case HPE_INVALID_URL:
    case HPE_INVALID_PATH:
    case HPE_INVALID_QUERY_STRING:
    case HPE_INVALID_FRAGMENT:
    case HPE_INVALID_HOST:
    case HPE_INVALID_PORT:
        return "invalid character in the request target";
    case HPE_LF_EXPECTED:
        return "CR not followed by LF";
    case HPE_INVALID_HEADER_TOKEN:
        return "invalid character in a header field";
    case HPE_INVALID_CONTENT_LENGTH:
        return "invalid Content-Length";
    case HPE_UNEXPECTED_CONTENT_LENGTH:
        return "Content-Length repeated or sent with Transfer-Encoding";
    case HPE_INVALID_CHUNK_SIZE:
        return "invalid chunk size";
    case HPE_INVALID_TRANSFER_ENCODING:
        return "Transfer-Encoding does not end in chunked";
    default:
        return http_errno_description(e);
    }
}

/* ---- parsing: pass 2, the head -------------------------------------------------------------- */

/* RFC 9110 §5.6.2 tchar: ALPHA, DIGIT and "!#$%&'*+-.^_`|~". A table, since every byte of
 * every method and field name is looked up in it. */
static const bool tchar_table[256] = {
    ['!'] = 1, ['#'] = 1, ['$'] = 1, ['%'] = 1, ['&'] = 1, ['\''] = 1, ['*'] = 1, ['+'] = 1,
    ['-'] = 1, ['.'] = 1, ['^'] = 1, ['_'] = 1, ['`'] = 1, ['|'] = 1,  ['~'] = 1,
};

static bool is_tchar(int c)
{
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
        return true;
    return c > 0 && c < 256 && tchar_table[c];
}

/* The byte at i of buf[0..end), or -1 past the end. */
static int byte_at(const char *buf, size_t end, size_t i)
{
    return i < end ? (unsigned char)buf[i] : -1;
}

/* Steps over a line ending at *i (CRLF, or a bare LF as RFC 9112 §2.2 allows). */
static bool eol(const char *buf, size_t end, size_t *i)
{
    if (byte_at(buf, end, *i) == '\n') {
        *i += 1;
        return true;
    }
    if (byte_at(buf, end, *i) == '\r' && byte_at(buf, end, *i + 1) == '\n') {
        *i += 2;
        return true;
    }
    return false;
}

static bool head_bad(char *err, const char *buf, size_t end, size_t i, const char *what)
{
    char name[TEXT_BYTE_CAP];
    msg_at(err, buf, i, "%s, got %s", what, byte_name(byte_at(buf, end, i), name));
    return false;
}

/* Records one header field (at most HTTP_HEADERS_MAX; http-parser's count stops more first),
 * its value without leading or trailing spaces and tabs. */
static void add_field(http_request_t *r, const char *name, size_t name_len, const char *value,
                      size_t value_len)
{
    while (value_len > 0 && codec_is_ows(value[0])) {
        value++;
        value_len--;
    }
    while (value_len > 0 && codec_is_ows(value[value_len - 1]))
        value_len--;
    if (r->nheaders < HTTP_HEADERS_MAX)
        r->headers[r->nheaders++] = (http_header_t){name, name_len, value, value_len};
}

/*
 * Scans the head buf[0..end) strictly: optional empty lines, then
 *   method SP request-target SP HTTP/d.d CRLF *( field-name ":" field-value CRLF ) CRLF
 * with tchar names and values of VCHAR / SP / HTAB / obs-text (LF alone may end a line).
 * Sets *target and *target_len and the header fields of r. Returns false with a message in err.
 */
static bool scan_head(const char *buf, size_t end, http_request_t *r, const char **target,
                      size_t *target_len, char *err)
{
    size_t i = 0, start;
    r->nheaders = 0;
    while (eol(buf, end, &i))
        ;
    for (start = i; is_tchar(byte_at(buf, end, i)); i++)
        ;
    if (i == start || byte_at(buf, end, i) != ' ')
        return head_bad(err, buf, end, i, "malformed request line: expected method and a space");
    for (start = ++i; byte_at(buf, end, i) > 0x20 && byte_at(buf, end, i) < 0x7f; i++)
        ;
    if (i == start || byte_at(buf, end, i) != ' ')
        return head_bad(err, buf, end, i, "malformed request line: expected target and a space");
    *target = buf + start;
    *target_len = i - start;
    i++;
    if (end - i < 8 || memcmp(buf + i, "HTTP/", 5) != 0 || buf[i + 5] < '0' || buf[i + 5] > '9' ||
        buf[i + 6] != '.' || buf[i + 7] < '0' || buf[i + 7] > '9')
        return head_bad(err, buf, end, i, "malformed request line: expected HTTP/<d>.<d>");
    i += 8;
    if (!eol(buf, end, &i))
        return head_bad(err, buf, end, i, "malformed request line: expected CRLF");
    while (!eol(buf, end, &i)) {
        int b = byte_at(buf, end, i);
        if (codec_is_ows(b))
            return head_bad(err, buf, end, i, "obsolete line folding is not accepted");
        for (start = i; is_tchar(byte_at(buf, end, i)); i++)
            ;
        if (byte_at(buf, end, i) != ':' || i == start)
            return head_bad(err, buf, end, i, "malformed header: expected a name and ':'");
        size_t name_end = i, value = i + 1;
        for (i++; (b = byte_at(buf, end, i)) == '\t' || (b >= 0x20 && b != 0x7f); i++)
            ;
        size_t value_end = i;
        if (!eol(buf, end, &i))
            return head_bad(err, buf, end, i, "invalid character in header value");
        add_field(r, buf + start, name_end - start, buf + value, value_end - value);
    }
    if (i != end) /* http-parser ended the head somewhere a strict parser does not */
        return head_bad(err, buf, end, i, "malformed end of head");
    return true;
}

/* ---- parsing: the fast path ---------------------------------------------------------------- */

/* Target bytes the fast path takes: RFC 3986 pchar, '/' and '?' (no '#', no byte a lenient
 * parser might read differently: '"', '<', '>', '\\', '^', '`', '{', '|', '}', '[', ']'). */
static const bool fast_target_table[256] = {
    ['-'] = 1,  ['.'] = 1, ['_'] = 1, ['~'] = 1, ['!'] = 1, ['$'] = 1, ['&'] = 1,
    ['\''] = 1, ['('] = 1, [')'] = 1, ['*'] = 1, ['+'] = 1, [','] = 1, [';'] = 1,
    ['='] = 1,  [':'] = 1, ['@'] = 1, ['/'] = 1, ['?'] = 1, ['%'] = 1,
};

static bool fast_target_byte(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           fast_target_table[c];
}

/* A header value byte the fast path takes: HTAB or printable ASCII. */
static bool fast_value_byte(unsigned char c)
{
    return c == '\t' || (c >= 0x20 && c < 0x7f);
}

/* Whether the header's name starts with lower[0..n), in any case. */
static bool name_starts(const http_header_t *h, const char *lower, size_t n)
{
    return h->name_len >= n && strncasecmp(h->name, lower, n) == 0;
}

static bool value_is(const http_header_t *h, const char *lower, size_t n)
{
    return h->value_len == n && strncasecmp(h->value, lower, n) == 0;
}

/*
 * What the fast path makes of one header: false when the request must take the general way.
 * Names are matched as prefixes: http-parser takes a field whose name merely begins with
 * "Transfer-Encoding" (or another name it tracks) for that field, so only the general way
 * answers such a request as it always has.
 */
static bool fast_header(const http_header_t *h, size_t *hosts, bool *close, bool *keep)
{
    static const struct {
        const char *name;
        size_t len;
    } general[] = {{"content-length", 14},
                   {"transfer-encoding", 17},
                   {"upgrade", 7},
                   {"expect", 6},
                   {"proxy-connection", 16}};
    switch (h->name[0] | 0x20) { /* most names begin with none of these letters: no compare */
    case 'c':
    case 'e':
    case 'h':
    case 'p':
    case 't':
    case 'u':
        break;
    default:
        return true;
    }
    for (size_t i = 0; i < sizeof(general) / sizeof(general[0]); i++)
        if (name_starts(h, general[i].name, general[i].len))
            return false;
    if (name_starts(h, "connection", 10)) {
        bool c = value_is(h, "close", 5), k = value_is(h, "keep-alive", 10);
        *close |= c;
        *keep |= k;
        return h->name_len == 10 && (c || k);
    }
    *hosts += h->name_len == 4 && name_starts(h, "host", 4);
    return true;
}

/* The request line "GET|HEAD SP /target SP HTTP/1.d CRLF" at the start of buf[0..end): its
 * length, or 0. Sets the method, version and target of r. */
static size_t fast_request_line(const char *buf, size_t end, http_request_t *r)
{
    size_t i;
    if (end > 4 && memcmp(buf, "GET ", 4) == 0) {
        r->method = HTTP_GET;
        i = 4;
    } else if (end > 5 && memcmp(buf, "HEAD ", 5) == 0) {
        r->method = HTTP_HEAD;
        i = 5;
    } else {
        return 0;
    }
    size_t start = i;
    if (buf[i] != '/')
        return 0;
    while (i < end && fast_target_byte((unsigned char)buf[i]))
        i++;
    if (end - i < 11 || memcmp(buf + i, " HTTP/1.", 8) != 0 ||
        (buf[i + 8] != '0' && buf[i + 8] != '1') || buf[i + 9] != '\r' || buf[i + 10] != '\n')
        return 0;
    const char *q = memchr(buf + start, '?', i - start);
    r->path = buf + start;
    r->path_len = q != NULL ? (size_t)(q - r->path) : i - start;
    r->query = q != NULL ? q + 1 : buf + i;
    r->query_len = q != NULL ? (size_t)(buf + i - r->query) : 0;
    r->http_major = 1;
    r->http_minor = (unsigned short)(buf[i + 8] - '0');
    return i + 11;
}

/*
 * The fast path: when buf[0..len) starts with a complete head of the plainest kind (the file
 * comment says which), fills *r as the general way would and returns the request's length (its
 * head's: such a request has no body); else returns 0, having decided nothing. Reads at most
 * head_max bytes, each once.
 */
static long parse_fast(const parse_ctx_t *c, const char *buf, size_t len, http_request_t *r)
{
    size_t end = len < c->head_max ? len : c->head_max;
    size_t i = fast_request_line(buf, end, r), hosts = 0;
    bool close = false, keep = false;
    if (i == 0)
        return 0;
    r->nheaders = 0;
    for (;;) {
        if (end - i >= 2 && buf[i] == '\r' && buf[i + 1] == '\n')
            break;
        size_t start = i;
        while (i < end && is_tchar((unsigned char)buf[i]))
            i++;
        if (i == start || i >= end || buf[i] != ':' || r->nheaders >= c->headers_max)
            return 0;
        size_t name_end = i++;
        size_t value = i;
        while (i < end && fast_value_byte((unsigned char)buf[i]))
            i++;
        if (end - i < 2 || buf[i] != '\r' || buf[i + 1] != '\n')
            return 0;
        add_field(r, buf + start, name_end - start, buf + value, i - value);
        if (!fast_header(&r->headers[r->nheaders - 1], &hosts, &close, &keep))
            return 0;
        i += 2;
    }
    if (r->http_minor == 1 ? hosts != 1 : false)
        return 0;
    size_t head_end = i + 2;
    r->keep_alive = r->http_minor == 1 ? !close : keep;
    r->body = buf + head_end;
    r->body_len = 0;
    return (long)head_end;
}

/* ---- parsing: pass 3, chunked bodies -------------------------------------------------------- */

static long chunk_bad(char *err, size_t *pos, size_t i, const char *what)
{
    *pos = i;
    msg(err, "%s", what);
    return -1;
}

static bool crlf_at(const char *buf, size_t end, size_t i)
{
    return byte_at(buf, end, i) == '\r' && byte_at(buf, end, i + 1) == '\n';
}

/* Steps over printable bytes and tabs (chunk extensions, trailer lines). */
static size_t skip_text(const char *buf, size_t end, size_t i)
{
    int d;
    while ((d = byte_at(buf, end, i)) == '\t' || (d >= 0x20 && d != 0x7f))
        i++;
    return i;
}

/*
 * Walks the chunked body in buf[0..end) (RFC 9112 §7.1): chunk sizes in hex, extensions of
 * printable bytes, CRLF after every line and chunk, trailer lines, the final CRLF, which must
 * be the last byte. With out non-NULL it also moves the chunk data to out, contiguously (out
 * is at or before buf, so every move goes backwards). Returns the data length, or -1 with a
 * message in err and the offending offset in *pos.
 */
static long dechunk(char *buf, size_t end, size_t body_max, char *out, char *err, size_t *pos)
{
    size_t i = 0, total = 0;
    for (;;) {
        size_t size = 0, start = i;
        for (int d; (d = codec_hex_digit(byte_at(buf, end, i))) >= 0; i++) {
            if (size > (SIZE_MAX >> 4))
                return chunk_bad(err, pos, i, "chunk size too large");
            size = size * 16 + (size_t)d;
        }
        if (i == start)
            return chunk_bad(err, pos, i, "expected a chunk size in hex");
        if (byte_at(buf, end, i) == ';' || byte_at(buf, end, i) == ' ' ||
            byte_at(buf, end, i) == '\t') {
            while (byte_at(buf, end, i) == ' ' || byte_at(buf, end, i) == '\t')
                i++;
            if (byte_at(buf, end, i) != ';')
                return chunk_bad(err, pos, i, "malformed chunk extension");
            i = skip_text(buf, end, i);
        }
        if (!crlf_at(buf, end, i))
            return chunk_bad(err, pos, i, "chunk size line not ended by CRLF");
        i += 2;
        if (size == 0)
            break;
        if (size > body_max - total || size > end - i)
            return chunk_bad(err, pos, i, "chunk larger than the body");
        if (out != NULL)
            memmove(out + total, buf + i, size);
        total += size;
        i += size;
        if (!crlf_at(buf, end, i))
            return chunk_bad(err, pos, i, "chunk data not followed by CRLF");
        i += 2;
    }
    while (!crlf_at(buf, end, i)) { /* trailer lines, dropped */
        i = skip_text(buf, end, i);
        if (!crlf_at(buf, end, i))
            return chunk_bad(err, pos, i, "malformed trailer line");
        i += 2;
    }
    if (i + 2 != end)
        return chunk_bad(err, pos, i, "malformed end of chunked body");
    return (long)total;
}

/* ---- parsing: the driver -------------------------------------------------------------------- */

static long fail(int *status, int code)
{
    *status = code;
    return HTTP_PARSE_ERROR;
}

static long head_too_large(char *err, size_t head_max, int *status)
{
    msg(err, "request head exceeds %zu bytes", head_max);
    return fail(status, 431);
}

static long framing_too_large(char *err, int *status)
{
    msg(err, "chunk framing exceeds %d bytes", HTTP_CHUNK_FRAMING_MAX);
    return fail(status, 413);
}

/* Chunk framing bytes among the first pos bytes of the message (http-parser reports some
 * errors on the head's final LF, at head_end - 1, after the head was complete). */
static size_t framing(const http_reader_t *rd, size_t pos)
{
    return pos > rd->head_end + rd->body_total ? pos - rd->head_end - rd->body_total : 0;
}

/*
 * An unknown method: http-parser stops at the first byte that no method it knows continues
 * with. The token (from start, after any empty lines) is read to its end here; a token followed
 * by a space is 501, anything else 400, and a token that reaches the end of the buffer waits for
 * more. Examines at most HTTP_METHOD_TOKEN_MAX + 1 bytes.
 */
static long method_error(const char *buf, size_t start, size_t len, size_t head_max, int *status,
                         char *err)
{
    size_t i;
    for (i = start; i < len && i - start <= HTTP_METHOD_TOKEN_MAX; i++)
        if (!is_tchar((unsigned char)buf[i]))
            break;
    size_t token = i - start;
    if (token <= HTTP_METHOD_TOKEN_MAX && i == len)
        return len >= head_max ? head_too_large(err, head_max, status) : HTTP_PARSE_PARTIAL;
    size_t decided_at = token > HTTP_METHOD_TOKEN_MAX ? i - 1 : i; /* the deciding byte */
    if (decided_at >= head_max)
        return head_too_large(err, head_max, status);
    if (token > HTTP_METHOD_TOKEN_MAX) {
        msg(err, "request method longer than %d bytes", HTTP_METHOD_TOKEN_MAX);
        return fail(status, 400);
    }
    if (token > 0 && buf[i] == ' ') {
        if (token == 3 && memcmp(buf + start, "PRI", 3) == 0)
            return msg(err, "HTTP/2 is not supported, use HTTP/1.1"), fail(status, 505);
        msg(err, "method %.*s is not supported", (int)token, buf + start);
        return fail(status, 501);
    }
    char name[TEXT_BYTE_CAP];
    msg_at(err, buf, i, "invalid request method, got %s", byte_name((unsigned char)buf[i], name));
    return fail(status, 400);
}

/* Splits the request target u[0..n) into path and query. Returns false if it is not usable. */
static bool split_target(const char *u, size_t n, http_request_t *r)
{
    if (n == 0)
        return false;
    if (u[0] == '/' || (n == 1 && u[0] == '*')) { /* origin-form, asterisk-form */
        const char *hash = memchr(u, '#', n);
        if (hash != NULL)
            n = (size_t)(hash - u);
        const char *q = memchr(u, '?', n);
        r->path = u;
        r->path_len = q != NULL ? (size_t)(q - u) : n;
        r->query = q != NULL ? q + 1 : u + n;
        r->query_len = q != NULL ? n - r->path_len - 1 : 0;
        return true;
    }
    struct http_parser_url parts; /* absolute-form: http://host/path?query */
    http_parser_url_init(&parts);
    if (n > UINT16_MAX || http_parser_parse_url(u, n, 0, &parts) != 0 ||
        !(parts.field_set & (1 << UF_HOST)))
        return false;
    if (parts.field_set & (1 << UF_PATH)) {
        r->path = u + parts.field_data[UF_PATH].off;
        r->path_len = parts.field_data[UF_PATH].len;
    } else {
        r->path = "/";
        r->path_len = 1;
    }
    if (parts.field_set & (1 << UF_QUERY)) {
        r->query = u + parts.field_data[UF_QUERY].off;
        r->query_len = parts.field_data[UF_QUERY].len;
    } else {
        r->query = "";
        r->query_len = 0;
    }
    return true;
}

/* The complete head asks for an interim 100 response before the body (RFC 9110 §10.1.1). */
static bool expects_continue(const http_request_t *r, const http_parser *p)
{
    const char *v;
    size_t n;
    return p->http_minor >= 1 && http_header_get(r, "expect", &v, &n) && n == 12 &&
           strncasecmp(v, "100-continue", 12) == 0;
}

/* The checks made once the head is complete, in a fixed order (see the file comment); fills
 * the target and header fields of *req. */
static long check_head(parse_ctx_t *c, const http_parser *p, int *status)
{
    http_reader_t *rd = c->rd;
    http_request_t *r = c->req;
    size_t head_end = rd->head_end;
    if (head_end > c->head_max) {
        msg(c->err, "request head of %zu bytes exceeds the limit of %zu", head_end, c->head_max);
        return fail(status, 431);
    }
    const char *target;
    size_t target_len;
    rd->work += head_end;
    if (!scan_head(c->buf, head_end, r, &target, &target_len, c->err))
        return fail(status, 400);
    if (p->http_major != 1) {
        msg(c->err, "HTTP/%u.%u is not supported, use HTTP/1.1", p->http_major, p->http_minor);
        return fail(status, 505);
    }
    if (p->method == HTTP_CONNECT)
        return msg(c->err, "method CONNECT is not supported"), fail(status, 501);
    if (!split_target(target, target_len, r)) {
        msg(c->err, "invalid request target");
        return fail(status, 400);
    }
    size_t hosts = 0;
    for (size_t i = 0; i < r->nheaders; i++) {
        const http_header_t *h = &r->headers[i];
        hosts += h->name_len == 4 && strncasecmp(h->name, "host", 4) == 0;
    }
    if (p->http_minor >= 1 && hosts != 1) { /* RFC 9112 §3.2 */
        msg(c->err,
            hosts == 0 ? "HTTP/1.1 request without a Host header" : "more than one Host header");
        return fail(status, 400);
    }
    if ((p->flags & F_CONTENTLENGTH) && p->content_length > c->body_max) {
        msg(c->err, "Content-Length %llu exceeds the limit of %zu bytes",
            (unsigned long long)p->content_length, c->body_max);
        return fail(status, 413);
    }
    rd->expect_continue = expects_continue(r, p);
    /* From the head only: http-parser also reads Transfer-Encoding in trailers and would
     * forget chunked framing at a trailer "Transfer-Encoding: x". */
    rd->chunked = (p->flags & F_CHUNKED) != 0;
    return 1;
}

/* Maps an error that stopped http-parser at buf[pos]. */
static long parse_error(parse_ctx_t *c, const http_parser *p, size_t len, size_t pos, int *status)
{
    http_reader_t *rd = c->rd;
    enum http_errno e = HTTP_PARSER_ERRNO(p);
    if (c->status != 0) { /* a callback's */
        if (!rd->head_done && c->err_pos >= c->head_max)
            return head_too_large(c->err, c->head_max, status);
        return fail(status, c->status);
    }
    if (!rd->head_done) {
        if (e == HPE_INVALID_METHOD) { /* decided where the token ends, maybe in a later call */
            size_t start = 0;
            while (start < len && (c->buf[start] == '\r' || c->buf[start] == '\n'))
                start++;
            rd->method_unknown = true;
            rd->method_start = start;
            return method_error(c->buf, start, len, c->head_max, status, c->err);
        }
        if (pos >= c->head_max || e == HPE_HEADER_OVERFLOW)
            return head_too_large(c->err, c->head_max, status);
    } else if (framing(rd, pos) > HTTP_CHUNK_FRAMING_MAX) {
        return framing_too_large(c->err, status);
    }
    msg_at(c->err, c->buf, pos, "%s", describe(e));
    return fail(status, 400);
}

static size_t limit_or(size_t given, size_t dflt)
{
    return given == 0 || given > dflt ? dflt : given;
}

/* A buffer that ends inside the request: partial, unless its bytes already break a limit. */
static long partial(const parse_ctx_t *c, size_t len, int *status)
{
    const http_reader_t *rd = c->rd;
    if (!rd->head_done && len >= c->head_max)
        return head_too_large(c->err, c->head_max, status);
    if (rd->head_done && framing(rd, len) > HTTP_CHUNK_FRAMING_MAX)
        return framing_too_large(c->err, status);
    if (rd->head_done && rd->expect_continue)
        *status = 100;
    return HTTP_PARSE_PARTIAL;
}

/* The request ended at buf[end]: fills in the rest of *req, de-chunking a chunked body. The
 * head was scanned into *req in this call when head_scanned, else it is scanned again here
 * (it passed every check in an earlier call, at another address). */
static long request_complete(parse_ctx_t *c, const http_parser *p, char *buf, size_t end,
                             bool head_scanned, int *status)
{
    http_reader_t *rd = c->rd;
    http_request_t *r = c->req;
    size_t head_end = rd->head_end;
    if (!head_scanned) {
        const char *target;
        size_t target_len;
        rd->work += head_end;
        bool ok = scan_head(buf, head_end, r, &target, &target_len, c->err) &&
                  split_target(target, target_len, r);
        (void)ok;
        assert(ok);
    }
    r->method = (int)p->method;
    r->http_major = p->http_major;
    r->http_minor = p->http_minor;
    /* RFC 9112 §6.1: an HTTP/1.0 message with Transfer-Encoding has faulty framing */
    r->keep_alive = rd->keep_alive && !(p->http_minor == 0 && rd->chunked);
    r->body = buf + head_end;
    r->body_len = rd->body_total;
    if (!rd->chunked)
        return (long)end;
    if (framing(rd, end) > HTTP_CHUNK_FRAMING_MAX)
        return framing_too_large(c->err, status);
    size_t pos = 0;
    char *body = buf + head_end;
    rd->work += 2 * (end - head_end);
    if (dechunk(body, end - head_end, c->body_max, NULL, c->err, &pos) < 0) {
        char what[HTTP_ERR_MAX];
        memcpy(what, c->err, sizeof(what));
        msg_at(c->err, buf, head_end + pos, "%s", what);
        return fail(status, 400);
    }
    /* checked: now move the data together */
    r->body_len = (size_t)dechunk(body, end - head_end, c->body_max, body, c->err, &pos);
    return (long)end;
}

/* Feeds http-parser the bytes buf[rd->fed..len) it has not seen, and decides. */
static long parse_new_bytes(parse_ctx_t *c, char *buf, size_t len, int *status)
{
    http_reader_t *rd = c->rd;
    if (rd->method_unknown)
        return method_error(buf, rd->method_start, len, c->head_max, status, c->err);
    if (!rd->started) {
        http_parser_init(&rd->parser, HTTP_REQUEST);
        rd->started = true;
    }
    http_parser *p = &rd->parser;
    p->data = c;
    bool head_scanned = false;
    while (rd->fed < len) {
        size_t n = http_parser_execute(p, &parse_settings, buf + rd->fed, len - rd->fed);
        rd->fed += n;
        rd->work += n;
        enum http_errno e = HTTP_PARSER_ERRNO(p);
        if (e == HPE_PAUSED && rd->message_done)
            return request_complete(c, p, buf, rd->fed, head_scanned, status);
        if (e == HPE_PAUSED) { /* stopped on the head's final LF, which it feeds again */
            rd->head_end = rd->fed + 1;
            long rc = check_head(c, p, status);
            if (rc < 0)
                return rc;
            head_scanned = true;
            http_parser_pause(p, 0);
            continue;
        }
        if (e != HPE_OK || c->status != 0)
            return parse_error(c, p, len, rd->fed, status);
        if (n == 0)
            break;
    }
    return partial(c, len, status);
}

void http_reader_init(http_reader_t *r)
{
    memset(r, 0, sizeof(*r));
}

long http_parse_more(http_reader_t *rd, char *buf, size_t len, const http_limits_t *limits,
                     http_request_t *req, int *status, char *err)
{
    parse_ctx_t c = {
        .rd = rd,
        .req = req,
        .buf = buf,
        .exec_end = buf + len,
        .head_max = limit_or(limits ? limits->head_max : 0, HTTP_HEAD_MAX),
        .headers_max = limit_or(limits ? limits->headers_max : 0, HTTP_HEADERS_MAX),
        .body_max = limits && limits->body_max ? limits->body_max : HTTP_BODY_MAX_DEFAULT,
        .err = err,
    };
    *status = 0;
    err[0] = '\0';
    req->nheaders = 0;
    /* The caller gives the request's bytes again, with any new ones after them. */
    assert(len >= rd->fed);
    if (rd->failed != 0) {
        msg(err, "the connection's request stream already failed");
        return fail(status, rd->failed);
    }
    if (len == 0) /* http-parser takes 0 bytes as the end of the stream */
        return HTTP_PARSE_PARTIAL;
    long rc = !rd->started ? parse_fast(&c, buf, len, req) : 0;
    if (rc > 0)
        rd->work += (uint64_t)rc;
    else
        rc = parse_new_bytes(&c, buf, len, status);
    if (rc == HTTP_PARSE_ERROR) {
        rd->failed = *status;
    } else if (rc > 0) { /* the next request starts fresh; the work counter goes on */
        uint64_t work = rd->work;
        http_reader_init(rd);
        rd->work = work;
    }
    return rc;
}

long http_parse(char *buf, size_t len, const http_limits_t *limits, http_request_t *req,
                int *status, char *err)
{
    http_reader_t rd;
    http_reader_init(&rd);
    return http_parse_more(&rd, buf, len, limits, req, status, err);
}
