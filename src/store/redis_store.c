/*
 * redis_store.c - the Redis request store (see redis_store.h): each node's mode as a loop finds
 * it, decisions waiting for Redis and their deadlines, replies, and decide, settle, reset and
 * forget. redis_store_impl.h lists the store's other files.
 *
 * long because a decision's whole life (sent, waiting for a probe, past its deadline, answered,
 * answered late and given back) is one FIFO of pendings and the static steps over it.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>

#include <hiredis/hiredis.h>

#include "proto/buf.h"
#include "proto/throttle_args.h"
#include "store/lua_scripts.h"
#include "remote/overlimit_cache.h"
#include "store/redis_store_impl.h"

/* ---- answers ------------------------------------------------------------------------------ */

redis_inside_t *redis_store_enter(redis_store_t *s, redis_inside_t *in)
{
    redis_inside_t *before = s->inside;
    s->inside = in;
    return before;
}

void redis_store_leave(redis_store_t *s, redis_inside_t *before)
{
    s->inside = before;
}

void redis_store_answer(redis_store_t *s, redis_decision_fn fn, void *arg, int status,
                        const sl_decision_t *d, const char *err)
{
    redis_inside_t *in = s->inside;
    if (in == NULL || in->answered || in->fn != fn || in->arg != arg) {
        fn(arg, status, d, err);
        return;
    }
    in->answered = true;
    in->status = status;
    if (in->d != NULL && d != NULL && status == 0) {
        *in->d = *d;
    }
}

/* ---- nodes: their modes, probed on every connection ---------------------------------------- */

static node_state_t *node_at(redis_store_t *s, int idx)
{
    node_state_t *ns = &s->nodes[idx];
    if (ns->node == NULL) {
        const char *host;
        int port;
        rc_node_addr(s->client, idx, &host, &port);
        snprintf(ns->own.name, sizeof ns->own.name, "%s:%d", host, port);
        atomic_store_explicit(&ns->own.mode, s->shared->start_mode, memory_order_relaxed);
        shared_node_t *sn = rs_shared_node(s->shared, ns->own.name);
        ns->node = sn != NULL ? sn : &ns->own;
        ns->store = s;
        ns->index = idx;
    }
    return ns;
}

redis_mode_t rs_node_mode(redis_store_t *s, int idx)
{
    return (redis_mode_t)atomic_load_explicit(&node_at(s, idx)->node->mode, memory_order_relaxed);
}

int64_t rs_closed_ms(redis_store_t *s, int idx, int64_t rule_closed_ns, const sl_rule_t *rule,
                     int64_t now_ns)
{
    if (rule_closed_ns < 0) {
        return -1; /* an open rule */
    }
    int64_t from[2] = {rule_closed_ns, atomic_load_explicit(&node_at(s, idx)->node->closed_ns,
                                                            memory_order_relaxed)};
    int64_t latest = -1;
    for (int i = 0; i < 2; i++) {
        if (from[i] > 0 && now_ns - from[i] < rule->window_ns && from[i] > latest) {
            latest = from[i];
        }
    }
    return latest < 0 ? -1 : sl_ns_to_units_ceil(latest, SL_NS_PER_MS);
}

static void send_decision(redis_store_t *s, pending_t *p, int idx, bool full_script);
static void pending_release(redis_store_t *s, pending_t *p);

/* The answer to COMMAND INFO sl.throttle on a node: its mode, kept until INFO server's answer
 * (sent right after it) comes. */
static void on_probe(void *arg, redisReply *reply, const char *err)
{
    (void)err;
    node_state_t *ns = arg;
    ns->probe_mode = rs_probe_mode(reply);
}

/* The answer to INFO server on a node, the probe's second: its mode and run_id are recorded
 * (news told once, whichever loop sees it first: a new mode, data lost, a closed start from
 * now), then the decisions that waited for it are sent, in order. */
static void on_info(void *arg, redisReply *reply, const char *err)
{
    (void)err;
    node_state_t *ns = arg;
    redis_store_t *s = ns->store;
    ns->probing = false;
    char run_id[RUN_ID_MAX + 1];
    rs_probe_run_id(ns->probe_mode != 0 ? reply : NULL, run_id);
    redis_mode_t mode = ns->probe_mode;
    unsigned news = rs_node_probed(s->shared, ns->node, mode, run_id, sl_now_ns());
    ns->probe_mode = 0;
    if (news != 0 && s->on_node != NULL) {
        s->on_node(s->on_node_arg, ns->node->name, news, rs_node_mode(s, ns->index));
    }
    pending_t *p = ns->waiting;
    ns->waiting = ns->waiting_tail = NULL;
    while (p != NULL) {
        pending_t *next = p->wait_next;
        p->wait_next = NULL;
        if (p->answered) {
            pending_release(s, p); /* its deadline passed meanwhile */
        } else {
            send_decision(s, p, rc_key_node(s->client, p->rkey, p->rkey_len), false);
        }
        p = next;
    }
}

/* Asks node idx whether sluice.so is loaded, and its run_id (whether it is the Redis it was:
 * one that restarted or failed over has lost what it had not saved or replicated), unless that
 * is under way. Returns 0, or -1 when nothing could be sent. */
int rs_probe(redis_store_t *s, int idx)
{
    static const char cmd[] = "*3\r\n$7\r\nCOMMAND\r\n$4\r\nINFO\r\n$11\r\nsl.throttle\r\n";
    static const char info[] = "*2\r\n$4\r\nINFO\r\n$6\r\nserver\r\n";
    node_state_t *ns = node_at(s, idx);
    if (ns->probing) {
        return 0;
    }
    ns->probing = true; /* before sending: sending may connect, which probes too */
    ns->probe_mode = 0;
    if (rc_command_at(s->client, idx, cmd, sizeof cmd - 1, on_probe, ns) != 0) {
        ns->probing = false;
        return -1;
    }
    if (rc_command_at(s->client, idx, info, sizeof info - 1, on_info, ns) != 0) {
        on_info(ns, NULL, NULL); /* nothing learnt: the decisions waiting go (and fail) */
    }
    return 0;
}

