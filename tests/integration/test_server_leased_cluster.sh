#!/usr/bin/env bash
# test_server_leased_cluster.sh - a leased rule on a Redis Cluster of 3 primaries + 3 replicas,
# module and Lua (modes_cluster.sh): one hot key and 100 warm keys hammered from three sluiced at
# once; no fixed window admits more than its key's limit, the hot key's replies show its
# override, and some decisions were answered from leases (no Redis command).
MC_RULE=lh
MC_MODE_YAML='    mode: leased
    lease_time: 200ms'
MC_HAMMER_ARGS=(100 4000 240 2)
MC_HAMMER_CHECK=hammer-no-window-over
MC_LOCAL_METRIC=sluice_redis_lease_hits_total
. "$SLUICE_SOURCE_DIR/tests/integration/modes_cluster.sh"
