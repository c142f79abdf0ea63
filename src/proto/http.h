/*
 * http.h - the HTTP/1.1 codec of sluiced: requests in, responses out, no sockets.
 *
 * Requests are parsed with the system's http-parser (Node's, 2.9): the caller keeps the
 * received, unconsumed bytes of a connection and calls http_parse_more() after every read; it
 * answers "one request of N bytes", "need more" or "error <status>". Nothing is allocated: the
 * request's fields point into the caller's buffer. A connection's http_reader_t remembers how
 * far the bytes of the request being received have been parsed, so each call parses only what
 * arrived since the last one: a request delivered in many small reads costs about what it
 * costs whole (O(bytes received), not O(bytes x reads)). http_parse() is the same parse with a
 * fresh reader, for a buffer that holds the whole request or for a one-off check.
 *
 * What is accepted (RFC 9112 as a server, strict where laxness helps request smuggling):
 *   - HTTP/1.0 and HTTP/1.x; any other major version is 505. Methods known to http-parser; an
 *     unknown method token is 501. CONNECT is 501. An HTTP/1.1 request needs exactly one Host.
 *   - Content-Length or Transfer-Encoding: chunked (de-chunked in place, trailers dropped);
 *     both, two Content-Lengths, or a Transfer-Encoding not ending in chunked are 400.
 *   - The head is re-checked strictly once complete, since Debian builds http-parser with
 *     HTTP_PARSER_STRICT 0 (it takes "HTTX/1.1", "Name : v", a bare CR as LF): tchar names,
 *     single spaces in the request line, CRLF or bare LF line ends, no control bytes; chunked
 *     framing is re-checked the same way. Obsolete line folding is 400 (RFC 9112 §5.2).
 *   - Upgrade (h2c, websocket) is ignored: the request is answered as plain HTTP/1.1, which
 *     RFC 9110 §7.8 allows and which is what curl --http2 expects from an HTTP/1.1-only server.
 *   - Expect: 100-continue: the request is parsed as any other once its body has arrived, but
 *     while the body is still missing http_parse() reports PARTIAL with *status 100, so the
 *     server can send http_continue() (once per request) instead of letting the client wait
 *     for its timeout (curl: 1 s). A server that ignores this still works, only slower.
 *
 * Limits are checked against the bytes the parser has accepted, so a result never depends on
 * how the bytes were split into reads (the fuzz target checks this): a head still incomplete
 * after head_max bytes is 431 (no unbounded buffering of a slow head), a Content-Length above
 * body_max is 413 as soon as the head is complete, a chunk that takes the body above body_max
 * is 413 as soon as its size line is complete, and chunk framing (size lines, extensions,
 * trailers) above HTTP_CHUNK_FRAMING_MAX bytes is 413.
 *
 * Responses are appended to a buf_t (buf.h): http_begin(), any http_header() calls, then
 * http_end() or http_problem_end(). The helpers below (headers, query, path segments, client
 * address behind trusted proxies, JSON strings) work on a parsed request and never allocate.
 *
 * The parser is http_parse.c, the request helpers http.c, the responses http_response.c.
 */
#ifndef SLUICE_PROTO_HTTP_H
#define SLUICE_PROTO_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <http_parser.h>

#include "proto/buf.h"
#include "proto/netaddr.h"

#define HTTP_HEADERS_MAX       64          /* most header fields in a request (more: 431) */
#define HTTP_HEAD_MAX          (16 * 1024) /* request line + header bytes, with CRLFs (more: 431) */
#define HTTP_BODY_MAX_DEFAULT  (64 * 1024) /* default largest body, bytes (more: 413) */
#define HTTP_CHUNK_FRAMING_MAX (16 * 1024) /* chunk size lines + extensions + trailers, bytes */
#define HTTP_METHOD_TOKEN_MAX  32          /* longest unknown method token reported as 501 */
#define HTTP_ERR_MAX           128         /* an http_parse error message fits in this */
#define HTTP_DATE_LEN          30          /* "Sun, 06 Nov 1994 08:49:37 GMT" + NUL */
#define HTTP_QUERY_KEY_MAX     256         /* longest decoded query parameter name matched */

