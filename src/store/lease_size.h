/*
 * lease_size.h - how many units a node asks for when it leases part of a key's quota, and when
 * its copy of a lease ends: pure arithmetic over times and counts the caller gives (no clock, no
 * state of its own), so that it can be tested alone.
 *
 * Size: the node's arrival rate for the key, r (units per second, an exponentially weighted
 * mean over a few lease times), sets want = ceil(1.25 * r * L), L the lease time: a little more
 * than the node will spend before the lease ends. It is at least the cost at hand (and 1), and
 * at most a quarter of what the key had remaining at its last reply, so that one node cannot
 * take a key's whole quota and a key near its limit is leased a unit at a time (which is
 * strict).
 *
 * End: the lease ends on Redis's clock at until; the node ends its copy at (its own clock when
 * it sent the request) + (until - at). The grant came after the send, so that is no later than
 * the true end whatever the offset of the two clocks; only their rates must agree over one
 * lease time.
 */
#ifndef SLUICE_STORE_LEASE_SIZE_H
#define SLUICE_STORE_LEASE_SIZE_H

#include <stdint.h>

#include "sluice/sluice.h"

#define LEASE_RATE_HORIZON 4 /* the rate's mean weighs about this many lease times */
#define LEASE_HEADROOM     1.25
#define LEASE_SHARE        4 /* a lease takes at most 1 / LEASE_SHARE of what remains */

/*
 * The arrival rate after `units` arrived over the last elapsed_ns, from rate_per_s before:
 * a mean weighted by elapsed / (elapsed + horizon_ns), so that a burst of samples close together
 * moves it as one sample over their span would. A first sample (rate 0) is taken as it is.
 * elapsed_ns <= 0 changes nothing. Units per second, >= 0.
 */
double lease_rate_update(double rate_per_s, int64_t units, int64_t elapsed_ns, int64_t horizon_ns);

/*
 * The units to ask for: ceil(LEASE_HEADROOM * rate * lease_ns), at most remaining /
 * LEASE_SHARE (remaining < 0: not known, no cap), and at least max(cost, 1). Never above
 * SL_COUNT_MAX.
 */
int64_t lease_want(double rate_per_s, int64_t lease_ns, int64_t remaining, int64_t cost);

/* The node's end of its copy of lease, asked for at sent_ns on the node's clock. */
int64_t lease_local_end(int64_t sent_ns, const sl_lease_t *lease);

#endif /* SLUICE_STORE_LEASE_SIZE_H */
