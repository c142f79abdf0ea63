package sluice

// client.go - the client of sluiced: decisions as a record, the over-limit cache in front of
// them, what a decision does when sluiced cannot be reached. A Client is safe for concurrent
// use by many goroutines; it holds a pool of connections (conn.go).

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Decision is one rate-limit decision, as SL.ALLOW, SL.PEEK, SL.SETTLE and SL.ACQUIRE report it.
type Decision struct {
	Allowed      bool  // admitted (maybe after RetryAfterMs: a max_delay rule's delay)
	Limit        int64 // the rule's capacity, units
	Remaining    int64 // units a request could still take, after this one
	RetryAfterMs int64 // refused: wait this long before this cost can be admitted; -1: never
	ResetAfterMs int64 // until the key is back to a fresh quota, ms
	FromCache    bool  // answered by the over-limit cache, not by sluiced
	Fallback     bool  // sluiced could not be reached: Options.OnUnreachable decided
	HoldID       int64 // Acquire: the hold to Release; 0 when no hold was made
}

// Unreachable is what a decision does when sluiced cannot be reached (Options.OnUnreachable).
type Unreachable string

const (
	// Raise returns the *UnreachableError (the default).
	Raise Unreachable = "raise"
	// FailOpen admits: {Allowed: true, Fallback: true}, every number 0.
	FailOpen Unreachable = "allow"
	// FailClosed refuses: {Allowed: false, Fallback: true, RetryAfterMs: the backoff delay}.
	FailClosed Unreachable = "deny"
)

// FailClosed's backoff when Options leave it at 0: the same in every sluice client package, and
// the C client's fallback in docs/client.md ("When sluiced cannot be reached").
const (
	DefaultBackoffBaseMs = 50
	DefaultBackoffCapMs  = 2000
)

