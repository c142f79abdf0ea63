#!/usr/bin/env bash
# test_server_approx_cluster.sh - an approximate rule on a Redis Cluster of 3 primaries + 3
# replicas, module and Lua (modes_cluster.sh): one hot key and 10 warm keys hammered from three
# sluiced at once; no fixed window admits more than its key's limit plus approximate's bound
# (leased_hammer.py's, from the rates it measures), and Redis runs far fewer commands than there
# are decisions.
MC_RULE=ah
MC_MODE_YAML='    mode: approximate
    sync_interval: 10ms'
MC_HAMMER_ARGS=(10 15000 6 2 10)
MC_HAMMER_CHECK=hammer-within-bound
MC_HOT_MIN=1500
. "$SLUICE_SOURCE_DIR/tests/integration/modes_cluster.sh"