enum http_parse_status {
    HTTP_PARSE_ERROR = -1,  /* *status and err say why; reply and close the connection */
    HTTP_PARSE_PARTIAL = 0, /* the buffer holds a prefix of a request: read more, call again */
};

/* One header field: name and value point into the parsed buffer (not NUL-terminated); the
 * value has no leading or trailing spaces or tabs. */
typedef struct http_header {
    const char *name;
    size_t name_len; /* bytes */
    const char *value;
    size_t value_len; /* bytes */
} http_header_t;

typedef struct http_request {
    int method;        /* http_parser's enum http_method (HTTP_GET, HTTP_POST, ...) */
    const char *path;  /* raw (still percent-encoded) path without "?query" or "#fragment";
                          "*" for OPTIONS *, "/" for an absolute-form target without a path */
    size_t path_len;   /* bytes */
    const char *query; /* raw query without '?', may be empty (query_len 0) */
    size_t query_len;  /* bytes */
    http_header_t headers[HTTP_HEADERS_MAX]; /* in order of arrival; trailers are not kept */
    size_t nheaders;
    const char *body; /* Content-Length or de-chunked body; when empty, points after the head */
    size_t body_len;  /* bytes */
    bool keep_alive;  /* http_should_keep_alive(): false for HTTP/1.0 without "Connection:
                         keep-alive" and for "Connection: close" */
    unsigned short http_major, http_minor;
} http_request_t;

/* Limits a parse enforces; zeros mean the defaults. head_max and headers_max can only lower
 * HTTP_HEAD_MAX and HTTP_HEADERS_MAX (the request has room for HTTP_HEADERS_MAX headers). */
typedef struct http_limits {
    size_t body_max;    /* largest body, bytes; 0 = HTTP_BODY_MAX_DEFAULT */
    size_t head_max;    /* largest head, bytes; 0 (or more than HTTP_HEAD_MAX) = HTTP_HEAD_MAX */
    size_t headers_max; /* most header fields; 0 (or more than the maximum) = HTTP_HEADERS_MAX */
} http_limits_t;

/*
 * What the bytes of the request being received have shown so far: one per connection,
 * caller-allocated. All zero bytes (or http_reader_init()) is a reader at the start of a
 * request. Offsets count from the request's first byte, so the caller may move or reallocate
 * its buffer between calls, as long as the request's bytes stay in order at its start.
 */
typedef struct http_reader {
    http_parser parser;   /* http-parser's state after the bytes fed so far */
    size_t fed;           /* bytes of the request given to http-parser */
    size_t head_end;      /* bytes of the head, once it is complete (else 0) */
    size_t body_total;    /* body bytes so far (chunk data only, for chunked), bytes */
    size_t nfields;       /* header fields begun */
    size_t method_start;  /* offset of an unknown method token (method_unknown) */
    uint64_t work;        /* bytes examined by every pass, since init: a cost counter */
    int failed;           /* the status of an error already returned (sticky); 0 = none */
    unsigned char last;   /* the previous data callback (to tell a new field from a piece) */
    bool started;         /* parser initialised for this request */
    bool head_done;       /* the head is complete and was checked */
    bool message_done;    /* the request is complete */
    bool keep_alive;      /* http_should_keep_alive() at the end of the request */
    bool expect_continue; /* the head asked for "100 Continue" */
    bool chunked;         /* the head ended its Transfer-Encoding with chunked */
    bool method_unknown;  /* http-parser refused the method: decided on the token's end */
} http_reader_t;

/* Puts r at the start of a request (zeroes it, work counter included). */
void http_reader_init(http_reader_t *r);

/*
 * Parses one request from the start of buf[0..len), of which the first bytes were seen by
 * earlier calls with the same reader (and the same limits): only the new ones are parsed.
 * Returns the number of bytes the request used (> 0, at most len) and fills *req, whose pointers
 * point into buf, and sets the reader at the start of the next request (call again at buf + the
 * returned count for a pipelined one); HTTP_PARSE_PARTIAL (0) when more bytes are needed, with
 * *status 100 if the head is complete and says "Expect: 100-continue" (else 0); or
 * HTTP_PARSE_ERROR (-1) with *status set to 400, 413, 431, 501 or 505 and a NUL-terminated
 * message naming what was wrong and where in err (HTTP_ERR_MAX bytes). After an error the
 * connection cannot be resynchronised: send the error and close (the reader stays failed).
 * Never reads outside buf[0..len). Writes inside it only to de-chunk a chunked body, and only
 * when returning a request (a partial or failed parse leaves buf unchanged).
 */
