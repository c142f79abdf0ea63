/*
 * tls.h - TLS for sluiced's listeners (OpenSSL), apart from the sockets: a connection's TLS is
 * two memory buffers, ciphertext in and ciphertext out, which conn.c moves to and from its
 * socket as it moves plaintext for a plain connection. Nothing here does I/O.
 *
 *   tls_ctx_*   the certificate, key and optional client CA, shared by every loop; reloaded on
 *               SIGHUP (new connections take the new one, open ones keep theirs)
 *   tls_conn_*  one connection's session: tls_conn_input() takes ciphertext and hands plaintext
 *               out, tls_conn_output() takes plaintext and appends ciphertext
 *
 * A gRPC listener offers ALPN "h2" and an HTTP one "http/1.1"; a client that offers ALPN
 * without the listener's protocol is refused in the handshake.
 */
#ifndef SLUICE_SERVER_TLS_H
#define SLUICE_SERVER_TLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto/buf.h"

#define TLS_ERR_MAX 512 /* an error message, bytes */

typedef struct tls_ctx tls_ctx_t;
typedef struct tls_conn tls_conn_t;

/*
 * Loads a PEM certificate chain and its private key (and, when client_ca is not NULL, the CAs
 * whose client certificates are required) into a new context. Returns 0, or -1 with a message
 * in err (TLS_ERR_MAX bytes) naming the setting and the file, and the system's reason when the
 * file cannot be read ("--tls-key /x/key.pem: No such file or directory"), else what it is not
 * and OpenSSL's reason. A certificate that has expired or is not valid yet is loaded, and a
 * warning logged.
 */
int tls_ctx_new(const char *cert_path, const char *key_path, const char *client_ca, tls_ctx_t **out,
                char *err);

/* Loads the same files again; on success new connections use them. On failure nothing
 * changes. Returns 0 or -1 with err, as tls_ctx_new(). Thread-safe against tls_conn_new(). */
int tls_ctx_reload(tls_ctx_t *ctx, char *err);

/* The end of the validity of the certificate new connections get (its notAfter), unix seconds;
 * 0 when it could not be read. Thread-safe. */
int64_t tls_ctx_not_after(const tls_ctx_t *ctx);

/* Frees the context; connections still open keep what they use. */
void tls_ctx_free(tls_ctx_t *ctx);

/* A server session for one accepted connection; alpn is the protocol it offers ("h2",
 * "http/1.1") or NULL for none. NULL when out of memory. */
tls_conn_t *tls_conn_new(tls_ctx_t *ctx, const char *alpn);

void tls_conn_free(tls_conn_t *t);

/* Where tls_conn_input() puts plaintext: returns room of at least 1 byte (*len set), or NULL
 * when there is none to give (out of memory). `added` then records n bytes written there. */
typedef char *(*tls_room_fn)(void *arg, size_t *len);
typedef void (*tls_added_fn)(void *arg, size_t n);

enum tls_input {
    TLS_INPUT_OK = 0,     /* all of it taken; any plaintext handed out */
    TLS_INPUT_CLOSED = 1, /* the peer ended the session (close_notify): as EOF */
    TLS_INPUT_ERROR = -1, /* a handshake or record that fails: close the connection */
};

/* Takes n bytes of ciphertext read from the socket and hands out every byte of plaintext they
 * complete. The handshake runs here: afterwards tls_conn_output() has its replies to send. */
enum tls_input tls_conn_input(tls_conn_t *t, const char *data, size_t n, tls_room_fn room,
                              tls_added_fn added, void *arg);

/* Encrypts what it can of *plain (all of it once the handshake is done; nothing before),
 * consuming it, and appends every byte of ciphertext waiting to be sent (records, handshake
 * messages) to *cipher. Returns 0, or -1 when the session failed or out of memory. */
int tls_conn_output(tls_conn_t *t, buf_t *plain, buf_t *cipher);

/* The reason of the last failure of this session, for a log line ("" when none). */
const char *tls_conn_error(const tls_conn_t *t);

#endif /* SLUICE_SERVER_TLS_H */
