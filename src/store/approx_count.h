/*
 * approx_count.h - how a node decides a key of an approximate rule locally: pure arithmetic over
 * one key's count and the times the caller gives (no clock, no I/O), so that it can be tested
 * alone and over simulated nodes (tests/prop/prop_approx_node.c).
 *
 * A node holds, per key, the key's remaining as of its last reply from the shared store (a
 * strict decision's, or a sync's) and the units it admitted since. It decides cost units:
 *
 *   strict   no count yet, or a count that arrived a sync interval ago or more (its syncs fail,
 *            its sync timer is late, or the key was idle): the decision goes to the store, and
 *            its reply is the new count. What the node admitted and has not sent goes first
 *            (approx_flush_begin), on the same connection, so the store counts it before it
 *            decides: a strict decision never misses the node's own admissions
 *   admit    what the count leaves once the node's own units the store may not hold yet are
 *            taken off (sending, flushing, admitted, and the costs of strict decisions on their
 *            way, deciding) >= cost: admitted += cost, no command
 *   refuse   otherwise, no command
 *
 * Every sync interval the node sends what it admitted (approx_sync_begin: a charge past the
 * limit, as SL.SETTLE with reserved 0 does) and the reply's remaining, which counts them, is the
 * new count (approx_sync_end). A sync that fails keeps its units to be sent again with the next
 * one (counted twice if it did reach the store: under-admission, never over-admission).
 *
 * The bound (docs/algorithms.md): a local decision at t from a count the store made at s misses
 * only other nodes' admissions the store had not seen at s, and theirs since. A node's units
 * reach the store within a sync interval and a one-way delay of their admission, or it stops
 * deciding locally (its count expires a sync interval after it arrived); and t - s is at most a
 * sync interval and the reply's delay. So over any window a key admits at most
 * limit + (nodes - 1) x rate x (2 x sync_interval + 2 x round trip), rate a node's peak rate of
 * admissions of the key.
 */
#ifndef SLUICE_STORE_APPROX_COUNT_H
#define SLUICE_STORE_APPROX_COUNT_H

#include <stdbool.h>
#include <stdint.h>

typedef struct approx_count {
    int64_t remaining; /* the key's remaining in the latest reply, units; -1: none yet */
    int64_t count_ns;  /* when the request that brought it was sent, the node's clock, ns */
    int64_t until_ns;  /* it is used until then: a sync interval after it arrived, ns */
    int64_t sync_ns;   /* the last sync was sent then, ns; 0 none */
    int64_t sending;   /* units in the sync on its way (the reply's count will hold them) */
    int64_t flushing;  /* units sent ahead of strict decisions, not yet answered */
    int64_t deciding;  /* the costs of strict decisions on their way: the count in hand does
                          not hold them, and the store may admit each */
    int64_t admitted;  /* units admitted here and not yet sent */
    bool asked;        /* a decision came since the last sync was sent */
    bool syncing;      /* a sync is on its way */
} approx_count_t;

/* A key new to the node: no count. */
#define APPROX_COUNT_NEW ((approx_count_t){.remaining = -1})

typedef enum approx_verdict {
    APPROX_STRICT = 0, /* decide at the store; approx_reply() with its answer */
    APPROX_ADMIT = 1,  /* admitted here (counted in admitted) */
    APPROX_REFUSE = 2, /* refused here */
} approx_verdict_t;

/* Decides cost (>= 1) units at now_ns. APPROX_STRICT counts cost as deciding until the
 * caller's approx_strict_end, which it must call once with the same cost, whatever the answer. */
approx_verdict_t approx_decide(approx_count_t *c, int64_t cost, int64_t now_ns);

/* The answer, at now_ns, to a strict decision of cost sent at sent_ns: ok with the key's
 * remaining afterwards (approx_reply), or failed (no count). */
void approx_strict_end(approx_count_t *c, int64_t cost, bool ok, int64_t remaining, int64_t sent_ns,
                       int64_t sync_ns, int64_t now_ns);

/* The units the key's count leaves for a decision here now (>= 0 when there is a count). */
int64_t approx_left(const approx_count_t *c);

/* Whether a sync is due for the key at now_ns: none is on its way, the last was sent at least a
 * sync interval ago (before the first: the first count was asked for that long ago), and it has
 * units to send or was asked about since the last sync. */
bool approx_sync_due(const approx_count_t *c, int64_t sync_ns, int64_t now_ns);

/* A sync is sent at now_ns: returns the units it charges (what was admitted), which move to
 * sending. */
int64_t approx_sync_begin(approx_count_t *c, int64_t now_ns);

/* The answer, at now_ns, to the sync sent at sent_ns: ok with the key's remaining afterwards
 * (the count, used until now_ns + sync_ns), or failed (its units go back to admitted, to be
 * sent again). */
void approx_sync_end(approx_count_t *c, bool ok, int64_t remaining, int64_t sent_ns,
                     int64_t sync_ns, int64_t now_ns);

/* The answer, at now_ns, to a strict decision sent at sent_ns: the key's remaining afterwards
 * (it holds neither admitted nor, perhaps, sending: both stay subtracted), used until now_ns +
 * sync_ns. */
void approx_reply(approx_count_t *c, int64_t remaining, int64_t sent_ns, int64_t sync_ns,
                  int64_t now_ns);

/* A strict decision is about to be sent: returns the units admitted here and not yet sent
 * (0: none), which the caller sends first, as a sync is sent, on the same connection; they move
 * to flushing until approx_flush_end. */
int64_t approx_flush_begin(approx_count_t *c);

/* The answer, at now_ns, to a flush of units sent at sent_ns: ok with the key's remaining
 * afterwards (a count, as a sync's), or failed (the units go back to admitted). */
void approx_flush_end(approx_count_t *c, int64_t units, bool ok, int64_t remaining, int64_t sent_ns,
                      int64_t sync_ns, int64_t now_ns);

/* The count is forgotten at now_ns (the rule's numbers changed, the key was reset): the next
 * decision is strict, and no reply to a request sent before now_ns is taken as a count. What
 * was admitted stays to be sent. */
void approx_forget(approx_count_t *c, int64_t now_ns);

#endif /* SLUICE_STORE_APPROX_COUNT_H */
