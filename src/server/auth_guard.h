/*
 * auth_guard.h - the admin door's defence against guessing: attempts at a secret (a RESP AUTH or
 * HELLO AUTH, an HTTP request carrying an admin token) judged per client address, the failures
 * counted, and an address that keeps failing shut out and its replies held back.
 *
 * A failure is a wrong secret, or any attempt while the address is hot. An address is hot while
 * it has more than GUARD_FREE_FAILURES failures in its window: failures are forgotten once
 * GUARD_WINDOW_NS pass with none from the address. While an address is hot, every attempt from it
 * is refused whatever its secret (the verdict does not look at it: a right one gets what a wrong
 * one would, so neither the answer, nor its timing, nor any side effect tells them apart) and
 * counted as a failure, so an address stays hot until a window after its last attempt. A success
 * never clears failures. Clients sharing an address with an attacker (a NAT) therefore cannot
 * authenticate while it is hot; connections already authenticated are not touched.
 *
 * The first GUARD_FREE_FAILURES failures in a window are answered at once (a person mistyping).
 * Each failure after them is held back: the first by GUARD_DELAY_NS, each next one twice as long
 * as the one before, up to GUARD_DELAY_MAX_NS, and each due that long after the address's
 * previous held reply (whatever connection it came on), so parallel connections and pipelines
 * gain nothing. A failure whose reply would be due more than GUARD_QUEUE_MAX_NS from now is not
 * queued: the verdict says to close its connection at once, unanswered, and the queue does not
 * grow. An address thus has at most GUARD_QUEUE_MAX_NS of replies held back at any time.
 *
 * IPv4 clients are counted by address, IPv6 ones by /64 (one host commonly owns a whole /64).
 * The table is bounded: GUARD_ADDRESSES entries, found by a seeded hash within GUARD_PROBE slots;
 * an entry whose last failure is older than the window is free again. An address that finds
 * neither its entry nor a free slot (an attacker using more than a table of addresses in a
 * minute) is judged by one shared entry, which all such addresses fail into: the table never
 * grows, and the cap fails closed (while the shared entry is hot, those addresses are shut out).
 *
 * Thread-safe: one mutex, taken for every attempt. Time is the caller's, monotonic nanoseconds.
 */
#ifndef SLUICE_SERVER_AUTH_GUARD_H
#define SLUICE_SERVER_AUTH_GUARD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto/netaddr.h"

#define GUARD_FREE_FAILURES 5                    /* answered at once, per window */
#define GUARD_WINDOW_NS     INT64_C(60000000000) /* failures go this long after the last one */
#define GUARD_DELAY_NS      INT64_C(50000000)    /* the first held reply's delay: 50 ms */
#define GUARD_DELAY_MAX_NS  INT64_C(1000000000)  /* the longest one: 1 s */
#define GUARD_QUEUE_MAX_NS  INT64_C(10000000000) /* a reply due later is not queued: 10 s */
#define GUARD_ADDRESSES     4096                 /* entries in the table (40 bytes each) */
#define GUARD_PROBE         16                   /* slots an address may take */

typedef struct guard guard_t;

/* How to answer one attempt. */
typedef struct guard_verdict {
    bool let_in;       /* the secret was right and the address not hot: accept it */
    bool hot;          /* refused without looking at the secret: the address is hot */
    bool drop;         /* refused, and its reply would be due more than GUARD_QUEUE_MAX_NS from
                          now: close the connection at once without an answer */
    int64_t hold_ns;   /* refused (not dropped): hold the reply back this long; 0: at once */
    int64_t retry_ns;  /* held back: from when the reply leaves until the address is no longer
                          hot, if nothing more comes from it; 0 otherwise */
    uint32_t failures; /* of the address (or the shared entry) in its window, this one too */
    bool shared;       /* judged by the shared entry (the table had no room for the address) */
} guard_verdict_t;

/* The process's table (sluiced's), seeded at its first use. Never freed. */
guard_t *guard_global(void);

/* A table of its own (tests), its hash seeded with seed. NULL when out of memory. */
guard_t *guard_create(uint64_t seed);
void guard_free(guard_t *g);

/*
 * One attempt at a secret from addr (family 0, an unknown peer, counts as one address of its
 * own) at now_ns. right says whether the secret given was the right one: the caller compares
 * before calling, in time that does not depend on where a wrong secret differs, and acts on the
 * secret (logs in, changes anything) only when the verdict lets it in. While the address is hot,
 * right is not looked at: the verdict is the same either way. A refusal is counted as a failure.
 */
guard_verdict_t guard_attempt(guard_t *g, const netaddr_t *addr, int64_t now_ns, bool right);

/* Entries holding an address whose last failure is at most GUARD_WINDOW_NS before now_ns. */
size_t guard_live(guard_t *g, int64_t now_ns);

#endif /* SLUICE_SERVER_AUTH_GUARD_H */
