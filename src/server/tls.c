/*
 * tls.c - TLS sessions over memory buffers (see tls.h), with OpenSSL.
 *
 * Each session is an SSL object between two memory BIOs: rbio gets the ciphertext conn.c read,
 * SSL_read() turns it into plaintext; SSL_write() puts records into wbio, which conn.c drains
 * to the socket. Memory BIOs never block, so a session never waits on the socket: a read that
 * needs more ciphertext says so (SSL_ERROR_WANT_READ) and the next read brings it.
 *
 * Loading names the setting and the file of every failure, and warns of a certificate that has
 * expired or is not yet valid (at start and on every reload).
 *
 * The SSL_CTX is shared by every loop. A reload (SIGHUP) builds a new one and swaps it under
 * the context's mutex, which tls_conn_new() takes to make each session: sessions hold a
 * reference to the SSL_CTX they were made from, so the old one lives while they do.
 */
#include "server/tls.h"

#include <errno.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "engine/log.h"

#define TLS_READ_MAX   (64 * 1024) /* plaintext read per SSL_read, bytes */
#define TLS_PATH_MAX   4096        /* the files' paths, bytes */
#define TLS_REASON_MAX 256         /* a session's last failure, bytes */

struct tls_ctx {
    pthread_mutex_t lock; /* guards ssl_ctx against a reload */
    SSL_CTX *ssl_ctx;
    char cert[TLS_PATH_MAX], key[TLS_PATH_MAX], client_ca[TLS_PATH_MAX]; /* "": none */
    _Atomic int64_t not_after_s; /* the certificate in use: valid until, unix seconds */
};

struct tls_conn {
    SSL *ssl;
    BIO *rbio; /* ciphertext in (owned by ssl) */
    BIO *wbio; /* ciphertext out (owned by ssl) */
    const char *alpn;
    char reason[TLS_REASON_MAX];
};

/* OpenSSL's queued errors as one line (the last, most specific, first), then cleared. */
static void ssl_reason(char *out, size_t cap)
{
    unsigned long e = ERR_get_error(), last = e;
    while (e != 0) {
        last = e;
        e = ERR_get_error();
    }
    if (last == 0) {
        snprintf(out, cap, "unknown error");
        return;
    }
    ERR_error_string_n(last, out, cap);
}

/* ALPN: the listener's protocol if the client offers it; a client that offers others only is
 * refused (RFC 7301); one that offers none gets none. */
static int alpn_select(SSL *ssl, const unsigned char **out, unsigned char *outlen,
                       const unsigned char *in, unsigned int inlen, void *arg)
{
    (void)arg;
    tls_conn_t *t = SSL_get_app_data(ssl);
    if (t == NULL || t->alpn == NULL) {
        return SSL_TLSEXT_ERR_NOACK;
    }
    size_t want = strlen(t->alpn);
    for (unsigned int i = 0; i < inlen;) {
        unsigned int n = in[i];
        if (i + 1 + n > inlen) {
            break;
        }
        if (n == want && memcmp(in + i + 1, t->alpn, n) == 0) {
            *out = in + i + 1;
            *outlen = (unsigned char)n;
            return SSL_TLSEXT_ERR_OK;
        }
        i += 1 + n;
    }
    return SSL_TLSEXT_ERR_ALERT_FATAL;
}

/* Whether path (the file of setting flag) can be opened for reading, before OpenSSL reads it:
 * else err names the setting, the file and the system's reason ("--tls-key /x/key.pem: No such
 * file or directory"), where OpenSSL would say only "system lib". */
static bool file_readable(const char *flag, const char *path, char *err)
{
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        snprintf(err, TLS_ERR_MAX, "%s %.400s: %s", flag, path, strerror(errno));
        return false;
    }
    struct stat st;
    bool dir = fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode);
    fclose(f);
    if (dir) {
        snprintf(err, TLS_ERR_MAX, "%s %.400s: %s", flag, path, strerror(EISDIR));
    }
    return !dir;
}

/* An ASN1 time as unix seconds; false when it is not a time. */
static bool asn1_unix(const ASN1_TIME *t, int64_t *out)
{
    struct tm tm;
    if (t == NULL || ASN1_TIME_to_tm(t, &tm) != 1) {
        return false;
    }
    *out = (int64_t)timegm(&tm);
    return true;
}

/* The certificate's validity, checked against the clock: a warning for one that has expired or
 * is not valid yet (clients that check it will refuse every connection). Returns its notAfter,
 * unix seconds (0 when unknown). */
static int64_t check_dates(const tls_ctx_t *ctx, SSL_CTX *c)
{
    X509 *x = SSL_CTX_get0_certificate(c);
    int64_t before = 0, after = 0, now = (int64_t)time(NULL);
    if (x == NULL || !asn1_unix(X509_get0_notBefore(x), &before) ||
        !asn1_unix(X509_get0_notAfter(x), &after)) {
        return 0;
    }
    char when[32];
    if (after < now) {
        strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S UTC", gmtime(&(time_t){(time_t)after}));
        log_warn("TLS certificate %s (--tls-cert) expired on %s, %lld days ago: clients that check "
                 "it refuse every TLS connection; renew it and send SIGHUP",
                 ctx->cert, when, (long long)((now - after) / 86400));
    } else if (before > now) {
        strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S UTC", gmtime(&(time_t){(time_t)before}));
        log_warn("TLS certificate %s (--tls-cert) is not valid before %s: clients that check it "
                 "refuse every TLS connection until then (is this host's clock right?)",
                 ctx->cert, when);
    }
    return after;
}