/* A node's connection was lost or could not be made, or was made again. */
static void on_state(void *arg, int idx, bool up, const char *why)
{
    redis_store_t *s = arg;
    const char *node = node_at(s, idx)->node->name;
    if (up) {
        rs_event(s->shared, REDIS_EVENT_UP, "redis %s: connected again", node);
        return;
    }
    rs_event(s->shared, REDIS_EVENT_DOWN,
             "redis %s: %s: its decisions get their rule's on_store_error until it is back; "
             "reconnecting",
             node, why);
}

/* Every connection made to a node asks it first. A reconnect may be to a Redis that restarted
 * empty: every cached refusal is dropped. */
static void on_connect(void *arg, int idx, bool reconnect)
{
    redis_store_t *s = arg;
    if (reconnect) {
        rs_forget_all(s->shared);
    }
    rs_probe(s, idx);
}

/* ---- pending decisions and their deadlines ------------------------------------------------- */

static void unlink_pending(redis_store_t *s, pending_t *p)
{
    if (p->prev != NULL) {
        p->prev->next = p->next;
    } else {
        s->head = p->next;
    }
    if (p->next != NULL) {
        p->next->prev = p->prev;
    } else {
        s->tail = p->prev;
    }
    p->prev = p->next = NULL;
}

static void arm_timer(redis_store_t *s);

static void on_deadline(uv_timer_t *t)
{
    redis_store_t *s = t->data;
    uint64_t now_ms = uv_now(s->loop);
    while (s->head != NULL && (uint64_t)s->head->deadline_ms <= now_ms) {
        pending_t *p = s->head;
        unlink_pending(s, p);
        p->answered = true;
        atomic_fetch_add_explicit(&s->stats.timeouts, 1, memory_order_relaxed);
        rs_event(s->shared, REDIS_EVENT_TIMEOUT,
                 "redis: no reply within the decision timeout (%lld ms, --store-timeout)",
                 (long long)s->timeout_ms);
        redis_store_answer(s, p->fn, p->arg, -1, NULL,
                           "redis: no reply within the decision timeout");
        /* p itself is released when its reply (or the connection's failure) comes */
    }
    arm_timer(s);
}

/*
 * The timer is due at the deadline of the head at the time it was armed, and is not moved when
 * that head is answered: the head can only be replaced by a later deadline (FIFO), so the timer
 * at worst fires early, finds nothing due and re-arms for the new head. Only a FIFO gone empty or
 * a timer gone idle is handled here, not every reply.
 */
static void arm_timer(redis_store_t *s)
{
    if (s->head == NULL) {
        uv_timer_stop(&s->timer);
        return;
    }
    uint64_t now_ms = uv_now(s->loop);
    uint64_t due = (uint64_t)s->head->deadline_ms;
    uv_timer_start(&s->timer, on_deadline, due > now_ms ? due - now_ms : 0, 0);
}

static void pending_release(redis_store_t *s, pending_t *p)
{
    if (p->waits_out > 0) {
        p->release_due = true; /* a WAIT's reply still names it: freed then (on_wait) */
        return;
    }
    if (p->rkey != p->rkey_inline) {
        free(p->rkey);
    }
    freelist_put(&s->pending, p);
}

/* Appends p at the FIFO's tail with a deadline from now. */
static void pending_enqueue(redis_store_t *s, pending_t *p)
{
    p->deadline_ms = (int64_t)uv_now(s->loop) + s->timeout_ms;
    p->next = NULL;
    p->prev = s->tail;
    if (s->tail != NULL) {
        s->tail->next = p;
    } else {
        s->head = p;
    }
    s->tail = p;
    if (!uv_is_active((uv_handle_t *)&s->timer)) {
        arm_timer(s);
    }
}

static pending_t *pending_new(redis_store_t *s, const char *rkey, size_t rkey_len,
                              redis_decision_fn fn, void *arg)
{
    pending_t *p = freelist_get(&s->pending);
    if (p == NULL) {
        return NULL;
    }
    *p = (pending_t){.store = s, .fn = fn, .arg = arg, .rkey_len = rkey_len};
    p->rkey = p->rkey_inline;
    if (rkey_len > RKEY_INLINE && (p->rkey = malloc(rkey_len)) == NULL) {
        p->rkey = p->rkey_inline;
        pending_release(s, p);
        return NULL;
    }
    memcpy(p->rkey, rkey, rkey_len);
    pending_enqueue(s, p);
    return p;
}

/* ---- replies ------------------------------------------------------------------------------- */

/*
 * p (unlinked) was sent as a module command to a node without the module: sent again at the tail
 * with a fresh deadline (FIFO order is deadline order), in the mode of the node its key goes to
 * now; if that node is still believed to have the module, it is asked again first.
 */
static void resend_in_mode(redis_store_t *s, pending_t *p)
{
    p->mode_resends++;
    pending_enqueue(s, p);
    int idx = rc_key_node(s->client, p->rkey, p->rkey_len);
    if (rs_node_mode(s, idx) == p->mode) {
        rs_probe(s, idx);
    }
    send_decision(s, p, idx, false);
}

