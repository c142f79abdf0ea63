package sluice

import (
	"reflect"
	"testing"
)

// The same seed gives the C client's delays (slc_backoff_ms, src/client/retry.c): these are
// what it printed for seeds 42 and 0.
func TestBackoffMatchesTheCClient(t *testing.T) {
	seed := uint64(42)
	var got []int64
	for a := 0; a < 12; a++ {
		got = append(got, BackoffMs(a, 50, 5000, &seed))
	}
	want := []int64{37, 16, 55, 138, 30, 1390, 699, 4003, 1699, 3093, 1024, 2465}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("seed 42: got %v, want %v", got, want)
	}
	seed, got = 0, nil
	for a := 0; a < 6; a++ {
		got = append(got, BackoffMs(70, 1, 1000000, &seed))
	}
	want = []int64{883311, 431528, 26433, 970882, 106346, 327326}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("seed 0, attempt 70: got %v, want %v", got, want)
	}
}

// Full jitter: every delay lies in [0, min(cap, base*2^attempt)], for seeded random arguments
// and the edges (huge attempts, a zero or negative base, a cap below the base).
func TestBackoffBounds(t *testing.T) {
	gen := uint64(7)
	for i := 0; i < 20000; i++ {
		attempt := int(splitmix64(&gen)%130) - 2
		base := int64(splitmix64(&gen)%2000) - 5
		cap := int64(splitmix64(&gen)%100000) - 5
		d := BackoffMs(attempt, base, cap, &gen)
		ceiling := int64(0)
		if base > 0 && cap > 0 {
			ceiling = cap
			if attempt < 40 && base<<uint(maxInt(attempt, 0)) < cap {
				ceiling = base << uint(maxInt(attempt, 0))
			}
		}
		if d < 0 || d > ceiling {
			t.Fatalf("BackoffMs(%d, %d, %d) = %d outside [0, %d]", attempt, base, cap, d, ceiling)
		}
	}
}

func maxInt(a, b int) int {
	if a > b {
		return a
	}
	return b
}

func TestRetryDelayPrefersTheServer(t *testing.T) {
	seed := uint64(1)
	cases := []struct {
		d    *Decision
		want int64 // -2: a backoff in [0, 50]
	}{
		{&Decision{Allowed: false, RetryAfterMs: 800}, 800}, // not capped at 50
		{&Decision{Allowed: false, RetryAfterMs: -1}, -1},   // never
		{&Decision{Allowed: true, RetryAfterMs: 0}, 0},
		{&Decision{Allowed: true, RetryAfterMs: 120}, 120}, // a max_delay rule's delay
		{&Decision{Allowed: false, RetryAfterMs: 0}, -2},
		{nil, -2},
	}
	for _, c := range cases {
		got := RetryDelayMs(c.d, 0, 50, 50, &seed)
		if c.want == -2 && (got < 0 || got > 50) || c.want != -2 && got != c.want {
			t.Errorf("%+v: got %d, want %d", c.d, got, c.want)
		}
	}
}
