/*
 * redis_client.h - one event loop's connections to a Redis server or a Redis Cluster, for
 * sluiced's Redis request store.
 *
 * Asynchronous (hiredis's async context on the loop's libuv loop): a command is appended to its
 * node's connection and its reply arrives in a callback, so concurrent commands to one node are
 * pipelined on one connection. In cluster mode a command goes to the primary that owns its key's
 * slot (the key's {hash tag}, CRC16 mod 16384); the slot map comes from CLUSTER SLOTS and is
 * corrected by MOVED replies (the command is re-sent to the node named, up to
 * RC_REDIRECTS_MAX times) and by a refresh after a connection is lost; ASK replies re-send once
 * with ASKING. A lost connection is re-made after a backoff (10 ms doubling to 1 s), on the next
 * command or by a timer, commands or not, while the node is still needed (the one server, or a
 * cluster node owning a slot); until then commands to that node fail at once. Each loss and
 * each return is told (rc_on_state) and the nodes down are counted (rc_stats_t.down).
 *
 * One client per loop thread; nothing here is thread-safe.
 */
#ifndef SLUICE_STORE_REDIS_CLIENT_H
#define SLUICE_STORE_REDIS_CLIENT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <hiredis/hiredis.h>
#include <uv.h>

#include "store/redis_replies.h"

#define RC_NODES_MAX     64
#define RC_REDIRECTS_MAX 5
#define RC_ERR_MAX       256
#define RC_SLOTS         16384

typedef struct rc_client rc_client_t;

#define RC_USER_MAX     128 /* bytes of a user name, with its NUL */
#define RC_PASSWORD_MAX 512 /* bytes of a password, with its NUL */

/* Where to connect: "redis://host:port" (one server) or "redis-cluster://h1:p1,h2:p2" (seed
 * nodes of a cluster), either with "[USER]:PASSWORD@" before the nodes (percent-encoded). */
typedef struct rc_config {
    bool cluster;
    size_t nseeds;
    char host[RC_NODES_MAX][64];
    int port[RC_NODES_MAX];
    char user[RC_USER_MAX];         /* AUTH USER PASSWORD on connect; "" = AUTH PASSWORD */
    char password[RC_PASSWORD_MAX]; /* "" = no AUTH */
} rc_config_t;

/* url as a message may show it: "[USER]:PASSWORD@" (anything up to its last '@') as "***@".
 * Writes out (cap bytes, cut short if need be). */
void rc_mask_url(const char *url, char *out, size_t cap);

/* Parses a store URL into cfg. Returns 0, or -1 with a message in err (RC_ERR_MAX) that shows
 * the URL with its password as "***". */
int rc_parse_url(const char *url, rc_config_t *cfg, char *err);

/*
 * A reply, or its absence: reply is NULL and err says why (connection refused or lost, too many
 * redirects, cluster down). A Redis error reply (other than MOVED / ASK) is passed as a reply of
 * type REDIS_REPLY_ERROR. The reply is freed when the callback returns.
 */
typedef void (*rc_reply_fn)(void *arg, redisReply *reply, const char *err);

/*
 * Told of each connection made to a node (the first, and every reconnect: reconnect is true),
 * right after it is made and before anything but AUTH is written on it: commands the callback
 * sends to that node with rc_command_at() go first. node is the node's index (see rc_key_node).
 */
typedef void (*rc_connect_fn)(void *arg, int node, bool reconnect);

/* Creates the client; connects lazily (first command to a node; a cluster's slot map is asked
 * for at once). connected (may be NULL) is called as above, with arg, once *out is set. Returns
 * 0 or -1 with err. */
int rc_create(uv_loop_t *loop, const rc_config_t *cfg, rc_connect_fn connected, void *arg,
              rc_client_t **out, char *err);

/* Told when node's connection is lost or cannot be made (up false, why: what failed, such as
 * "AUTH refused: WRONGPASS ..." with a password Redis does not take) and when it is made again
 * (up true, why ""; with a password, once AUTH is accepted): once per change, on the client's
 * loop. */
typedef void (*rc_state_fn)(void *arg, int node, bool up, const char *why);

/* Whether node's last AUTH was refused (its password is not the one Redis takes): it stays down
 * until one is accepted. */
bool rc_auth_refused(const rc_client_t *c, int node);

/* Sets who is told of nodes going down and up (NULL: nobody). */
void rc_on_state(rc_client_t *c, rc_state_fn fn, void *arg);

/* Disconnects everything; commands still waiting get their callback with an error. */
void rc_free(rc_client_t *c);

/*
 * Sends a command, cmd[0..len) formatted as Redis reads it (a RESP array of bulk strings; copied,
 * so the caller may reuse it), to the node owning key (any node when key is NULL and not in
 * cluster mode; in cluster mode key must be given). Returns 0 and calls fn exactly once later, or
 * -1 with nothing sent and fn never called.
 */
int rc_command(rc_client_t *c, const char *key, size_t key_len, const char *cmd, size_t len,
               rc_reply_fn fn, void *arg);

/*
 * The node a command for key goes to now: its slot's owner in the slot map (cluster; a node
 * chosen by the slot while the owner is unknown), or the one server. An index in
 * [0, RC_NODES_MAX), stable for the client's life (nodes are added, never removed).
 */
int rc_key_node(const rc_client_t *c, const char *key, size_t key_len);

/* rc_command() to node `node` (from rc_key_node, or an rc_connect_fn), redirects followed as
 * there. Returns 0 and calls fn exactly once later, or -1 with nothing sent. */
int rc_command_at(rc_client_t *c, int node, const char *cmd, size_t len, rc_reply_fn fn, void *arg);

/* True while node has a connection (made, or being made); false before the first command to it
 * and after it was lost (the next command connects again, backoff permitting). */
bool rc_node_connected(const rc_client_t *c, int node);

/* The node's address as the client knows it (the seed's, or CLUSTER SLOTS's / MOVED's). */
void rc_node_addr(const rc_client_t *c, int node, const char **host, int *port);

/* True for a Redis Cluster (redis-cluster://), false for one server. */
bool rc_is_cluster(const rc_client_t *c);

/* The cluster slot of a key (its hash tag's CRC16 mod 16384). */
unsigned rc_key_slot(const char *key, size_t len);

/* Counters for metrics: written by the client's loop, readable from any thread. */
typedef struct rc_stats {
    _Atomic uint64_t commands;   /* sent (including re-sends) */
    _Atomic uint64_t redirects;  /* MOVED and ASK followed */
    _Atomic uint64_t refreshes;  /* slot map reloads */
    _Atomic uint64_t reconnects; /* connections made after the first */
    _Atomic uint64_t failures;   /* callbacks that got no reply */
    _Atomic uint64_t down;       /* nodes whose connection is lost and not made again (a gauge) */
} rc_stats_t;

const rc_stats_t *rc_stats(const rc_client_t *c);

#endif /* SLUICE_STORE_REDIS_CLIENT_H */