/*
 * A decision's refusal into the over-limit cache, if nothing gave its key room back since it was
 * sent and its numbers stay true while it is held: a refusal of one unit with none left. Nothing
 * but a refund changes such a key before the unit fits (its retry_after), where a refusal leaving
 * some units gains more as the key refills, and loses some to smaller admissions, before then.
 */
static void cache_answer(redis_store_t *s, const pending_t *p, const sl_decision_t *d)
{
    if (d->allowed || p->cost != 1 || d->remaining != 0 || p->reserve > 0) {
        return;
    }
    if (sl_rule_holds(&p->rule)) {
        return; /* a release frees units before the retry time, and may come from elsewhere */
    }
    uint64_t now_epoch =
        atomic_load_explicit(rs_epoch_of(s->shared, p->cache_hash), memory_order_acquire);
    if (now_epoch != p->epoch) {
        return;
    }
    olc_answer_t a = {.allowed = d->allowed,
                      .limit = d->limit,
                      .remaining = d->remaining,
                      .retry_after_ns = d->retry_after_ns,
                      .reset_after_ns = d->reset_after_ns,
                      .max_delay_ns = p->rule.max_delay_ns};
    olc_record(&s->cache, p->cache_hash, rs_cache_epoch(p->epoch, &p->rule), p->cost, &a,
               p->asked_ns);
}

/* Sends p (unlinked) again when its reply asks for it: NOSCRIPT (as EVAL, at the tail with a
 * fresh deadline: FIFO order is deadline order), or a module command on a node that lost the
 * module (in the node's mode). Returns whether it did. */
static bool resent(redis_store_t *s, pending_t *p, const redisReply *reply)
{
    if (reply == NULL || p->op == OP_RESET) {
        return false;
    }
    if (reply->type == REDIS_REPLY_ERROR && strncmp(reply->str, "NOSCRIPT", 8) == 0) {
        atomic_fetch_add_explicit(&s->stats.noscript, 1, memory_order_relaxed);
        pending_enqueue(s, p);
        send_decision(s, p, rc_key_node(s->client, p->rkey, p->rkey_len), true);
        return true;
    }
    if (p->mode == REDIS_MODE_MODULE && rs_is_unknown_command(reply) &&
        p->mode_resends < MODE_RESENDS_MAX) {
        resend_in_mode(s, p);
        return true;
    }
    return false;
}

/* p (unlinked) failed: a store error, counted and told, and answered. */
static void answer_error(redis_store_t *s, pending_t *p, const char *msg)
{
    redis_decision_fn fn = p->fn;
    void *fn_arg = p->arg;
    atomic_fetch_add_explicit(&s->stats.errors, 1, memory_order_relaxed);
    rs_event(s->shared, REDIS_EVENT_ERROR, "%s", msg);
    pending_release(s, p);
    redis_store_answer(s, fn, fn_arg, -1, NULL, msg);
}

/* p's (an acquire or a release, unlinked) reply, not an error reply: its answer. */
static void answer_hold(redis_store_t *s, pending_t *p, const redisReply *reply)
{
    redis_decision_fn fn = p->fn;
    void *fn_arg = p->arg;
    sl_decision_t d = {.allowed = true, .limit = p->rule.capacity};
    uint64_t id = 0;
    bool ok = p->op == OP_ACQUIRE ? rs_parse_acquire(reply, p->mode, &d, &id)
                                  : reply->type == REDIS_REPLY_STATUS;
    if (!ok) {
        answer_error(s, p, "redis: unexpected reply to an acquire or a release");
        return;
    }
    if (p->op == OP_RELEASE) {
        rs_forget_key(s, &p->rule, p->rkey, p->rkey_len); /* room given back */
        id = p->hold_id;
    } else if (p->beyond) {
        d.allowed = false; /* the key as it stands, refusing a cost it can never take */
        d.retry_after_ns = -1;
        d.remaining = d.remaining > p->reserve ? d.remaining - p->reserve : 0;
    }
    if (p->hold_out != NULL) {
        *p->hold_out = (sl_hold_t){
            .id = id, .until_ns = id != 0 && p->op == OP_ACQUIRE ? p->asked_ns + p->hold_ns : 0};
    }
    pending_release(s, p);
    redis_store_answer(s, fn, fn_arg, 0, &d, NULL);
}

/* p's (unlinked) reply, not an error reply: its answer. */
static void answer_reply(redis_store_t *s, pending_t *p, const redisReply *reply)
{
    redis_decision_fn fn = p->fn;
    void *fn_arg = p->arg;
    sl_decision_t d;
    if (p->op == OP_RESET) {
        rs_forget_key(s, &p->rule, p->rkey, p->rkey_len); /* refusals sent before the DEL ran */
        pending_release(s, p);
        redis_store_answer(s, fn, fn_arg, 0, NULL, NULL);
        return;
    }
    if (p->op == OP_ACQUIRE || p->op == OP_RELEASE) {
        answer_hold(s, p, reply);
        return;
    }
    bool ok = p->op == OP_LEASE ? rs_parse_lease(reply, p->mode, &p->rule, p->lease_out, &d)
                                : rs_parse_decision(reply, p->mode, &d);
    if (!ok) {
        answer_error(s, p,
                     p->op == OP_LEASE ? "redis: unexpected reply to a lease"
                                       : "redis: unexpected reply to a decision");
        return;
    }
    if (p->op == OP_DECIDE && p->beyond) {
        d.allowed = false; /* the key as it stands, refusing a cost it can never take */
        d.retry_after_ns = -1;
        d.remaining = d.remaining > p->reserve ? d.remaining - p->reserve : 0; /* its priority's */
    } else if (p->op == OP_DECIDE) {
        cache_answer(s, p, &d);
    } else if (p->op == OP_RETURN || (p->op == OP_SETTLE && p->actual != p->reserved)) {
        /* room given back or charged: refusals Redis gave before the settle ran are stale too */
        rs_forget_key(s, &p->rule, p->rkey, p->rkey_len);
    }
    pending_release(s, p);
    redis_store_answer(s, fn, fn_arg, 0, &d, NULL);
}