/* The client CAs of --tls-client-ca into c: their client certificates are required. */
static bool load_client_ca(const tls_ctx_t *ctx, SSL_CTX *c)
{
    if (SSL_CTX_load_verify_locations(c, ctx->client_ca, NULL) != 1) {
        return false;
    }
    STACK_OF(X509_NAME) *names = SSL_load_client_CA_file(ctx->client_ca);
    if (names != NULL) {
        SSL_CTX_set_client_CA_list(c, names);
    }
    SSL_CTX_set_verify(c, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, NULL);
    return true;
}

/* A new SSL_CTX from ctx's files (and their certificate's notAfter in *not_after_s), or NULL
 * with err naming the setting and the file. */
static SSL_CTX *ctx_load(const tls_ctx_t *ctx, int64_t *not_after_s, char *err)
{
    char why[256];
    if (!file_readable("--tls-cert", ctx->cert, err) ||
        !file_readable("--tls-key", ctx->key, err) ||
        (ctx->client_ca[0] != '\0' && !file_readable("--tls-client-ca", ctx->client_ca, err))) {
        return NULL;
    }
    SSL_CTX *c = SSL_CTX_new(TLS_server_method());
    if (c == NULL) {
        ssl_reason(why, sizeof why);
        snprintf(err, TLS_ERR_MAX, "TLS: %s", why);
        return NULL;
    }
    SSL_CTX_set_min_proto_version(c, TLS1_2_VERSION);
    SSL_CTX_set_options(c, SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE);
    SSL_CTX_set_mode(c, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_RELEASE_BUFFERS);
    const char *flag = "--tls-cert", *file = ctx->cert, *what = "not a PEM certificate chain";
    int ok = SSL_CTX_use_certificate_chain_file(c, ctx->cert) == 1;
    if (ok) {
        flag = "--tls-key";
        file = ctx->key;
        what = "not a PEM private key";
        ok = SSL_CTX_use_PrivateKey_file(c, ctx->key, SSL_FILETYPE_PEM) == 1;
        if (!ok && ERR_GET_REASON(ERR_peek_last_error()) == X509_R_KEY_VALUES_MISMATCH) {
            what = "not the key of the certificate in --tls-cert"; /* OpenSSL 3 checks here */
        }
    }
    if (ok) {
        what = "not the key of the certificate in --tls-cert";
        ok = SSL_CTX_check_private_key(c) == 1;
    }
    if (ok && ctx->client_ca[0] != '\0') {
        flag = "--tls-client-ca";
        file = ctx->client_ca;
        what = "not PEM CA certificates";
        ok = load_client_ca(ctx, c);
    }
    if (!ok) {
        ssl_reason(why, sizeof why);
        snprintf(err, TLS_ERR_MAX, "%s %.200s: %s (%.200s)", flag, file, what, why);
        SSL_CTX_free(c);
        return NULL;
    }
    SSL_CTX_set_alpn_select_cb(c, alpn_select, NULL);
    *not_after_s = check_dates(ctx, c);
    return c;
}

int tls_ctx_new(const char *cert_path, const char *key_path, const char *client_ca, tls_ctx_t **out,
                char *err)
{
    tls_ctx_t *ctx = calloc(1, sizeof *ctx);
    if (ctx == NULL) {
        snprintf(err, TLS_ERR_MAX, "TLS: out of memory");
        return -1;
    }
    if (snprintf(ctx->cert, sizeof ctx->cert, "%s", cert_path) >= (int)sizeof ctx->cert ||
        snprintf(ctx->key, sizeof ctx->key, "%s", key_path) >= (int)sizeof ctx->key ||
        snprintf(ctx->client_ca, sizeof ctx->client_ca, "%s", client_ca ? client_ca : "") >=
            (int)sizeof ctx->client_ca) {
        snprintf(err, TLS_ERR_MAX, "TLS: a path longer than %d bytes", TLS_PATH_MAX - 1);
        free(ctx);
        return -1;
    }
    int64_t not_after_s = 0;
    if ((ctx->ssl_ctx = ctx_load(ctx, &not_after_s, err)) == NULL) {
        free(ctx);
        return -1;
    }
    atomic_store(&ctx->not_after_s, not_after_s);
    pthread_mutex_init(&ctx->lock, NULL);
    *out = ctx;
    return 0;
}

