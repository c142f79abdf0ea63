package sluice

import (
	"encoding/json"
	"os"
	"reflect"
	"testing"
)

// The same seed gives the C client's delays (slc_backoff_ms, src/client/retry.c), draw by draw:
// the sequences of tests/sdk/backoff.json, the table every client package runs.
func TestBackoffMatchesTheCClient(t *testing.T) {
	raw, err := os.ReadFile(serverEnv(t, "SLUICE_BACKOFF"))
	if err != nil {
		t.Fatal(err)
	}
	var table struct {
		Sequences []struct {
			Seed     uint64  `json:"seed"`
			BaseMs   int64   `json:"base_ms"`
			CapMs    int64   `json:"cap_ms"`
			Attempts []int   `json:"attempts"`
			DelaysMs []int64 `json:"delays_ms"`
		} `json:"sequences"`
	}
	if err := json.Unmarshal(raw, &table); err != nil {
		t.Fatal(err)
	}
	if len(table.Sequences) == 0 {
		t.Fatal("backoff.json has no sequences")
	}
	for _, s := range table.Sequences {
		state := s.Seed
		var got []int64
		for _, a := range s.Attempts {
			got = append(got, BackoffMs(a, s.BaseMs, s.CapMs, &state))
		}
		if !reflect.DeepEqual(got, s.DelaysMs) {
			t.Errorf("seed %d, base %d, cap %d: got %v, want %v", s.Seed, s.BaseMs, s.CapMs, got, s.DelaysMs)
		}
	}
}

// The fallbacks of tests/sdk/backoff.json: FailClosed refuses with the client's backoff, by
// default (the same base and cap in every package) and with its own BackoffBaseMs and
// BackoffCapMs, against a port that refuses. The generator is seeded as the table says.
func TestFailClosedBackoffIsTheTables(t *testing.T) {
	raw, err := os.ReadFile(serverEnv(t, "SLUICE_BACKOFF"))
	if err != nil {
		t.Fatal(err)
	}
	var table struct {
		Fallbacks []struct {
			Name    string `json:"name"`
			Options struct {
				BaseMs int64 `json:"backoff_base_ms"`
				CapMs  int64 `json:"backoff_cap_ms"`
			} `json:"options"`
			Seed         uint64  `json:"seed"`
			BaseMs       int64   `json:"base_ms"`
			CapMs        int64   `json:"cap_ms"`
			RetryAfterMs []int64 `json:"retry_after_ms"`
		} `json:"fallbacks"`
	}
	if err := json.Unmarshal(raw, &table); err != nil {
		t.Fatal(err)
	}
	if len(table.Fallbacks) < 2 {
		t.Fatal("backoff.json has fewer than two fallbacks")
	}
	refused := refusedAddr(t)
	defaults := 0
	for _, f := range table.Fallbacks {
		t.Run(f.Name, func(t *testing.T) {
			if f.Options.BaseMs == 0 && f.Options.CapMs == 0 {
				defaults++
				if f.BaseMs != DefaultBackoffBaseMs || f.CapMs != DefaultBackoffCapMs {
					t.Fatalf("the table's defaults are %d and %d, the package's %d and %d",
						f.BaseMs, f.CapMs, DefaultBackoffBaseMs, DefaultBackoffCapMs)
				}
			}
			state := f.Seed
			var drawn []int64
			for i := range f.RetryAfterMs {
				d := BackoffMs(i, f.BaseMs, f.CapMs, &state)
				if d < 1 {
					d = 1 // a refusal always says to wait
				}
				drawn = append(drawn, d)
			}
			if !reflect.DeepEqual(drawn, f.RetryAfterMs) {
				t.Fatalf("the table's delays %v are not BackoffMs's %v", f.RetryAfterMs, drawn)
			}
			seed := f.Seed
			c := newClient(t, Options{Addr: refused, OnUnreachable: FailClosed,
				BackoffBaseMs: f.Options.BaseMs, BackoffCapMs: f.Options.CapMs, Seed: &seed})
			if c.opts.BackoffBaseMs != f.BaseMs || c.opts.BackoffCapMs != f.CapMs {
				t.Fatalf("the client's backoff is %d and %d, want %d and %d",
					c.opts.BackoffBaseMs, c.opts.BackoffCapMs, f.BaseMs, f.CapMs)
			}
			var got []int64
			for i := range f.RetryAfterMs {
				d, err := c.Allow(bg(t), "sdk-fixed", "k", 1)
				if err != nil || d.Allowed || !d.Fallback {
					t.Fatalf("call %d: got %+v %v, want a refusal marked Fallback", i, d, err)
				}
				got = append(got, d.RetryAfterMs)
			}
			if !reflect.DeepEqual(got, f.RetryAfterMs) {
				t.Fatalf("RetryAfterMs %v, want %v", got, f.RetryAfterMs)
			}
		})
	}
	if defaults != 1 {
		t.Fatalf("%d fallbacks with the defaults, want 1", defaults)
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