/* The answer to a late admission's refund (refund_late): a failure leaves the key charged for
 * a request it did not admit (under-admission until the window turns), counted and told. */
static void on_late_refund(void *arg, int status, const sl_decision_t *d, const char *err)
{
    (void)d;
    redis_store_t *s = arg;
    if (status == 0) {
        atomic_fetch_add_explicit(&s->stats.late_refunds, 1, memory_order_relaxed);
        return;
    }
    rs_event(s->shared, REDIS_EVENT_LATE_REFUND_FAILED,
             "redis: a decision answered without Redis and admitted by it later could not be "
             "given back (%s): its key stays charged",
             err != NULL ? err : "no reply");
}

/*
 * p (still linked nowhere) was answered at its deadline, without Redis (on_store_error decided
 * it), and reply is what Redis did when the command ran after all. A decision Redis admitted
 * charged units for a request it did not admit: they are given back, as a settle of the cost to
 * 0 (the path an all-or-nothing check's refunds take) dated at the decision's ask, which on a
 * clock in step with Redis's is no later than the charge (if the window turned in between, the
 * refund gives nothing back: under-admission, never over). Returns whether p was sent so.
 */
static void give_back(redis_store_t *s, pending_t *p);

static bool refund_late(redis_store_t *s, pending_t *p, const redisReply *reply)
{
    sl_decision_t d;
    if (p->op != OP_DECIDE || p->cost <= 0 || p->beyond || reply == NULL ||
        reply->type == REDIS_REPLY_ERROR || !rs_parse_decision(reply, p->mode, &d) || !d.allowed) {
        return false;
    }
    rs_event(s->shared, REDIS_EVENT_LATE_REFUND,
             "redis: a decision answered without Redis (past --store-timeout) was admitted when "
             "it ran later: its %lld units are given back",
             (long long)p->cost);
    give_back(s, p);
    return true;
}

/* p (an admission, linked nowhere) is given back: a settle of its cost to 0 dated at its ask
 * (refund_late), answered to on_late_refund. */
static void give_back(redis_store_t *s, pending_t *p)
{
    rs_forget_key(s, &p->rule, p->rkey, p->rkey_len);
    p->op = OP_SETTLE;
    p->reserved = p->cost;
    p->actual = 0;
    p->charged_ns = p->asked_ns;
    p->fn = on_late_refund;
    p->arg = s;
    p->answered = false;
    p->mode_resends = 0;
    pending_enqueue(s, p);
    send_decision(s, p, rc_key_node(s->client, p->rkey, p->rkey_len), false);
}

/*
 * p's (still linked) admission once its WAITs have answered, acks the replicas the last one
 * counted: answered when enough, else a store error and given back. Answered already (its
 * deadline passed while it waited: on_store_error decided it): given back.
 */
static void finish_acked(redis_store_t *s, pending_t *p, long long acks)
{
    p->holding = false;
    if (p->answered) {
        rs_event(s->shared, REDIS_EVENT_LATE_REFUND,
                 "redis: an admission whose replicas were awaited past --store-timeout is given "
                 "back (%lld units)",
                 (long long)p->cost);
        give_back(s, p);
        return;
    }
    unlink_pending(s, p);
    redis_decision_fn fn = p->fn;
    void *fn_arg = p->arg;
    if (!p->acks_void && acks >= p->replicas) {
        sl_decision_t d = p->held;
        pending_release(s, p);
        redis_store_answer(s, fn, fn_arg, 0, &d, NULL);
        return;
    }
    char msg[REDIS_STORE_ERR_MAX];
    snprintf(msg, sizeof msg, "redis: an admission reached %lld of %d replicas within %lld ms",
             p->acks_void ? 0 : acks, p->replicas, (long long)p->replica_wait_ms);
    atomic_fetch_add_explicit(&s->stats.unreplicated, 1, memory_order_relaxed);
    rs_event(s->shared, REDIS_EVENT_UNREPLICATED, "%s: given back", msg);
    give_back(s, p);
    redis_store_answer(s, fn, fn_arg, -1, NULL, msg);
}

/* A WAIT's reply (the replicas that acknowledged the connection's writes so far). The last one
 * out for a held admission decides it; one for a p released meanwhile frees it. */
static void on_wait(void *arg, redisReply *reply, const char *err)
{
    (void)err;
    pending_t *p = arg;
    redis_store_t *s = p->store;
    p->waits_out--;
    if (p->holding && p->waits_out == 0) {
        finish_acked(s, p,
                     reply != NULL && reply->type == REDIS_REPLY_INTEGER ? reply->integer : 0);
    } else if (!p->holding && p->release_due && p->waits_out == 0) {
        p->release_due = false;
        pending_release(s, p);
    }
}

/* Holds p's admission (reply; p not answered, still linked) until its WAIT answers, when its
 * rule asks for replicas. An admission from a node other than the one the WAIT went to (the key
 * was redirected) counts as unacknowledged. Returns whether it held it. */
static bool hold_for_acks(redis_store_t *s, pending_t *p, const redisReply *reply)
{
    sl_decision_t d;
    if (p->op != OP_DECIDE || p->replicas <= 0 || p->beyond || reply == NULL ||
        reply->type == REDIS_REPLY_ERROR || !rs_parse_decision(reply, p->mode, &d) || !d.allowed) {
        return false;
    }
    p->held = d;
    p->holding = true;
    p->acks_void = rc_key_node(s->client, p->rkey, p->rkey_len) != p->wait_idx;
    if (p->waits_out == 0) {
        finish_acked(s, p, 0); /* the WAIT could not be sent */
    }
    return true;
}

