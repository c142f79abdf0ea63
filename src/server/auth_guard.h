/*
 * auth_guard.h - the admin door's defence against guessing: failed secrets (a RESP AUTH or
 * HELLO AUTH with a wrong password, an HTTP request with a wrong admin token) counted per client
 * address, and the replies to an address that keeps failing held back, longer each time.
 *
 * The first GUARD_FREE_FAILURES failures from an address within GUARD_WINDOW_NS are answered at
 * once (a person mistyping). Each failure after them is held back: the first by GUARD_DELAY_NS,
 * each next one twice as long as the one before, up to GUARD_DELAY_MAX_NS. The replies of one
 * address leave one after another, each its delay after the one before (whatever connection it
 * came on), so parallel connections and pipelined AUTHs gain nothing: one address gets about one
 * answer a second. A reply that waits more than GUARD_QUEUE_MAX_NS behind the others closes its
 * connection after it, so a connection holds a bounded number of waiting replies (about 15),
 * and an address at most that many per connection it keeps open. A success clears its address;
 * a correct secret is never held back, so an attacker sharing an address (a NAT) with its owners
 * slows only their failures.
 *
 * IPv4 clients are counted by address, IPv6 ones by /64 (one host commonly owns a whole /64).
 * The table is bounded: GUARD_ADDRESSES entries, found by a seeded hash within GUARD_PROBE slots;
 * an entry whose last failure is older than the window is free again. An address that finds no
 * free slot (an attacker using more than a table of addresses in a minute) is counted in one
 * shared entry, which is therefore slowed soonest: the table never grows and the cap fails
 * closed.
 *
 * Thread-safe: one mutex, taken only for a failure and for a success while the table holds
 * anything. Time is the caller's, monotonic nanoseconds.
 */
#ifndef SLUICE_SERVER_AUTH_GUARD_H
#define SLUICE_SERVER_AUTH_GUARD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto/netaddr.h"

#define GUARD_FREE_FAILURES 5                    /* answered at once, per window */
#define GUARD_WINDOW_NS     INT64_C(60000000000) /* failures older than this are forgotten */
#define GUARD_DELAY_NS      INT64_C(50000000)    /* the first held reply's delay: 50 ms */
#define GUARD_DELAY_MAX_NS  INT64_C(1000000000)  /* the longest one: 1 s */
#define GUARD_QUEUE_MAX_NS  INT64_C(10000000000) /* a reply waiting longer closes: 10 s */
#define GUARD_ADDRESSES     4096                 /* entries in the table (40 bytes each) */
#define GUARD_PROBE         16                   /* slots an address may take */

typedef struct guard guard_t;

/* What to do with the reply to one failure. */
typedef struct guard_verdict {
    int64_t hold_ns;   /* hold the reply back this long; 0: answer at once. At most
                          GUARD_DELAY_MAX_NS per failure in the window */
    uint32_t failures; /* from this address (or the shared entry) in the window, this one too */
    bool close;        /* close the connection after the reply: it waits over GUARD_QUEUE_MAX_NS */
    bool shared;       /* counted in the shared entry (the table had no room for the address) */
} guard_verdict_t;

/* The process's table (sluiced's), seeded at its first use. Never freed. */
guard_t *guard_global(void);

/* A table of its own (tests), its hash seeded with seed. NULL when out of memory. */
guard_t *guard_create(uint64_t seed);
void guard_free(guard_t *g);

/* Records a failure from addr (family 0, an unknown peer, counts as one address of its own) at
 * now_ns and says how to answer it. */
guard_verdict_t guard_fail(guard_t *g, const netaddr_t *addr, int64_t now_ns);

/* A success from addr: its failures are forgotten (the shared entry's are not). */
void guard_success(guard_t *g, const netaddr_t *addr);

/* Entries holding an address whose last failure is at most GUARD_WINDOW_NS before now_ns. */
size_t guard_live(guard_t *g, int64_t now_ns);

#endif /* SLUICE_SERVER_AUTH_GUARD_H */
