package sluice

// backoff.go - exponential backoff with full jitter (AWS's "Exponential Backoff And Jitter"),
// and the retry delay that prefers sluiced's retry_after. The generator is SplitMix64 and a
// draw from [0, n] is Lemire's multiply-and-reject, as in the C client (src/client/retry.c), so
// the same seed gives the same delays in both.

import "math/bits"

func splitmix64(state *uint64) uint64 {
	*state += 0x9e3779b97f4a7c15
	z := *state
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// uniformUpTo is uniform in [0, max], max <= MaxInt64.
func uniformUpTo(max uint64, state *uint64) uint64 {
	rng := max + 1
	hi, lo := bits.Mul64(splitmix64(state), rng)
	if lo < rng {
		threshold := -rng % rng // 2^64 mod rng
		for lo < threshold {
			hi, lo = bits.Mul64(splitmix64(state), rng)
		}
	}
	return hi
}

// BackoffMs is a delay drawn uniformly from [0, min(capMs, baseMs * 2^attempt)] milliseconds.
// It never overflows (a large attempt reaches the cap); negative arguments count as 0.
// *rngState is the generator's state: any value seeds it, and the same seed gives the same
// delays (as the C client's slc_backoff_ms). Not safe for concurrent use of one state.
func BackoffMs(attempt int, baseMs, capMs int64, rngState *uint64) int64 {
	if baseMs < 0 {
		baseMs = 0
	}
	if capMs < 0 {
		capMs = 0
	}
	if attempt < 0 {
		attempt = 0
	}
	var ceiling int64
	switch {
	case baseMs == 0:
		ceiling = 0
	case attempt >= 63 || baseMs > capMs>>uint(attempt):
		ceiling = capMs
	default:
		ceiling = baseMs << uint(attempt)
	}
	return int64(uniformUpTo(uint64(ceiling), rngState))
}

// RetryDelayMs is how long to wait before trying again after attempt (0 first): d's
// RetryAfterMs when sluiced gave one (admitted: 0 or a max_delay rule's delay; refused: exactly
// that, not capped, since retrying sooner is pointless; -1: never, do not retry), else (d nil,
// as after an error, or a reply without a retry time) BackoffMs(attempt, baseMs, capMs, ...).
func RetryDelayMs(d *Decision, attempt int, baseMs, capMs int64, rngState *uint64) int64 {
	if d != nil && (d.Allowed || d.RetryAfterMs > 0 || d.RetryAfterMs == -1) {
		return d.RetryAfterMs
	}
	return BackoffMs(attempt, baseMs, capMs, rngState)
}