/* Sends `WAIT replicas ms` to node idx after p's decision (p an admission-to-be of a rule with
 * replicas); a WAIT that cannot be sent leaves p to be answered as unacknowledged. */
static void send_wait(redis_store_t *s, pending_t *p, int idx)
{
    char n[24], ms[24];
    snprintf(n, sizeof n, "%d", p->replicas);
    snprintf(ms, sizeof ms, "%lld", (long long)p->replica_wait_ms);
    const char *argv[3] = {"WAIT", n, ms};
    size_t len[3] = {4, strlen(n), strlen(ms)};
    p->wait_idx = idx;
    if (rs_format_args(s, 3, argv, len) && rs_send_cmd(s, idx, on_wait, p) == 0) {
        p->waits_out++;
        atomic_fetch_add_explicit(&s->stats.replica_waits, 1, memory_order_relaxed);
    }
}

static void on_reply(void *arg, redisReply *reply, const char *err)
{
    pending_t *p = arg;
    redis_store_t *s = p->store;
    if (p->answered) {
        /* its deadline passed: the reply is dropped, what it charged given back */
        if (!refund_late(s, p, reply)) {
            pending_release(s, p);
        }
        return;
    }
    if (hold_for_acks(s, p, reply)) {
        return;
    }
    unlink_pending(s, p); /* the timer stays: see arm_timer */
    if (resent(s, p, reply)) {
        return;
    }
    if (reply == NULL) {
        answer_error(s, p, err);
    } else if (reply->type == REDIS_REPLY_ERROR && p->op == OP_SETTLE &&
               strstr(reply->str, THROTTLE_DEBT_REFUSED) != NULL) {
        redis_decision_fn fn = p->fn;
        void *fn_arg = p->arg;
        pending_release(s, p); /* refused by max_debt, nothing charged: not a store error */
        redis_store_answer(s, fn, fn_arg, SL_EDEBT, NULL, reply->str);
    } else if (reply->type == REDIS_REPLY_ERROR && p->op == OP_RELEASE &&
               strstr(reply->str, THROTTLE_NO_HOLD) != NULL) {
        redis_decision_fn fn = p->fn;
        void *fn_arg = p->arg;
        pending_release(s, p); /* no such hold, nothing changed: the request's error */
        redis_store_answer(s, fn, fn_arg, SL_EHOLD, NULL, reply->str);
    } else if (reply->type == REDIS_REPLY_ERROR) {
        char msg[REDIS_STORE_ERR_MAX];
        snprintf(msg, sizeof msg, "redis: %s", reply->str);
        answer_error(s, p, msg);
    } else {
        answer_reply(s, p, reply);
    }
}

/* p (queued) failed before anything was sent: answered now, as a store error. */
static void send_failed(redis_store_t *s, pending_t *p, const char *msg)
{
    unlink_pending(s, p);
    answer_error(s, p, msg);
}

/* p (queued) is not to be sent after all (a lease's return to a node that lost it): answered
 * now, as an error, but not counted as one. */
static void send_dropped(redis_store_t *s, pending_t *p, const char *msg)
{
    redis_decision_fn fn = p->fn;
    void *fn_arg = p->arg;
    unlink_pending(s, p);
    pending_release(s, p);
    redis_store_answer(s, fn, fn_arg, -1, NULL, msg);
}

/* Why rule cannot be decided in mode (the module takes milliseconds, the scripts microseconds:
 * a rule finer than that is refused, a store error, rather than rounded into another rule), or
 * NULL. */
static const char *unfit(const sl_rule_t *rule, redis_mode_t mode)
{
    int64_t unit = mode == REDIS_MODE_MODULE ? SL_NS_PER_MS : SL_NS_PER_US;
    if (rule->window_ns % unit == 0 && rule->max_delay_ns % unit == 0) {
        return NULL;
    }
    return mode == REDIS_MODE_MODULE
               ? "the redis store (module) needs windows and max_delay of whole milliseconds"
               : "the redis store (Lua) needs windows and max_delay of whole microseconds";
}

/*
 * Sends p (queued) to node idx in that node's mode. A node being asked its mode (a connection
 * just made: it is made here if needed) gets nothing until it has answered: p waits for the
 * answer, so that no decision is sent in a mode the node may have left.
 */
