/*
 * timestamp.h - written timestamps to nanoseconds since the Unix epoch, for traffic logs:
 * RFC 3339 (2026-12-02T07:26:18.25Z) and nginx's $time_local (02/Dec/2026:07:26:18 +0000).
 *
 * Pure: no I/O, no allocation, no locale, no time zone database (an offset is always written
 * in the text itself); the input need not be NUL-terminated and is never read past len bytes.
 * Proleptic Gregorian calendar; times before 1970 are refused (a replay's times are >= 0), as
 * are times past SL_NOW_MAX_NS. A leap second (:60) is read as the second after :59.
 */
#ifndef SLUICE_PROTO_TIMESTAMP_H
#define SLUICE_PROTO_TIMESTAMP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Results of the parsers: TS_OK, or why the text is not a timestamp (timestamp_error()). */
typedef enum timestamp_rc {
    TS_OK = 0,
    TS_ESYNTAX = -1, /* not the format's shape */
    TS_EFIELD = -2,  /* a field out of its range: month 13, 31 April, hour 24, offset 24:00 */
    TS_ERANGE = -3,  /* before 1970-01-01T00:00:00Z or past SL_NOW_MAX_NS */
} timestamp_rc_t;

/* A static one-line description of rc ("not an RFC 3339 timestamp", ...). */
const char *timestamp_error(timestamp_rc_t rc);

/*
 * RFC 3339's date-time: YYYY-MM-DD, then 'T', 't' or one space, then hh:mm:ss, an optional
 * fraction ('.' and 1 to 9 digits: at most nanoseconds), then 'Z', 'z' or +hh:mm / -hh:mm.
 * The whole of s[0..len) must be the timestamp. On TS_OK *ns_out is the instant in ns since
 * the epoch; otherwise *ns_out is untouched.
 */
timestamp_rc_t timestamp_rfc3339(const char *s, size_t len, int64_t *ns_out);

/*
 * nginx's $time_local (and Apache's %t without its brackets): DD/Mon/YYYY:hh:mm:ss +hhmm, the
 * month an English abbreviation as nginx writes it (Jan..Dec), the offset's sign required.
 * The whole of s[0..len) must be the timestamp. As timestamp_rfc3339 otherwise.
 */
timestamp_rc_t timestamp_nginx(const char *s, size_t len, int64_t *ns_out);

/* True when s[0..len) starts as an RFC 3339 timestamp does (four digits and '-'): a field that
 * does is read as one, so that an error names the right format. */
bool timestamp_looks_rfc3339(const char *s, size_t len);

#endif /* SLUICE_PROTO_TIMESTAMP_H */
