package sluice

// cache.go - the over-limit cache: per (rule, key), the latest cost sluiced refused and until
// when that refusal holds, so that the same request, which sluiced would refuse anyway with the
// same retry time less the time since, is answered without a round trip. The same cache as the
// C client's (src/remote/overlimit_cache.c), with the same rules:
//
//   - remembered: a refusal of a cost >= 1 with retry_after_ms > 0, until asked + retry_after;
//   - answered: a call of that very cost before then (a smaller cost may fit, a larger one
//     fits later than the server said for this one: those ask the server);
//   - dropped: on any admission of the key, on a reset, and on a settle or release that gives
//     units back (the caller calls forget);
//   - never cached: admissions, peeks, acquires.
//
// Layout: nslots entries; a (rule, key) is named by a 64-bit seeded hash and may sit in any of
// probeMax slots from the hash's place (wrapping); an insert takes a free or expired slot
// there, else the one whose hold ends first. So the memory is fixed and a lookup costs at most
// probeMax comparisons. Pure: time comes in as now (any monotonic origin); the caller locks.

import (
	"encoding/binary"
	"hash/maphash"
	"math"
	"math/bits"
	"time"
)

// DefaultCacheSize is the over-limit cache's size unless Options.CacheSize says otherwise.
const DefaultCacheSize = 1024

const probeMax = 8 // slots one (rule, key) may occupy

type olcEntry struct {
	hash      uint64        // the (rule, key)'s hash
	cost      int64         // the cost refused, units; 0: a free slot
	holdUntil time.Duration // the refusal holds while now < holdUntil
	resetAt   time.Duration // when the key is back to a fresh quota
	limit     int64         // sluiced's last report for the key, units
	remaining int64         // likewise
}

type overLimitCache struct {
	slots []olcEntry
	probe int
	seed  maphash.Seed
}

func newOverLimitCache(size int) *overLimitCache {
	c := &overLimitCache{slots: make([]olcEntry, size), probe: probeMax, seed: maphash.MakeSeed()}
	if size < probeMax {
		c.probe = size
	}
	return c
}

// keyHash names (rule, key): ("ab", "c") and ("a", "bc") differ (the rule's length goes first).
func (c *overLimitCache) keyHash(rule, key string) uint64 {
	var h maphash.Hash
	h.SetSeed(c.seed)
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(len(rule)))
	h.Write(n[:])
	h.WriteString(rule)
	h.WriteString(key)
	return h.Sum64()
}

func (c *overLimitCache) slot(h uint64, i int) *olcEntry {
	start, _ := bits.Mul64(h, uint64(len(c.slots)))
	k := int(start) + i
	if k >= len(c.slots) {
		k -= len(c.slots)
	}
	return &c.slots[k]
}

func (c *overLimitCache) find(h uint64) *olcEntry {
	for i := 0; i < c.probe; i++ {
		if e := c.slot(h, i); e.cost != 0 && e.hash == h {
			return e
		}
	}
	return nil
}

// lookup answers a call of cost for h at now when a live entry of that very cost holds: a
// refusal with sluiced's limit and remaining and its times less the time since (rounded up to
// the millisecond, so a caller who waits that long is not early).
func (c *overLimitCache) lookup(h uint64, cost int64, now time.Duration) (Decision, bool) {
	e := c.find(h)
	if e == nil {
		return Decision{}, false
	}
	if now >= e.holdUntil {
		*e = olcEntry{}
		return Decision{}, false
	}
	if cost != e.cost {
		return Decision{}, false
	}
	d := Decision{Allowed: false, Limit: e.limit, Remaining: e.remaining, FromCache: true,
		RetryAfterMs: ceilMs(e.holdUntil - now)}
	if now < e.resetAt {
		d.ResetAfterMs = ceilMs(e.resetAt - now)
	}
	return d, true
}

// record tells the cache what sluiced answered for a call of cost for h, sent at asked.
func (c *overLimitCache) record(h uint64, cost int64, d Decision, asked time.Duration) {
	if len(c.slots) == 0 {
		return
	}
	e := c.find(h)
	if e != nil && asked >= e.holdUntil {
		*e = olcEntry{}
		e = nil
	}
	holds := !d.Allowed && cost >= 1 && d.RetryAfterMs > 0
	switch {
	case d.Allowed && cost >= 1 && e != nil:
		*e = olcEntry{} // the key's usage moved: the entry's retry time is not sluiced's any more
	case holds:
		if e == nil {
			e = c.claim(h, asked)
		}
		*e = olcEntry{hash: h, cost: cost, holdUntil: addSat(asked, msDur(d.RetryAfterMs))}
		fallthrough
	case e != nil:
		e.limit, e.remaining = d.Limit, d.Remaining
		e.resetAt = addSat(asked, msDur(d.ResetAfterMs))
	}
}

// claim returns the slot a new entry for h goes to: free or expired, else the one whose hold
// ends first.
func (c *overLimitCache) claim(h uint64, now time.Duration) *olcEntry {
	var victim *olcEntry
	for i := 0; i < c.probe; i++ {
		e := c.slot(h, i)
		if e.cost == 0 || now >= e.holdUntil {
			return e
		}
		if victim == nil || e.holdUntil < victim.holdUntil {
			victim = e
		}
	}
	return victim
}

func (c *overLimitCache) forget(h uint64) {
	if e := c.find(h); e != nil {
		*e = olcEntry{}
	}
}

// msDur converts milliseconds (>= 0 used) to a Duration, saturating.
func msDur(ms int64) time.Duration {
	if ms <= 0 {
		return 0
	}
	if ms > math.MaxInt64/int64(time.Millisecond) {
		return math.MaxInt64
	}
	return time.Duration(ms) * time.Millisecond
}

func addSat(a, b time.Duration) time.Duration {
	if b > 0 && a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// ceilMs is d in milliseconds, rounded up.
func ceilMs(d time.Duration) int64 {
	ms := int64(d / time.Millisecond)
	if d%time.Millisecond != 0 {
		ms++
	}
	return ms
}
