package sluice

import (
	"testing"
	"time"
)

func refusal(limit, remaining, retryMs, resetMs int64) Decision {
	return Decision{Limit: limit, Remaining: remaining, RetryAfterMs: retryMs, ResetAfterMs: resetMs}
}

// A refusal is answered for its cost only, until its retry time, with times less the time since
// rounded up; an admission, a forget or the retry time passing drops it.
func TestCacheAnswersTheSameCostUntilRetry(t *testing.T) {
	c := newOverLimitCache(16)
	h := c.keyHash("api", "u1")
	c.record(h, 2, refusal(10, 1, 800, 5000), 0)
	d, ok := c.lookup(h, 2, 300*time.Millisecond+1)
	want := Decision{Limit: 10, Remaining: 1, RetryAfterMs: 500, ResetAfterMs: 4700, FromCache: true}
	if !ok || d != want {
		t.Fatalf("got %+v %v, want %+v", d, ok, want)
	}
	for _, cost := range []int64{0, 1, 3} {
		if _, ok := c.lookup(h, cost, time.Millisecond); ok {
			t.Errorf("cost %d answered from a refusal of cost 2", cost)
		}
	}
	if _, ok := c.lookup(h, 2, 800*time.Millisecond); ok {
		t.Error("answered at its retry time")
	}
	c.record(h, 2, refusal(10, 1, 800, 5000), time.Second)
	c.record(h, 1, Decision{Allowed: true, Limit: 10}, time.Second)
	if _, ok := c.lookup(h, 2, time.Second); ok {
		t.Error("an admission did not drop the entry")
	}
	c.record(h, 2, refusal(10, 1, 800, 5000), 2*time.Second)
	c.forget(h)
	if _, ok := c.lookup(h, 2, 2*time.Second); ok {
		t.Error("forget did not drop the entry")
	}
}

// Not cached: a peek's refusal, a retry of 0 or -1; a peek updates a live entry's report.
func TestCacheKeepsOnlyRefusalsWithARetry(t *testing.T) {
	c := newOverLimitCache(16)
	h := c.keyHash("api", "u2")
	c.record(h, 0, refusal(10, 0, 500, 900), 0)
	c.record(h, 1, refusal(10, 0, -1, 900), 0)
	c.record(h, 1, refusal(10, 0, 0, 900), 0)
	if _, ok := c.lookup(h, 1, 0); ok {
		t.Fatal("cached a refusal without a retry time, or a peek's")
	}
	c.record(h, 1, refusal(10, 0, 500, 900), 0)
	c.record(h, 0, Decision{Allowed: true, Limit: 12, Remaining: 3, ResetAfterMs: 100}, 0)
	if d, ok := c.lookup(h, 1, 0); !ok || d.Limit != 12 || d.Remaining != 3 || d.ResetAfterMs != 100 {
		t.Fatalf("a peek's report not kept: %+v %v", d, ok)
	}
}

// The cache is bounded: many keys in a small cache keep at most its size, each answer right
// for its own key (seeded keys; a lookup finds only what was recorded for that key).
func TestCacheIsBoundedAndKeysStayApart(t *testing.T) {
	c := newOverLimitCache(8)
	for i := 0; i < 1000; i++ {
		h := c.keyHash("r", string(rune('a'+i%26))+string(rune(i)))
		c.record(h, int64(i%5+1), refusal(int64(i), 0, int64(1000+i), 0), 0)
		if d, ok := c.lookup(h, int64(i%5+1), 0); !ok || d.Limit != int64(i) {
			t.Fatalf("key %d: the entry just recorded is not answered: %+v %v", i, d, ok)
		}
	}
	used := 0
	for _, e := range c.slots {
		if e.cost != 0 {
			used++
		}
	}
	if len(c.slots) != 8 || used > 8 {
		t.Fatalf("%d slots, %d used", len(c.slots), used)
	}
	if c.keyHash("ab", "c") == c.keyHash("a", "bc") {
		t.Fatal("(ab, c) and (a, bc) are one key")
	}
	z := newOverLimitCache(0)
	z.record(1, 1, refusal(1, 0, 10, 0), 0)
	if _, ok := z.lookup(1, 1, 0); ok {
		t.Fatal("a cache of size 0 answered")
	}
}