long http_parse_more(http_reader_t *r, char *buf, size_t len, const http_limits_t *limits,
                     http_request_t *req, int *status, char *err);

/* http_parse_more() with a fresh reader: buf[0..len) is parsed from its first byte. */
long http_parse(char *buf, size_t len, const http_limits_t *limits, http_request_t *req,
                int *status, char *err);

/* ---- request helpers ---------------------------------------------------------------------- */

/* Finds the first header named name (ASCII case-insensitive); sets *v, *vlen and returns true,
 * or returns false. */
bool http_header_get(const http_request_t *r, const char *name, const char **v, size_t *vlen);

/*
 * Finds the first query parameter whose percent-decoded name is name ("a=1&b=x+y"; a parameter
 * without '=' has an empty value) and writes its value percent-decoded, '+' as a space, and
 * NUL-terminated into out[0..cap). Returns true and sets *len (bytes, without the NUL), or false
 * when the parameter is absent, its value has a bad escape ('%' not followed by two hex digits)
 * or %00, or the value and its NUL do not fit in cap.
 */
bool http_query_get(const http_request_t *r, const char *name, char *out, size_t cap, size_t *len);

/*
 * Percent-decodes src[0..len) into out[0..cap) and NUL-terminates it ('+' stays '+'). Returns
 * the decoded length, or -1 for a bad escape, %00, or when the result and its NUL exceed cap.
 */
long http_pct_decode(const char *src, size_t len, char *out, size_t cap);

/* A decoded path segment: NUL-terminated, inside the caller's storage. */
typedef struct http_segment {
    const char *ptr;
    size_t len; /* bytes, without the NUL */
} http_segment_t;

/*
 * Splits an origin-form path ("/v1/rules/a%2Fb/overrides/k") at '/' and percent-decodes every
 * segment ('+' stays '+', %2F inside a segment does not split it) into storage[0..cap), each
 * NUL-terminated; cap >= path_len + 1 is always enough. "/" is one empty segment, "/a/" is "a"
 * and "". Returns the number of segments (at most max) written to segs, or -1 when the path
 * does not start with '/', a segment has a bad escape or %00, there are more than max
 * segments, or storage is too small.
 */
long http_path_segments(const char *path, size_t path_len, char *storage, size_t cap,
                        http_segment_t *segs, size_t max);

/* ---- client addresses ---------------------------------------------------------------------- */

/*
 * The client's address behind trusted proxies (nginx's real_ip with real_ip_recursive on). If
 * peer (the TCP peer) is not inside one of trusted[0..ntrusted), the client is the peer.
 * Otherwise X-Forwarded-For (all such headers, as one comma-separated list) is walked from the
 * right, skipping addresses inside trusted: the first address that is not is the client, so
 * entries a client wrote itself to the left of what its proxy appended are never believed. An
 * entry that is not an address ("unknown") stops the walk: the client is then the last trusted
 * hop. If every entry is trusted, the client is the leftmost. Entries may be "1.2.3.4",
 * "1.2.3.4:port", "::1", "[::1]" or "[::1]:port"; empty entries are skipped.
 * Returns 0 and sets *client, or -1 if ntrusted > 0 and trusted is NULL.
 */
int http_client_addr(const http_request_t *r, const netaddr_t *peer, const netaddr_net_t *trusted,
                     size_t ntrusted, netaddr_t *client);

/* ---- responses ----------------------------------------------------------------------------- */

/* The reason phrase of status ("Too Many Requests"); "Unknown" for codes http-parser lacks. */
const char *http_reason(int status);

/* Appends the interim "HTTP/1.1 100 Continue" response (head and blank line). */
void http_continue(buf_t *b);