static void send_decision(redis_store_t *s, pending_t *p, int idx, bool full_script)
{
    node_state_t *ns = node_at(s, idx);
    if (!ns->probing && !rc_node_connected(s->client, idx)) {
        rs_probe(s, idx); /* connects (unless backing off) and asks */
    }
    if (ns->probing) {
        p->wait_next = NULL;
        if (ns->waiting_tail != NULL) {
            ns->waiting_tail->wait_next = p;
        } else {
            ns->waiting = p;
        }
        ns->waiting_tail = p;
        return;
    }
    redis_mode_t mode = rs_node_mode(s, idx);
    uint64_t generation = atomic_load_explicit(&ns->node->generation, memory_order_relaxed);
    if (p->op == OP_RETURN &&
        (p->lease_node.node != ns->node || p->lease_node.generation != generation)) {
        send_dropped(s, p, "the lease's node lost its data, changed mode or moved the key");
        return;
    }
    if (p->op == OP_LEASE) {
        *p->node_out = (redis_lease_node_t){.node = ns->node, .generation = generation};
    }
    if (mode != p->mode) {
        rs_rekey(s, p, mode);
    }
    const char *why = unfit(&p->rule, mode);
    if (why != NULL) {
        send_failed(s, p, why);
        return;
    }
    args_t a;
    a.argc = 0;
    p->closed_ms = rs_closed_ms(s, idx, p->closed_ns, &p->rule, p->asked_ns);
    if (mode == REDIS_MODE_MODULE) {
        rs_module_args(&a, p);
    } else {
        rs_lua_args(&a, p, lua_script_for(p->rule.algorithm), full_script);
    }
    atomic_fetch_add_explicit(&s->stats.decisions, 1, memory_order_relaxed);
    if (!rs_format_args(s, a.argc, a.argv, a.len)) {
        send_failed(s, p, "out of memory");
    } else if (rs_send_cmd(s, idx, on_reply, p) != 0) {
        char msg[REDIS_STORE_ERR_MAX];
        snprintf(msg, sizeof msg, "redis %s: not connected (%sreconnecting)", ns->node->name,
                 rc_auth_refused(s->client, idx) ? "AUTH refused; " : "");
        send_failed(s, p, msg);
    } else if (p->op == OP_DECIDE && p->replicas > 0 && !p->beyond) {
        send_wait(s, p, idx); /* pipelined: its reply comes right after the decision's */
    }
}

/* Where a request on (name, rule, key) goes. */
typedef struct route {
    char rkey[RKEY_MAX]; /* its Redis key, in the mode of its node */
    size_t rkey_len;     /* bytes */
    int idx;             /* the node (rc) */
    redis_mode_t mode;   /* the node's mode */
} route_t;

/*
 * Fills r for (name, rule, key). Returns true, or false after answering redis_store_answer(s, fn,
 * arg, -1, NULL, why) when it cannot be asked (a key too long, a rule the node's mode cannot take).
 */
static bool route(redis_store_t *s, const char *name, const sl_rule_t *rule, const void *key,
                  size_t key_len, route_t *r, redis_decision_fn fn, void *arg)
{
    /* the key's node is found on its module form: the digits (which depend on the node's mode)
     * are not part of the slot, except with an empty client key (an empty hash tag) */
    r->rkey_len = rs_key(name, rule, REDIS_MODE_MODULE, key, key_len, r->rkey, RKEY_MAX);
    const char *why = "key too long for the redis store";
    if (r->rkey_len != 0) {
        r->idx = rc_key_node(s->client, r->rkey, r->rkey_len);
        r->mode = rs_node_mode(s, r->idx);
        if (r->mode != REDIS_MODE_MODULE) {
            rs_key_digits(rule, r->mode, r->rkey + r->rkey_len - KEY_HASH_DIGITS);
            if (key_len == 0) {
                r->idx = rc_key_node(s->client, r->rkey, r->rkey_len);
            }
        }
        why = unfit(rule, r->mode);
    }
    if (why != NULL) {
        redis_store_answer(s, fn, arg, -1, NULL, why);
        return false;
    }
    return true;
}

void redis_store_decide(redis_store_t *s, const char *name, const sl_rule_t *rule, const void *key,
                        size_t key_len, int64_t cost, int64_t closed_ns, int64_t now_ns,
                        redis_decision_fn fn, void *arg)
{
    redis_store_decide_acked(s, name, rule, key, key_len, cost, 0, closed_ns, now_ns, NULL, fn,
                             arg);
}

void redis_store_decide_acked(redis_store_t *s, const char *name, const sl_rule_t *rule,
                              const void *key, size_t key_len, int64_t cost, int64_t reserve,
                              int64_t closed_ns, int64_t now_ns, const redis_acks_t *acks,
                              redis_decision_fn fn, void *arg)
{
    route_t r;
    if (!route(s, name, rule, key, key_len, &r, fn, arg)) {
        return;
    }
    uint64_t h = rs_key_hash(s, r.rkey, r.rkey_len);
    uint64_t epoch = atomic_load_explicit(rs_epoch_of(s->shared, h), memory_order_acquire);
    olc_answer_t a;
    bool beyond = cost > rule->capacity; /* never admissible: the key's numbers from a peek */
    /* a refusal of a priority with a reserve is no refusal of the others: the cache keeps only
     * refusals without one, and answers only requests without one */
    if (!beyond && reserve == 0 &&
        olc_lookup(&s->cache, h, rs_cache_epoch(epoch, rule), cost, now_ns, &a)) {
        /* Redis refused as much or less, and would still: no round trip */
        atomic_fetch_add_explicit(&s->stats.cache_hits, 1, memory_order_relaxed);
        sl_decision_t d = {.allowed = false,
                           .limit = a.limit,
                           .remaining = a.remaining,
                           .retry_after_ns = a.retry_after_ns,
                           .reset_after_ns = a.reset_after_ns};
        redis_store_answer(s, fn, arg, 0, &d, NULL);
        return;
    }
    pending_t *p = pending_new(s, r.rkey, r.rkey_len, fn, arg);
    if (p == NULL) {
        redis_store_answer(s, fn, arg, -1, NULL, "out of memory");
        return;
    }
    p->rule = *rule;
    p->cost = beyond ? 0 : cost;
    p->beyond = beyond;
    p->reserve = reserve; /* beyond: not sent, but the answer's remaining is the priority's */
    p->closed_ns = closed_ns;
    p->asked_ns = now_ns;
    p->mode = r.mode;
    p->cache_hash = h;
    p->epoch = epoch;
    if (acks != NULL && acks->replicas > 0) {
        p->replicas = acks->replicas;
        p->replica_wait_ms = acks->wait_ms;
    }
    send_decision(s, p, r.idx, false);
}

