/*
 * rls_plan.h - how sluiced decides Envoy's rate limit service request, whatever carried it
 * (gRPC's ShouldRateLimit in grpc_calls.c, the HTTP JSON route POST /json in http_rls.c): a
 * decoded request turned into engine checks (each descriptor's rule in force, or the limit it
 * asks for, on a key of its values), and the engine's decisions turned back into the statuses
 * of a response. Both carriers answer alike because both go through here.
 */
#ifndef SLUICE_SERVER_RLS_PLAN_H
#define SLUICE_SERVER_RLS_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto/buf.h"
#include "proto/rls.h"
#include "engine/engine.h"
#include "server/loop.h"

#define CHECK_NONE      (-1) /* no limit applies to the descriptor */
#define CHECK_UNLIMITED (-2) /* its limit is `unlimited` */

typedef struct rls_quota rls_quota_t;

/* One request while it is decided: what it asked, the keys of its checks, which check each
 * descriptor is. */
typedef struct rls_plan {
    rls_request_t req;               /* decoded (rls_request_decode / rls_request_from_json) */
    buf_t keys;                      /* its descriptors' keys, while they are decided */
    int check_of[ENGINE_CHECKS_MAX]; /* descriptor -> its check, or CHECK_NONE, CHECK_UNLIMITED */
    const rls_entry_t *priority[ENGINE_CHECKS_MAX]; /* descriptor -> its trailing `priority`
                                                       entry, taken by a rule with priorities;
                                                       NULL: none */
    uint64_t quota;        /* bit j: check j is in quota mode (its descriptor's quota_mode, or
                              --grpc-quota-mode) */
    bool quota_free;       /* --grpc-quota-mode and a descriptor with no limit: a quota descriptor
                              that is never over */
    rls_quota_t *q;        /* rls_decide with quota checks: its tries, until fn is called */
    engine_allowall_fn fn; /* rls_decide's */
    void *arg;
} rls_plan_t;

/*
 * The checks of p->req, made on connection c's loop, into checks[0, *n): each descriptor's rule
 * (an override's rule for one with a limit of its own) and key (in p->keys); p->check_of[i]
 * says which check descriptor i is, or that it has no limit. Returns 0, or -1 with err set (an
 * override that cannot be made, or no memory for the keys), or -2 with err set for the request's
 * own error (a trailing `priority` entry its rule does not have). The checks point into p.
 */
int rls_checks(conn_t *c, rls_plan_t *p, engine_check_t *checks, size_t *n, char *err,
               size_t err_len);

/*
 * Decides p's checks[0, n) (rls_checks'; n >= 1) on c's worker, as engine_allowall does with
 * flags, and calls fn(arg, ...) exactly once with every check's decision and the check that
 * refused the request (n when none did), at once or later. Quota checks (p->quota; not with
 * ENGINE_ALL_INDEPENDENT, which clears them): a try all or nothing over the checks still in;
 * refused by a quota check, that check is out (its decision is the try's: over its limit,
 * uncharged) and the rest are tried again, while a quota check is in. So a request is admitted
 * when every other check and at least one quota check have room, and charged to exactly those;
 * refused, it is charged nothing, as every refusal is. At most one try per quota check, with
 * any store. Returns ENGINE_OK, or engine_allowall's error for check *bad (fn never called).
 */
int rls_decide(conn_t *c, rls_plan_t *p, const engine_check_t *checks, size_t n, unsigned flags,
               engine_allowall_fn fn, void *arg, size_t *bad);

/*
 * The statuses of p's response, in request order, into st[0, p->req.n), from the engine's
 * decisions d[0, n) of its checks, `refused` being the check that refused the whole (n when none
 * did). Returns the overall code, as envoyproxy/ratelimit's: OVER_LIMIT when a descriptor not in
 * quota mode is refused, or when there are quota descriptors and every one is; else OK. A quota
 * descriptor over its limit has the status OVER_LIMIT either way.
 */
rls_code_t rls_statuses(const rls_plan_t *p, const engine_decision_t *d, size_t n, size_t refused,
                        rls_status_t *st);

/* The descriptor whose check is check `bad` (for an error naming it); 0 when none is. */
size_t rls_descriptor_of(const rls_plan_t *p, size_t bad);

/* Frees what p holds; p is then empty. */
void rls_plan_free(rls_plan_t *p);

#endif /* SLUICE_SERVER_RLS_PLAN_H */