/* Starts a response: "HTTP/1.1 <status> <reason>\r\n". */
void http_begin(buf_t *b, int status);

/* Appends "<name>: <value>\r\n" with the value formatted printf-style; control characters in
 * the value (CR and LF included, tab excepted) become spaces, so a value cannot inject
 * headers. name is a literal token from the caller. */
void http_header(buf_t *b, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Appends "<name>: <v>\r\n", v in decimal. name is a literal token from the caller. */
void http_header_int(buf_t *b, const char *name, int64_t v);

/*
 * Ends the response started with http_begin(): Content-Type when content_type is not NULL,
 * Content-Length: len (omitted, with the body, for 1xx, 204 and 304, which RFC 9110 §8.6 says
 * must not carry one), "Connection: close" when !keep_alive, the blank line, then body[0..len).
 * For a 204 pass content_type NULL and len 0.
 */
void http_end(buf_t *b, bool keep_alive, const char *content_type, const void *body, size_t len);

/*
 * The IETF RateLimit fields, draft-ietf-httpapi-ratelimit-headers-10 syntax:
 *   RateLimit-Policy: "<policy>";q=<limit>;w=<window_s>
 *   RateLimit: "<policy>";r=<remaining>;t=<reset_s>
 * policy is written as a structured-field string: '"' and '\' are backslash-escaped and bytes
 * outside printable ASCII become '?'. Numbers are clamped to 0..999999999999999 (sf-integer);
 * window_s and reset_s are seconds, already rounded up by the caller.
 */
void http_ratelimit_headers(buf_t *b, const char *policy, int64_t limit, int64_t window_s,
                            int64_t remaining, int64_t reset_s);

/* The two fields' values alone, as above, for a protocol that carries headers otherwise (gRPC's
 * response_headers_to_add): RateLimit-Policy's into policy_out, RateLimit's into limit_out. */
void http_ratelimit_values(buf_t *policy_out, buf_t *limit_out, const char *policy, int64_t limit,
                           int64_t window_s, int64_t remaining, int64_t reset_s);

/*
 * Ends a response started with http_begin(b, status) (and any headers) with an RFC 9457
 * application/problem+json body:
 *   {"type":"about:blank","title":"<title>","status":<status>,"detail":"<detail>"}
 * title NULL means http_reason(status); detail NULL leaves "detail" out. Strings are escaped
 * as by http_json_escape().
 */
void http_problem_end(buf_t *b, int status, bool keep_alive, const char *title, const char *detail);

/* http_problem_end() with a "field" member naming the request's field the problem is about
 * ("limit"), when field is not NULL. */
void http_problem_field_end(buf_t *b, int status, bool keep_alive, const char *title,
                            const char *detail, const char *field);

/* A whole problem response: http_begin(b, status) then http_problem_end(). */
void http_problem(buf_t *b, int status, bool keep_alive, const char *title, const char *detail);

/*
 * Escapes s[0..len) as the inside of a JSON string (no quotes): '"' and '\' backslashed,
 * control characters as \b \f \n \r \t or \u00XX, DEL as \u007f, valid UTF-8 passed through,
 * each byte of invalid UTF-8 (overlong, surrogate, above U+10FFFF, truncated) as \ufffd.
 * Writes at most cap - 1 bytes and a NUL when cap > 0 (like snprintf) and returns the length
 * of the whole escaped text, so a return >= cap means it was cut short.
 */
size_t http_json_escape(char *out, size_t cap, const char *s, size_t len);

/* Appends s[0..len) as a quoted, escaped JSON string ("...") to b. */
void http_json_append(buf_t *b, const char *s, size_t len);

/* Cuts off the body of the response that starts at b->data[from] (its head, up to the blank
 * line, stays; Content-Length too): a HEAD request's answer is the GET answer's head. */
void http_head_only(buf_t *b, size_t from);

/* Formats unix_s (seconds since the epoch) as an IMF-fixdate for the Date header, in
 * out[HTTP_DATE_LEN]: "Sun, 06 Nov 1994 08:49:37 GMT". Returns out. */
const char *http_date(int64_t unix_s, char out[HTTP_DATE_LEN]);

#endif /* SLUICE_PROTO_HTTP_H */