void redis_store_settle(redis_store_t *s, const char *name, const sl_rule_t *rule, const void *key,
                        size_t key_len, int64_t reserved, int64_t actual, int64_t charged_ns,
                        int64_t closed_ns, int64_t now_ns, redis_decision_fn fn, void *arg)
{
    if (reserved < 0 || actual < 0 || charged_ns < -1) {
        redis_store_answer(s, fn, arg, -1, NULL,
                           "a settle needs reserved and actual >= 0, and a charge time >= 0");
        return;
    }
    route_t r;
    if (!route(s, name, rule, key, key_len, &r, fn, arg)) {
        return;
    }
    if (actual != reserved) {
        /* room given back, or more charged (a refusal's retry_after grows): every loop forgets
         * its refusals now, and again when Redis has done it (a refusal it gave before the
         * settle ran must not be remembered after) */
        rs_forget_key(s, rule, r.rkey, r.rkey_len);
    }
    pending_t *p = pending_new(s, r.rkey, r.rkey_len, fn, arg);
    if (p == NULL) {
        redis_store_answer(s, fn, arg, -1, NULL, "out of memory");
        return;
    }
    p->op = OP_SETTLE;
    p->rule = *rule;
    p->reserved = reserved;
    p->actual = actual;
    p->charged_ns = charged_ns;
    p->closed_ns = closed_ns;
    p->asked_ns = now_ns;
    p->mode = r.mode;
    p->cache_hash = rs_key_hash(s, r.rkey, r.rkey_len);
    p->epoch = atomic_load_explicit(rs_epoch_of(s->shared, p->cache_hash), memory_order_acquire);
    send_decision(s, p, r.idx, false);
}

void redis_store_lease(redis_store_t *s, const char *name, const sl_rule_t *rule, const void *key,
                       size_t key_len, int64_t want, int64_t lease_ns, int64_t closed_ns,
                       int64_t now_ns, sl_lease_t *lease, redis_lease_node_t *node,
                       redis_decision_fn fn, void *arg)
{
    if (want < 1 || lease_ns < SL_NS_PER_MS || lease_ns % SL_NS_PER_MS != 0) {
        redis_store_answer(s, fn, arg, -1, NULL, "a lease needs want >= 1 and whole milliseconds");
        return;
    }
    route_t r;
    if (!route(s, name, rule, key, key_len, &r, fn, arg)) {
        return;
    }
    pending_t *p = pending_new(s, r.rkey, r.rkey_len, fn, arg);
    if (p == NULL) {
        redis_store_answer(s, fn, arg, -1, NULL, "out of memory");
        return;
    }
    p->op = OP_LEASE;
    p->rule = *rule;
    p->want = want;
    p->lease_ns = lease_ns;
    p->lease_out = lease;
    p->node_out = node;
    p->closed_ns = closed_ns;
    p->asked_ns = now_ns;
    p->mode = r.mode;
    p->cache_hash = rs_key_hash(s, r.rkey, r.rkey_len);
    send_decision(s, p, r.idx, false);
}

void redis_store_return(redis_store_t *s, const char *name, const sl_rule_t *rule, const void *key,
                        size_t key_len, const sl_lease_t *lease, int64_t unused,
                        const redis_lease_node_t *node, redis_decision_fn fn, void *arg)
{
    route_t r;
    if (!route(s, name, rule, key, key_len, &r, fn, arg)) {
        return;
    }
    rs_forget_key(s, rule, r.rkey, r.rkey_len); /* room comes back, as a settle's */
    pending_t *p = pending_new(s, r.rkey, r.rkey_len, fn, arg);
    if (p == NULL) {
        redis_store_answer(s, fn, arg, -1, NULL, "out of memory");
        return;
    }
    p->op = OP_RETURN;
    p->rule = *rule;
    p->lease = *lease;
    p->unused = unused;
    p->lease_node = *node;
    p->closed_ns = -1; /* an absent key has nothing to give back to */
    p->asked_ns = sl_now_ns();
    p->mode = r.mode;
    p->cache_hash = rs_key_hash(s, r.rkey, r.rkey_len);
    send_decision(s, p, r.idx, false);
}

void redis_store_hold(redis_store_t *s, const char *name, const sl_rule_t *rule, const void *key,
                      size_t key_len, const redis_hold_req_t *req, int64_t now_ns,
                      redis_decision_fn fn, void *arg)
{
    int64_t hold_ns = req->hold_ns == 0 ? rule->window_ns : req->hold_ns;
    if (!req->release && (req->cost < 0 || hold_ns < SL_NS_PER_MS || hold_ns > rule->window_ns)) {
        redis_store_answer(s, fn, arg, req->cost < 0 ? -1 : SL_EHOLDTIME, NULL,
                           "an acquire needs a cost >= 0 and a hold time within the window");
        return;
    }
    route_t r;
    if (!route(s, name, rule, key, key_len, &r, fn, arg)) {
        return;
    }
    if (req->release) {
        rs_forget_key(s, rule, r.rkey, r.rkey_len); /* room comes back, as a settle's */
    }
    pending_t *p = pending_new(s, r.rkey, r.rkey_len, fn, arg);
    if (p == NULL) {
        redis_store_answer(s, fn, arg, -1, NULL, "out of memory");
        return;
    }
    p->op = req->release ? OP_RELEASE : OP_ACQUIRE;
    p->rule = *rule;
    int64_t most =
        rule->adaptive.algorithm != SL_ADAPTIVE_NONE ? rule->adaptive.max_limit : rule->capacity;
    p->beyond = !req->release && req->cost > most; /* sent as a peek, as a decision's */
    p->cost = req->release || p->beyond ? 0 : req->cost;
    p->reserve = req->release ? 0 : req->reserve;
    p->hold_ns = hold_ns;
    /* an acquire's entropy: 48 random bits (the key's secret, at its first acquire) */
    p->hold_id = req->release ? req->id
                              : sl_hash_mix(s->hold_key, ++s->holds ^ SL_HASH_P1) &
                                    ((UINT64_C(1) << 48) - 1);
    p->hold_out = req->hold;
    p->sampled = req->release && req->sampled;
    p->sample = req->sample;
    p->closed_ns = req->closed_ns;
    p->asked_ns = now_ns;
    p->mode = r.mode;
    p->cache_hash = rs_key_hash(s, r.rkey, r.rkey_len);
    p->epoch = atomic_load_explicit(rs_epoch_of(s->shared, p->cache_hash), memory_order_acquire);
    send_decision(s, p, r.idx, false);
}

