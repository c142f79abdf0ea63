/*
 * text.h - byte-level text: UTF-8 validation, and showing outside bytes safely in an error
 * message. Pure; nothing allocated.
 *
 * UTF-8 is RFC 3629's: no overlong forms, no surrogates (U+D800..U+DFFF), nothing above
 * U+10FFFF, no truncated sequence.
 *
 * An error message quotes what it refuses, but outside bytes may hold control characters, quotes
 * or invalid UTF-8 that would break a log line, a RESP error (one line) or a terminal. The
 * helpers below keep printable ASCII and replace the rest, either by '?' (TEXT_MASK: compact,
 * what RESP error texts have always used) or by \xNN (exact: the reader can tell every byte).
 */
#ifndef SLUICE_PROTO_TEXT_H
#define SLUICE_PROTO_TEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * Decodes the UTF-8 character at s[0..n) (n >= 1). Returns its length in bytes (1 to 4) and
 * sets *cp (may be NULL) to its code point, or returns 0 when s does not start with a valid
 * character (a stray continuation byte, an overlong form, a surrogate, a value above U+10FFFF,
 * or a sequence cut short by n).
 */
size_t text_utf8_decode(const unsigned char *s, size_t n, uint32_t *cp);

/* True when s[0..n) is valid UTF-8 throughout (the empty text is). */
bool text_is_utf8(const char *s, size_t n);

enum text_show_flags {
    TEXT_MASK = 1u << 0, /* text_show: unsafe bytes as '?' (else as \xNN, and '\' is unsafe) */
};

/* Room text_show needs for max bytes of input, whatever they are: each \xNN, "..." and NUL. */
#define TEXT_SHOW_CAP(max) (4 * (max) + 4)

/*
 * Writes s[0..len) for an error message into out[0..cap) (cap > 0), NUL-terminated: at most
 * `max` bytes of it, then "..." when len > max. Printable ASCII (0x20..0x7e) is kept but for the
 * single quote, which the messages put around what they quote; every other byte is '?' with
 * TEXT_MASK, else \xNN (lower-case hex, and '\' is written \x5c so the result reads back
 * exactly). A byte whose rendering would not fit in cap (with the NUL) ends the text there.
 * Returns out.
 */
const char *text_show(char *out, size_t cap, const char *s, size_t len, size_t max, unsigned flags);

enum text_byte_flags {
    TEXT_BYTE_0X = 1u << 0,    /* text_byte: other bytes as 0x01 (else \x01) */
    TEXT_BYTE_SPACE = 1u << 1, /* text_byte: the space as 0x20 / \x20 (else ' ') */
};

#define TEXT_BYTE_CAP 8 /* text_byte's output, NUL included */

/*
 * One byte for an error message ("expected '$', got 'x'"): a printable ASCII byte in single
 * quotes ('x'), any other as hex (\x01, or 0x01 with TEXT_BYTE_0X), and "EOF" for c < 0 (the
 * end of the input). Returns out.
 */
const char *text_byte(int c, unsigned flags, char out[TEXT_BYTE_CAP]);

/*
 * Writes a printf-style message into err[0..cap) (NUL-terminated; nothing when err is NULL or
 * cap is 0) and returns code: the one-line "fail with this message" of the parsers that report
 * errors into a caller's buffer.
 */
int text_error(int code, char *err, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#endif /* SLUICE_PROTO_TEXT_H */