int tls_ctx_reload(tls_ctx_t *ctx, char *err)
{
    int64_t not_after_s = 0;
    SSL_CTX *fresh = ctx_load(ctx, &not_after_s, err);
    if (fresh == NULL) {
        return -1;
    }
    pthread_mutex_lock(&ctx->lock);
    SSL_CTX *old = ctx->ssl_ctx;
    ctx->ssl_ctx = fresh;
    pthread_mutex_unlock(&ctx->lock);
    atomic_store(&ctx->not_after_s, not_after_s);
    SSL_CTX_free(old); /* sessions made from it hold references of their own */
    return 0;
}

int64_t tls_ctx_not_after(const tls_ctx_t *ctx)
{
    return atomic_load(&((tls_ctx_t *)ctx)->not_after_s);
}

void tls_ctx_free(tls_ctx_t *ctx)
{
    if (ctx == NULL) {
        return;
    }
    SSL_CTX_free(ctx->ssl_ctx);
    pthread_mutex_destroy(&ctx->lock);
    free(ctx);
}

tls_conn_t *tls_conn_new(tls_ctx_t *ctx, const char *alpn)
{
    tls_conn_t *t = calloc(1, sizeof *t);
    if (t == NULL) {
        return NULL;
    }
    t->alpn = alpn;
    pthread_mutex_lock(&ctx->lock);
    t->ssl = SSL_new(ctx->ssl_ctx);
    pthread_mutex_unlock(&ctx->lock);
    t->rbio = BIO_new(BIO_s_mem());
    t->wbio = BIO_new(BIO_s_mem());
    if (t->ssl == NULL || t->rbio == NULL || t->wbio == NULL) {
        BIO_free(t->rbio);
        BIO_free(t->wbio);
        SSL_free(t->ssl);
        free(t);
        ERR_clear_error();
        return NULL;
    }
    /* an empty memory BIO says "retry" rather than EOF */
    BIO_set_mem_eof_return(t->rbio, -1);
    BIO_set_mem_eof_return(t->wbio, -1);
    SSL_set_bio(t->ssl, t->rbio, t->wbio);
    SSL_set_app_data(t->ssl, t);
    SSL_set_accept_state(t->ssl);
    return t;
}

void tls_conn_free(tls_conn_t *t)
{
    if (t == NULL) {
        return;
    }
    SSL_free(t->ssl); /* and its BIOs */
    free(t);
}

const char *tls_conn_error(const tls_conn_t *t)
{
    return t->reason;
}

/* Records why the session failed (for the caller's log), from SSL_get_error's code. */
static void conn_fail(tls_conn_t *t, int code)
{
    if (code == SSL_ERROR_SSL) {
        ssl_reason(t->reason, sizeof t->reason);
    } else {
        snprintf(t->reason, sizeof t->reason, "TLS error %d", code);
        ERR_clear_error();
    }
}

enum tls_input tls_conn_input(tls_conn_t *t, const char *data, size_t n, tls_room_fn room,
                              tls_added_fn added, void *arg)
{
    while (n > 0) {
        int w = BIO_write(t->rbio, data, n > INT32_MAX ? INT32_MAX : (int)n);
        if (w <= 0) {
            snprintf(t->reason, sizeof t->reason, "out of memory");
            return TLS_INPUT_ERROR;
        }
        data += w;
        n -= (size_t)w;
    }
    for (;;) {
        size_t len = 0;
        char *to = room(arg, &len);
        if (to == NULL) {
            snprintf(t->reason, sizeof t->reason, "out of memory");
            return TLS_INPUT_ERROR;
        }
        int r = SSL_read(t->ssl, to, len > TLS_READ_MAX ? TLS_READ_MAX : (int)len);
        if (r > 0) {
            added(arg, (size_t)r);
            continue;
        }
        int code = SSL_get_error(t->ssl, r);
        if (code == SSL_ERROR_WANT_READ || code == SSL_ERROR_WANT_WRITE) {
            return TLS_INPUT_OK; /* needs more ciphertext; any handshake reply is in wbio */
        }
        if (code == SSL_ERROR_ZERO_RETURN) {
            return TLS_INPUT_CLOSED;
        }
        conn_fail(t, code);
        return TLS_INPUT_ERROR;
    }
}

int tls_conn_output(tls_conn_t *t, buf_t *plain, buf_t *cipher)
{
    while (plain->len > 0 && SSL_is_init_finished(t->ssl)) {
        int w =
            SSL_write(t->ssl, plain->data, plain->len > INT32_MAX ? INT32_MAX : (int)plain->len);
        if (w <= 0) {
            int code = SSL_get_error(t->ssl, w);
            if (code == SSL_ERROR_WANT_READ || code == SSL_ERROR_WANT_WRITE) {
                break;
            }
            conn_fail(t, code);
            return -1;
        }
        buf_consume(plain, (size_t)w);
    }
    size_t pending = BIO_ctrl_pending(t->wbio);
    if (pending == 0) {
        return 0;
    }
    if (!buf_reserve(cipher, pending)) {
        snprintf(t->reason, sizeof t->reason, "out of memory");
        return -1;
    }
    int r = BIO_read(t->wbio, cipher->data + cipher->len, (int)pending);
    if (r > 0) {
        cipher->len += (size_t)r;
    }
    return 0;
}
