package sluice

// cases_test.go - runs every case of tests/sdk/cases.json (the table each language's client
// runs; its "about" says what the ops and expectations mean) against a real sluiced.

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

type sdkStep struct {
	Op        string                     `json:"op"`
	Rule      string                     `json:"rule"`
	Key       string                     `json:"key"`
	Cost      *int64                     `json:"cost"`
	TimeoutMs int64                      `json:"timeout_ms"`
	Reserved  int64                      `json:"reserved"`
	Actual    int64                      `json:"actual"`
	Save      string                     `json:"save"`
	Hold      json.RawMessage            `json:"hold"`
	Ms        int64                      `json:"ms"`
	Priority  string                     `json:"priority"`
	LatencyMs *float64                   `json:"latency_ms"`
	Dropped   bool                       `json:"dropped"`
	Expect    map[string]json.RawMessage `json:"expect"`
}

type sdkCase struct {
	Name    string `json:"name"`
	Options struct {
		CacheSize     *int   `json:"cache_size"`
		OnUnreachable string `json:"on_unreachable"`
	} `json:"options"`
	Steps []sdkStep `json:"steps"`
}

func TestSharedCases(t *testing.T) {
	raw, err := os.ReadFile(serverEnv(t, "SLUICE_CASES"))
	if err != nil {
		t.Fatal(err)
	}
	var table struct {
		Cases []sdkCase `json:"cases"`
	}
	if err := json.Unmarshal(raw, &table); err != nil {
		t.Fatal(err)
	}
	if len(table.Cases) == 0 {
		t.Fatal("no cases in the table")
	}
	named := map[string]bool{}
	for _, c := range table.Cases {
		if named[c.Name] {
			t.Fatalf("two cases named %q", c.Name) // t.Run would tell them apart by a suffix only
		}
		named[c.Name] = true
	}
	for _, c := range table.Cases {
		c := c
		t.Run(c.Name, func(t *testing.T) { runCase(t, c) })
	}
}

// caseRun is one case's client, its fake clock, its server and its saved holds.
type caseRun struct {
	c     *Client
	nowNs atomic.Int64
	sp    *spare
	holds map[string]int64
}

func runCase(t *testing.T, sc sdkCase) {
	r := &caseRun{holds: map[string]int64{}}
	opts := Options{OnUnreachable: Unreachable(sc.Options.OnUnreachable),
		Clock: func() time.Duration { return time.Duration(r.nowNs.Load()) }}
	if sc.Options.CacheSize != nil {
		opts.CacheSize = *sc.Options.CacheSize
		if opts.CacheSize == 0 {
			opts.CacheSize = -1 // the table's 0 is "off"
		}
	}
	for _, st := range sc.Steps {
		if st.Op == "stop_server" {
			sp := takeSpare(t)
			r.sp, opts.Addr = &sp, sp.addr
		}
	}
	r.c = newClient(t, opts)
	for i, st := range sc.Steps {
		got, err := r.step(t, st)
		if msg := checkExpect(st.Expect, got, err); msg != "" {
			t.Fatalf("step %d (%s %s %s): %s", i, st.Op, st.Rule, st.Key, msg)
		}
	}
}

// step runs one op; got holds the fields its expect may name.
func (r *caseRun) step(t *testing.T, st sdkStep) (map[string]interface{}, error) {
	ctx, key := bg(t), runID+st.Key
	cost := int64(1)
	if st.Cost != nil {
		cost = *st.Cost
	}
	var d Decision
	var err error
	ro := RequestOptions{Priority: st.Priority}
	switch st.Op {
	case "allow":
		d, err = r.c.AllowWith(ctx, st.Rule, key, cost, ro)
	case "peek":
		d, err = r.c.PeekWith(ctx, st.Rule, key, ro)
	case "settle":
		d, err = r.c.Settle(ctx, st.Rule, key, st.Reserved, st.Actual)
	case "reset":
		return nil, r.c.Reset(ctx, st.Rule, key)
	case "acquire":
		d, err = r.c.AcquireWith(ctx, st.Rule, key, cost, time.Duration(st.TimeoutMs)*time.Millisecond, ro)
		if err == nil && st.Save != "" {
			r.holds[st.Save] = d.HoldID
		}
	case "release":
		o := ReleaseOptions{Dropped: st.Dropped}
		if st.LatencyMs != nil {
			o.Latency = time.Duration(*st.LatencyMs * float64(time.Millisecond))
		}
		return nil, r.c.ReleaseWith(ctx, st.Rule, key, r.holdID(t, st.Hold), o)
	case "advance_ms":
		r.nowNs.Add(st.Ms * int64(time.Millisecond))
		return nil, nil
	case "stop_server":
		r.sp.stop(t)
		return nil, nil
	case "cache_hits":
		return map[string]interface{}{"count": r.c.CacheHits()}, nil
	default:
		t.Fatalf("unknown op %q", st.Op)
	}
	return map[string]interface{}{"allowed": d.Allowed, "limit": d.Limit,
		"remaining": d.Remaining, "retry_after_ms": d.RetryAfterMs, "reset_after_ms": d.ResetAfterMs,
		"from_cache": d.FromCache, "fallback": d.Fallback, "hold": d.HoldID != 0}, err
}

func (r *caseRun) holdID(t *testing.T, raw json.RawMessage) int64 {
	var name string
	if json.Unmarshal(raw, &name) == nil {
		id, ok := r.holds[name]
		if !ok {
			t.Fatalf("no hold saved as %q", name)
		}
		return id
	}
	var id int64
	if err := json.Unmarshal(raw, &id); err != nil {
		t.Fatalf("hold %s: neither a saved name nor an id", raw)
	}
	return id
}

// checkExpect returns "" when got and err are what expect says, else what differs.
func checkExpect(expect map[string]json.RawMessage, got map[string]interface{}, err error) string {
	if want, ok := expect["error"]; ok {
		var sub string
		json.Unmarshal(want, &sub)
		if err == nil {
			return fmt.Sprintf("no error, want one containing %q (got %v)", sub, got)
		}
		if !strings.Contains(strings.ToLower(err.Error()), strings.ToLower(sub)) {
			return fmt.Sprintf("error %q does not contain %q", err, sub)
		}
		return ""
	}
	if err != nil {
		return "unexpected error: " + err.Error()
	}
	for field, want := range expect {
		v, ok := got[field]
		if !ok {
			return fmt.Sprintf("the op has no field %q", field)
		}
		if msg := matchValue(want, v); msg != "" {
			return fmt.Sprintf("%s: %s (got %v)", field, msg, got)
		}
	}
	return ""
}

func matchValue(want json.RawMessage, v interface{}) string {
	var cmp map[string]int64
	if json.Unmarshal(want, &cmp) == nil {
		n, _ := v.(int64)
		if gt, ok := cmp["gt"]; ok && !(n > gt) {
			return fmt.Sprintf("%d is not > %d", n, gt)
		}
		if lt, ok := cmp["lt"]; ok && !(n < lt) {
			return fmt.Sprintf("%d is not < %d", n, lt)
		}
		return ""
	}
	switch x := v.(type) {
	case bool:
		var b bool
		if json.Unmarshal(want, &b) != nil || b != x {
			return fmt.Sprintf("got %v, want %s", x, want)
		}
	case int64:
		var n int64
		if json.Unmarshal(want, &n) != nil || n != x {
			return fmt.Sprintf("got %d, want %s", x, want)
		}
	}
	return ""
}
