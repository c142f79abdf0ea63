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

#include "proto/buf.h"
#include "proto/rls.h"
#include "engine/engine.h"
#include "server/loop.h"

#define CHECK_NONE      (-1) /* no limit applies to the descriptor */
#define CHECK_UNLIMITED (-2) /* its limit is `unlimited` */

/* One request while it is decided: what it asked, the keys of its checks, which check each
 * descriptor is. */
typedef struct rls_plan {
    rls_request_t req;               /* decoded (rls_request_decode / rls_request_from_json) */
    buf_t keys;                      /* its descriptors' keys, while they are decided */
    int check_of[ENGINE_CHECKS_MAX]; /* descriptor -> its check, or CHECK_NONE, CHECK_UNLIMITED */
    const rls_entry_t *priority[ENGINE_CHECKS_MAX]; /* descriptor -> its trailing `priority`
                                                       entry, taken by a rule with priorities;
                                                       NULL: none */
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
 * The statuses of p's response, in request order, into st[0, p->req.n), from the engine's
 * decisions d[0, n) of its checks, `refused` being the check that refused the whole (n when none
 * did). Returns the overall code: OVER_LIMIT when any descriptor is refused, else OK.
 */
rls_code_t rls_statuses(const rls_plan_t *p, const engine_decision_t *d, size_t n, size_t refused,
                        rls_status_t *st);

/* The descriptor whose check is check `bad` (for an error naming it); 0 when none is. */
size_t rls_descriptor_of(const rls_plan_t *p, size_t bad);

/* Frees what p holds; p is then empty. */
void rls_plan_free(rls_plan_t *p);

#endif /* SLUICE_SERVER_RLS_PLAN_H */
