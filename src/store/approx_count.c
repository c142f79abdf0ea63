/*
 * approx_count.c - an approximate rule's count of one key on one node (approx_count.h).
 */
#include "store/approx_count.h"

int64_t approx_left(const approx_count_t *c)
{
    int64_t left = c->remaining - c->sending - c->flushing - c->deciding - c->admitted;
    return left > 0 ? left : 0;
}

approx_verdict_t approx_decide(approx_count_t *c, int64_t cost, int64_t now_ns)
{
    c->asked = true;
    if (c->remaining < 0 || now_ns >= c->until_ns) {
        c->deciding += cost;
        return APPROX_STRICT;
    }
    if (c->remaining - c->sending - c->flushing - c->deciding - c->admitted < cost) {
        return APPROX_REFUSE;
    }
    c->admitted += cost;
    return APPROX_ADMIT;
}

bool approx_sync_due(const approx_count_t *c, int64_t sync_ns, int64_t now_ns)
{
    if (c->syncing) {
        return false; /* one sync at a time */
    }
    bool something = c->admitted > 0 || (c->asked && c->remaining >= 0);
    /* from the last sync; before the first, from the first count: every unit admitted here came
     * after it */
    int64_t since = c->sync_ns != 0 ? c->sync_ns : c->count_ns;
    return something && now_ns - since >= sync_ns;
}

int64_t approx_sync_begin(approx_count_t *c, int64_t now_ns)
{
    c->sync_ns = now_ns;
    c->sending = c->admitted;
    c->admitted = 0;
    c->syncing = true;
    c->asked = false;
    return c->sending;
}

void approx_sync_end(approx_count_t *c, bool ok, int64_t remaining, int64_t sent_ns,
                     int64_t sync_ns, int64_t now_ns)
{
    int64_t sent = c->sending;
    c->sending = 0;
    c->syncing = false;
    if (!ok) {
        c->admitted += sent;
        return;
    }
    approx_reply(c, remaining, sent_ns, sync_ns, now_ns);
}

int64_t approx_flush_begin(approx_count_t *c)
{
    int64_t units = c->admitted;
    c->flushing += units;
    c->admitted = 0;
    return units;
}

void approx_flush_end(approx_count_t *c, int64_t units, bool ok, int64_t remaining, int64_t sent_ns,
                      int64_t sync_ns, int64_t now_ns)
{
    c->flushing -= units;
    if (!ok) {
        c->admitted += units;
        return;
    }
    approx_reply(c, remaining, sent_ns, sync_ns, now_ns);
}

void approx_strict_end(approx_count_t *c, int64_t cost, bool ok, int64_t remaining, int64_t sent_ns,
                       int64_t sync_ns, int64_t now_ns)
{
    c->deciding -= cost;
    if (ok) {
        approx_reply(c, remaining, sent_ns, sync_ns, now_ns);
    }
}

void approx_reply(approx_count_t *c, int64_t remaining, int64_t sent_ns, int64_t sync_ns,
                  int64_t now_ns)
{
    if (sent_ns < c->count_ns) {
        return; /* a later request's count is in already, or the count was forgotten since */
    }
    c->remaining = remaining > 0 ? remaining : 0;
    c->count_ns = sent_ns;
    c->until_ns = now_ns + sync_ns;
}

void approx_forget(approx_count_t *c, int64_t now_ns)
{
    c->remaining = -1;
    c->count_ns = now_ns;
}
