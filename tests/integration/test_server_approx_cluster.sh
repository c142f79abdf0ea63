#!/usr/bin/env bash
# test_server_approx_cluster.sh - an approximate rule on a Redis Cluster of 3 primaries + 3
# replicas, module and Lua (modes_cluster.sh): one hot key and 10 warm keys hammered from three
# sluiced at once; no fixed window admits more than its key's limit plus approximate's bound
# (leased_hammer.py's, from what each node admitted in a sync interval and the longest trip),
# the hot key's replies show its override, and some decisions were made locally.
MC_RULE=ah
MC_MODE_YAML='    mode: approximate
    sync_interval: 10ms'
MC_HAMMER_ARGS=(10 4000 240 2 10)
MC_HAMMER_CHECK=hammer-within-bound
MC_LOCAL_METRIC=sluice_redis_approx_local_total
. "$SLUICE_SOURCE_DIR/tests/integration/modes_cluster.sh"