void redis_store_reset(redis_store_t *s, const char *name, const sl_rule_t *rule, const void *key,
                       size_t key_len, redis_decision_fn fn, void *arg)
{
    char rkey[RKEY_MAX];
    size_t rkey_len = rs_key(name, rule, REDIS_MODE_MODULE, key, key_len, rkey, sizeof rkey);
    if (rkey_len == 0) {
        redis_store_answer(s, fn, arg, -1, NULL, "key too long for the redis store");
        return;
    }
    /* Every loop's cached refusals are forgotten now, and again when the DEL is done (a
     * refusal Redis gave before it must not be remembered after). */
    rs_forget_key(s, rule, rkey, rkey_len);
    pending_t *p = pending_new(s, rkey, rkey_len, fn, arg);
    if (p == NULL) {
        redis_store_answer(s, fn, arg, -1, NULL, "out of memory");
        return;
    }
    p->op = OP_RESET;
    p->rule = *rule;
    /* the state in either mode's name: a node that changes mode back finds nothing stale */
    char lua[RKEY_MAX];
    memcpy(lua, rkey, rkey_len);
    rs_key_digits(rule, REDIS_MODE_LUA, lua + rkey_len - KEY_HASH_DIGITS);
    const char *argv[3] = {"DEL", p->rkey, lua};
    size_t len[3] = {3, rkey_len, rkey_len};
    if (!rs_format_args(s, 3, argv, len) ||
        rs_send_cmd(s, rc_key_node(s->client, rkey, rkey_len), on_reply, p) != 0) {
        unlink_pending(s, p);
        pending_release(s, p);
        rs_event(s->shared, REDIS_EVENT_ERROR, "redis: a reset: not connected (reconnecting)");
        redis_store_answer(s, fn, arg, -1, NULL, "redis: not connected (reconnecting)");
    }
}

void redis_store_forget(redis_store_t *s, const char *name, const sl_rule_t *rule, const void *key,
                        size_t key_len)
{
    char rkey[RKEY_MAX];
    size_t rkey_len = rs_key(name, rule, REDIS_MODE_MODULE, key, key_len, rkey, sizeof rkey);
    if (rkey_len != 0) {
        rs_forget_key(s, rule, rkey, rkey_len);
    }
}

int redis_store_create(uv_loop_t *loop, const rc_config_t *cfg, redis_shared_t *shared,
                       int64_t timeout_ns, redis_node_fn on_node, void *on_node_arg,
                       redis_store_t **out, char *err)
{
    redis_store_t *s = calloc(1, sizeof *s);
    if (s == NULL) {
        snprintf(err, REDIS_STORE_ERR_MAX, "out of memory");
        return -1;
    }
    s->pending = (freelist_t){.size = sizeof(pending_t), .keep = PENDING_KEEP};
    s->loop = loop;
    s->shared = shared;
    s->on_node = on_node;
    s->on_node_arg = on_node_arg;
    s->timeout_ms = timeout_ns / SL_NS_PER_MS > 0 ? timeout_ns / SL_NS_PER_MS : 1;
    if (getrandom(&s->hold_key, sizeof s->hold_key, GRND_NONBLOCK) != (ssize_t)sizeof s->hold_key) {
        s->hold_key = sl_hash_mix((uint64_t)sl_now_ns() ^ (uint64_t)(uintptr_t)s, SL_HASH_P2);
    }
    olc_init(&s->cache, s->cache_slots, CACHE_SLOTS, 1);
    char cerr[RC_ERR_MAX];
    if (rc_create(loop, cfg, on_connect, s, &s->client, cerr) != 0) {
        snprintf(err, REDIS_STORE_ERR_MAX, "%s", cerr);
        free(s);
        return -1;
    }
    rc_on_state(s->client, on_state, s);
    uv_timer_init(loop, &s->timer);
    s->timer.data = s;
    *out = s;
    return 0;
}

static void on_timer_closed(uv_handle_t *h)
{
    redis_store_t *s = h->data;
    freelist_clear(&s->pending);
    buf_free(&s->cmd);
    free(s);
}

void redis_store_free(redis_store_t *s)
{
    if (s == NULL) {
        return;
    }
    /* Answer everyone still waiting, then let the connections fail the replies (freed there;
     * a decision waiting for a probe is freed when the probe fails). */
    while (s->head != NULL) {
        pending_t *p = s->head;
        unlink_pending(s, p);
        p->answered = true;
        redis_store_answer(s, p->fn, p->arg, -1, NULL, "sluiced is stopping");
    }
    rc_free(s->client);
    uv_timer_stop(&s->timer);
    uv_close((uv_handle_t *)&s->timer, on_timer_closed);
}

const redis_store_stats_t *redis_store_stats(const redis_store_t *s)
{
    return &s->stats;
}

const rc_stats_t *redis_store_client_stats(const redis_store_t *s)
{
    return rc_stats(s->client);
}
