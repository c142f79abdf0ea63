/*
 * store_stats.h - a request store's statistics as the server shows them: the rows a store
 * declares (request_store.h: store_stat_t), summed over the loops and written once per reader
 * from the same row, so /metrics and INFO show one number under the names of one declaration.
 *
 * The INFO name of a row is its sample's Prometheus name without "sluice_" and "_total", then
 * each label's value: sluice_redis_leases_total{event="taken"} is redis_leases_taken,
 * sluice_redis_approx_sync_lag_seconds_sum is redis_approx_sync_lag_seconds_sum.
 */
#ifndef SLUICE_STORE_STORE_STATS_H
#define SLUICE_STORE_STORE_STATS_H

#include <stddef.h>

#include "proto/buf.h"
#include "store/request_store.h"

/* Adds a loop's values into *total (which has the same list): every value summed, except a
 * shared row's (the store's, the same in every loop), which is taken as it is. */
void store_stats_add(store_stats_t *total, const store_stats_t *loop);

/* Row i's value as text ("12", "0.000153000"): what both readers show. Returns its length. */
size_t store_stat_text(const store_stats_t *st, size_t i, char *out, size_t cap);

/* Row i's INFO name (see above). Returns its length (0: it did not fit). */
size_t store_stat_info_name(const store_stats_t *st, size_t i, char *out, size_t cap);

/* Every row, as Prometheus text (# HELP and # TYPE before each family's first row). */
void store_stats_prometheus(const store_stats_t *st, buf_t *b);

/* Every row as an INFO line "name:value\r\n". */
void store_stats_info(const store_stats_t *st, buf_t *b);

#endif /* SLUICE_STORE_STORE_STATS_H */