// Options configure a Client. The zero value of each field is its default.
type Options struct {
	Addr          string        // sluiced's RESP address, host:port; default 127.0.0.1:6390
	User          string        // AUTH user ("default" or "admin"); empty: AUTH password only
	Password      string        // sent with AUTH on every new connection when not empty
	TLSConfig     *tls.Config   // TLS to sluiced (its --tls-cert); nil: plain TCP
	PoolSize      int           // most connections open at once; default 8
	DialTimeout   time.Duration // bounds a connect and its TLS handshake and AUTH; default 1s
	Timeout       time.Duration // bounds each call's exchange; default 1s (a ctx deadline may cut it)
	CacheSize     int           // over-limit cache entries; 0: DefaultCacheSize, < 0: no cache
	OnUnreachable Unreachable   // Raise (default), FailOpen or FailClosed
	BackoffBaseMs int64         // FailClosed's backoff: base, default 50 ms (every package's)
	BackoffCapMs  int64         // and cap, default 2000 ms (every package's)
	// Seed seeds the backoff's generator (SplitMix64, as every package's): the same seed gives
	// the same delays. nil: a random seed.
	Seed *uint64
	// Clock is a monotonic clock for the over-limit cache (any origin, never decreasing); nil
	// reads the system's. Tests give a fake one.
	Clock func() time.Duration
	// Dial opens the connection; nil uses a net.Dialer.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

// Client is a client of sluiced. Make one with New and share it; Close it when done.
type Client struct {
	opts  Options
	slots chan struct{} // one token per open connection, PoolSize of them
	idle  chan *conn    // connections ready for use

	mu    sync.Mutex // guards cache and rng
	cache *overLimitCache
	rng   uint64

	hits     atomic.Int64 // calls the cache answered
	failures atomic.Int64 // consecutive calls that could not reach sluiced
	closed   atomic.Bool
}

// New makes a client with opts (connections are made on first use). It returns an error only
// for options it cannot use.
func New(opts Options) (*Client, error) {
	if opts.Addr == "" {
		opts.Addr = "127.0.0.1:6390"
	}
	if _, _, err := net.SplitHostPort(opts.Addr); err != nil {
		return nil, fmt.Errorf("sluice: Addr %q: %v", opts.Addr, err)
	}
	switch opts.OnUnreachable {
	case "":
		opts.OnUnreachable = Raise
	case Raise, FailOpen, FailClosed:
	default:
		return nil, fmt.Errorf("sluice: OnUnreachable %q: must be \"raise\", \"allow\" or \"deny\"",
			opts.OnUnreachable)
	}
	setDefaults(&opts)
	c := &Client{opts: opts, slots: make(chan struct{}, opts.PoolSize),
		idle: make(chan *conn, opts.PoolSize), cache: newOverLimitCache(0)}
	if opts.CacheSize >= 0 {
		c.cache = newOverLimitCache(opts.CacheSize)
	}
	if opts.Seed != nil {
		c.rng = *opts.Seed
	} else {
		var seed [8]byte
		rand.Read(seed[:])
		c.rng = binary.LittleEndian.Uint64(seed[:])
	}
	return c, nil
}

func setDefaults(o *Options) {
	if o.PoolSize <= 0 {
		o.PoolSize = 8
	}
	if o.DialTimeout <= 0 {
		o.DialTimeout = time.Second
	}
	if o.Timeout <= 0 {
		o.Timeout = time.Second
	}
	if o.CacheSize == 0 {
		o.CacheSize = DefaultCacheSize
	}
	if o.BackoffBaseMs <= 0 {
		o.BackoffBaseMs = DefaultBackoffBaseMs
	}
	if o.BackoffCapMs <= 0 {
		o.BackoffCapMs = DefaultBackoffCapMs
	}
	if o.Clock == nil {
		start := time.Now()
		o.Clock = func() time.Duration { return time.Since(start) }
	}
	if o.Dial == nil {
		var d net.Dialer
		o.Dial = d.DialContext
	}
}

// Close closes the idle connections; calls after it fail. Calls in progress finish.
func (c *Client) Close() error {
	c.closed.Store(true)
	for {
		select {
		case cn := <-c.idle:
			cn.nc.Close()
		default:
			return nil
		}
	}
}

// CacheHits is the count of calls the over-limit cache answered since the client was made.
func (c *Client) CacheHits() int64 { return c.hits.Load() }

// RequestOptions are the options of AllowWith, PeekWith and AcquireWith. The zero value is none.
type RequestOptions struct {
	// Priority is one of the rule's priorities (PRIORITY p); "": none, the rule's lowest. The
	// decision is that priority's view (Remaining: what a request of that priority could still
	// take). A request with a priority is never answered by the over-limit cache, nor is its
	// refusal kept there (a refusal of one priority says nothing of another). A priority the
	// rule lacks, or one for a rule without priorities, is sluiced's *ServerError.
	Priority string
}

// ReleaseOptions are the options of ReleaseWith: what the hold's work did, reported to an
// adaptive limit (a rule with `adaptive: aimd` or `vegas`; a fixed limit ignores them). The
// zero value reports nothing.
type ReleaseOptions struct {
	// Latency is the work's latency (LATENCY), sent in whole microseconds; 0: not reported. At
	// most LatencyMax; a negative or a longer one is an error, and nothing is sent.
	Latency time.Duration
	// Dropped: the work was dropped, timed out or failed for load (DROPPED).
	Dropped bool
}

// LatencyMax is the longest latency a release reports.
const LatencyMax = time.Hour

// Allow asks for cost units (SL.ALLOW rule key [COST n]); cost 0 peeks. A refusal is a
// Decision with Allowed false, not an error. Errors: *ServerError (an unknown rule, a cost the
// rule can never admit: sluiced's text), *UnreachableError (unless OnUnreachable decides),
// *ProtocolError, the ctx's cancellation.
func (c *Client) Allow(ctx context.Context, rule, key string, cost int64) (Decision, error) {
	return c.AllowWith(ctx, rule, key, cost, RequestOptions{})
}

// AllowWith is Allow with options: SL.ALLOW rule key [COST n] [PRIORITY p].
func (c *Client) AllowWith(ctx context.Context, rule, key string, cost int64, o RequestOptions) (Decision, error) {
	res, err := c.Pipeline(ctx, []Request{{Rule: rule, Key: key, Cost: cost, Priority: o.Priority}})
	if err != nil {
		return Decision{}, err
	}
	return res[0].Decision, res[0].Err
}

// Peek reports the key without charging it (SL.PEEK rule key); never answered by the cache.
func (c *Client) Peek(ctx context.Context, rule, key string) (Decision, error) {
	return c.PeekWith(ctx, rule, key, RequestOptions{})
}

// PeekWith is Peek with options: SL.PEEK rule key [PRIORITY p], that priority's view.
func (c *Client) PeekWith(ctx context.Context, rule, key string, o RequestOptions) (Decision, error) {
	res, err := c.Pipeline(ctx, []Request{{Rule: rule, Key: key, Peek: true, Priority: o.Priority}})
	if err != nil {
		return Decision{}, err
	}
	return res[0].Decision, res[0].Err
}

// Request is one decision of a Pipeline call: SL.ALLOW rule key [COST n] [PRIORITY p], or
// SL.PEEK rule key [PRIORITY p] when Peek.
type Request struct {
	Rule, Key string
	Cost      int64 // units (Allow); ignored by a peek
	Peek      bool
	Priority  string // RequestOptions.Priority: "" none; else the over-limit cache stays out
}

// Result is a Request's answer: a Decision, or an error of that request alone (a
// *ServerError, or an invalid cost).
type Result struct {
	Decision Decision
	Err      error
}

// Pipeline decides many requests in one round trip: those the over-limit cache cannot answer
// are written together in one write on one connection, and their replies read in order. The
// results are in the order of reqs. The error is for the exchange as a whole (an unreachable
// sluiced under Raise, a protocol error, the ctx's cancellation); under FailOpen or FailClosed
// an unreachable sluiced gives every request the fallback decision instead.
func (c *Client) Pipeline(ctx context.Context, reqs []Request) ([]Result, error) {
	res := make([]Result, len(reqs))
	var cmds [][]string
	var sent []int
	var hashes []uint64
	c.mu.Lock()
	now := c.opts.Clock()
	for i, rq := range reqs {
		h := c.cache.keyHash(rq.Rule, rq.Key)
		if !rq.Peek && rq.Cost < 0 {
			res[i].Err = fmt.Errorf("sluice: cost must be >= 0, not %d", rq.Cost)
			continue
		}
		if !rq.Peek && rq.Priority == "" {
			if d, ok := c.cache.lookup(h, rq.Cost, now); ok {
				c.hits.Add(1)
				res[i].Decision = d
				continue
			}
		}
		cmds = append(cmds, requestArgs(rq))
		sent = append(sent, i)
		hashes = append(hashes, h)
	}
	c.mu.Unlock()
	if len(cmds) == 0 {
		return res, nil
	}
	reps, err := c.roundTrip(ctx, cmds)
	if err != nil {
		return c.pipelineFailed(res, sent, err)
	}
	c.failures.Store(0)
	c.mu.Lock()
	defer c.mu.Unlock()
	for j, i := range sent {
		d, err := decisionFromReply(reps[j], false)
		res[i] = Result{Decision: d, Err: err}
		if err == nil && reqs[i].Priority == "" {
			cost := reqs[i].Cost
			if reqs[i].Peek {
				cost = 0
			}
			c.cache.record(hashes[j], cost, d, now)
		}
	}
	return res, nil
}

func requestArgs(rq Request) []string {
	var args []string
	switch {
	case rq.Peek:
		args = []string{"SL.PEEK", rq.Rule, rq.Key}
	case rq.Cost == 1:
		args = []string{"SL.ALLOW", rq.Rule, rq.Key}
	default:
		args = []string{"SL.ALLOW", rq.Rule, rq.Key, "COST", strconv.FormatInt(rq.Cost, 10)}
	}
	if rq.Priority != "" {
		args = append(args, "PRIORITY", rq.Priority)
	}
	return args
}

// pipelineFailed gives the requests that were sent the fallback decision, or returns err.
func (c *Client) pipelineFailed(res []Result, sent []int, err error) ([]Result, error) {
	d, ferr := c.fallback(err)
	if ferr != nil {
		return nil, ferr
	}
	for _, i := range sent {
		res[i].Decision = d
	}
	return res, nil
}

// fallback is what a decision is when its call failed with err: under FailOpen or FailClosed
// an *UnreachableError becomes a Decision marked Fallback; anything else stays an error.
func (c *Client) fallback(err error) (Decision, error) {
	var ue *UnreachableError
	if !errors.As(err, &ue) || c.opts.OnUnreachable == Raise {
		return Decision{}, err
	}
	attempt := c.failures.Add(1) - 1
	if c.opts.OnUnreachable == FailOpen {
		return Decision{Allowed: true, Fallback: true}, nil
	}
	c.mu.Lock()
	wait := BackoffMs(int(minInt64(attempt, 62)), c.opts.BackoffBaseMs, c.opts.BackoffCapMs, &c.rng)
	c.mu.Unlock()
	if wait < 1 {
		wait = 1 // a refusal always says to wait
	}
	return Decision{Allowed: false, Fallback: true, RetryAfterMs: wait}, nil
}

func minInt64(a, b int64) int64 {
	if a < b {
		return a
	}
	return b
}

// Settle settles a reservation of reserved units with its actual cost (SL.SETTLE rule key
// reserved actual): a smaller actual gives units back (and the cache forgets the key), a
// larger one is charged. It returns the key's decision after the settle, as a peek reports it.
// OnUnreachable does not apply: an unreachable sluiced is an error.
func (c *Client) Settle(ctx context.Context, rule, key string, reserved, actual int64) (Decision, error) {
	if reserved < 0 || actual < 0 {
		return Decision{}, fmt.Errorf("sluice: reserved and actual must be >= 0, not %d and %d",
			reserved, actual)
	}
	givesBack := actual < reserved
	if givesBack {
		c.forget(rule, key)
	}
	rep, err := c.command(ctx, "SL.SETTLE", rule, key, strconv.FormatInt(reserved, 10),
		strconv.FormatInt(actual, 10))
	if err != nil {
		return Decision{}, err
	}
	if givesBack {
		c.forget(rule, key) // and a refusal that was on its way meanwhile
	}
	return decisionFromReply(rep, false)
}

// Reset forgets the key's usage (SL.RESET rule key; sluiced's admin permission), and the
// cache forgets it too.
func (c *Client) Reset(ctx context.Context, rule, key string) error {
	c.forget(rule, key)
	_, err := c.command(ctx, "SL.RESET", rule, key)
	c.forget(rule, key)
	return err
}

// Acquire takes cost units of an in-flight rule (algorithm: concurrency) as one hold that
// lives at most timeout (0: the rule's hold_timeout): SL.ACQUIRE rule key [COST n] [TIMEOUT
// ms]. Admitted, Decision.HoldID names the hold to Release. Never answered by the cache.
func (c *Client) Acquire(ctx context.Context, rule, key string, cost int64, timeout time.Duration) (Decision, error) {
	return c.AcquireWith(ctx, rule, key, cost, timeout, RequestOptions{})
}

// AcquireWith is Acquire with options: SL.ACQUIRE rule key [COST n] [TIMEOUT ms] [PRIORITY p].
func (c *Client) AcquireWith(ctx context.Context, rule, key string, cost int64, timeout time.Duration,
	o RequestOptions) (Decision, error) {
	if cost < 0 {
		return Decision{}, fmt.Errorf("sluice: cost must be >= 0, not %d", cost)
	}
	args := []string{"SL.ACQUIRE", rule, key}
	if cost != 1 {
		args = append(args, "COST", strconv.FormatInt(cost, 10))
	}
	if timeout > 0 {
		args = append(args, "TIMEOUT", strconv.FormatInt(ceilMs(timeout), 10))
	}
	if o.Priority != "" {
		args = append(args, "PRIORITY", o.Priority)
	}
	rep, err := c.command(ctx, args...)
	if err != nil {
		var se *ServerError
		if errors.As(err, &se) {
			return Decision{}, err
		}
		return c.fallback(err)
	}
	c.failures.Store(0)
	return decisionFromReply(rep, true)
}

// Release gives a hold's units back at once (SL.RELEASE rule key id). A hold that is not live
// (released before, expired, never made) is a *ServerError "ERR no such hold: ...", and
// nothing changes.
func (c *Client) Release(ctx context.Context, rule, key string, holdID int64) error {
	return c.ReleaseWith(ctx, rule, key, holdID, ReleaseOptions{})
}

// ReleaseWith is Release with a report of the hold's work: SL.RELEASE rule key id [LATENCY
// <us>us] [DROPPED]. A Latency outside 0 .. LatencyMax is an error, and nothing is sent.
func (c *Client) ReleaseWith(ctx context.Context, rule, key string, holdID int64, o ReleaseOptions) error {
	args := []string{"SL.RELEASE", rule, key, strconv.FormatInt(holdID, 10)}
	if o.Latency < 0 || o.Latency > LatencyMax {
		return fmt.Errorf("sluice: latency must be 0 .. %v, not %v", LatencyMax, o.Latency)
	}
	if o.Latency > 0 {
		us := (o.Latency + time.Microsecond/2) / time.Microsecond // rounded to the microsecond
		args = append(args, "LATENCY", strconv.FormatInt(int64(us), 10)+"us")
	}
	if o.Dropped {
		args = append(args, "DROPPED")
	}
	_, err := c.command(ctx, args...)
	if err == nil {
		c.forget(rule, key)
	}
	return err
}

// Do sends any command (SL.RULE, INFO, ...) and returns its reply; an error reply is a
// *ServerError.
func (c *Client) Do(ctx context.Context, args ...string) (Reply, error) {
	return c.command(ctx, args...)
}

func (c *Client) command(ctx context.Context, args ...string) (Reply, error) {
	reps, err := c.roundTrip(ctx, [][]string{args})
	if err != nil {
		return Reply{}, err
	}
	if reps[0].Kind == KindError {
		return Reply{}, &ServerError{Msg: reps[0].Str}
	}
	return reps[0], nil
}

func (c *Client) forget(rule, key string) {
	c.mu.Lock()
	c.cache.forget(c.cache.keyHash(rule, key))
	c.mu.Unlock()
}

// decisionFromReply decodes [allowed, limit, remaining, retry_after_ms, reset_after_ms] (and
// hold_id when withHold). An error reply is a *ServerError; any other shape a *ProtocolError.
func decisionFromReply(rep Reply, withHold bool) (Decision, error) {
	if rep.Kind == KindError {
		return Decision{}, &ServerError{Msg: rep.Str}
	}
	want := 5
	if withHold {
		want = 6
	}
	if rep.Kind != KindArray || len(rep.Elems) != want {
		return Decision{}, protoErr("a decision must be an array of %d integers", want)
	}
	var v [6]int64
	for i, e := range rep.Elems {
		if e.Kind != KindInt {
			return Decision{}, protoErr("element %d of a decision is not an integer", i)
		}
		v[i] = e.Int
	}
	if v[0] != 0 && v[0] != 1 || v[1] < 0 || v[2] < 0 || v[3] < -1 || v[4] < 0 || v[5] < 0 {
		return Decision{}, protoErr("a decision out of range: %v", v[:want])
	}
	return Decision{Allowed: v[0] == 1, Limit: v[1], Remaining: v[2], RetryAfterMs: v[3],
		ResetAfterMs: v[4], HoldID: v[5]}, nil
}
