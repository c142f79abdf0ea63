package sluice

// client_test.go - the client against real servers: pipelining, the pool, deadlines and
// cancellation, TLS, and what an unreachable sluiced gives.

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// countingDial counts the connections made and the writes on them.
type countingDial struct {
	dials, writes atomic.Int64
}

type countedConn struct {
	net.Conn
	d *countingDial
}

func (c countedConn) Write(b []byte) (int, error) {
	c.d.writes.Add(1)
	return c.Conn.Write(b)
}

func (d *countingDial) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var nd net.Dialer
	nc, err := nd.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	d.dials.Add(1)
	return countedConn{nc, d}, nil
}

// A pipeline of 100 decisions is one write; each result is its own (an unknown rule fails its
// request only), and cached refusals are answered without being sent.
func TestPipelineIsOneWrite(t *testing.T) {
	var cd countingDial
	c := newClient(t, Options{Dial: cd.dial})
	var reqs []Request
	for i := 0; i < 100; i++ {
		reqs = append(reqs, Request{Rule: "sdk-fixed", Key: runID + "pipe" + string(rune('A'+i%50)), Cost: 1})
	}
	reqs[7].Rule = "sdk-no-such-rule"
	res, err := c.Pipeline(bg(t), reqs)
	if err != nil {
		t.Fatal(err)
	}
	if cd.writes.Load() != 1 {
		t.Fatalf("%d writes for one pipeline, want 1", cd.writes.Load())
	}
	for i, r := range res {
		switch {
		case i == 7:
			if r.Err == nil || !strings.Contains(r.Err.Error(), "sdk-no-such-rule") {
				t.Errorf("request 7: got %+v, want the unknown rule's error", r)
			}
		case i == 57: // the same key as 7, whose request was refused: its first admission
			if r.Err != nil || !r.Decision.Allowed || r.Decision.Remaining != 2 {
				t.Errorf("request %d: %+v", i, r)
			}
		default: // keys i%50: the first admission leaves 2, the second 1
			want := int64(2)
			if i >= 50 {
				want = 1
			}
			if r.Err != nil || !r.Decision.Allowed || r.Decision.Remaining != want {
				t.Errorf("request %d: got %+v, want allowed with %d left", i, r, want)
			}
		}
	}
	// fill one key, have it refused, then pipeline it again with a fresh key: one is cached
	k := runID + "pipe-full"
	c.Allow(bg(t), "sdk-fixed", k, 3)
	if d, _ := c.Allow(bg(t), "sdk-fixed", k, 1); d.Allowed || d.FromCache {
		t.Fatalf("want a refusal from sluiced: %+v", d)
	}
	res, err = c.Pipeline(bg(t), []Request{{Rule: "sdk-fixed", Key: k, Cost: 1},
		{Rule: "sdk-fixed", Key: k + "-other", Cost: 1}})
	if err != nil || !res[0].Decision.FromCache || res[1].Decision.FromCache || !res[1].Decision.Allowed {
		t.Fatalf("got %+v %v", res, err)
	}
	if c.CacheHits() != 1 {
		t.Fatalf("%d cache hits, want 1", c.CacheHits())
	}
}

// Many goroutines share one client: the pool opens at most PoolSize connections, and one key
// of a rule of 3 is admitted exactly 3 times in all.
func TestPoolSharedByGoroutines(t *testing.T) {
	var cd countingDial
	c := newClient(t, Options{Dial: cd.dial, PoolSize: 4, CacheSize: -1})
	var admitted, refused atomic.Int64
	var wg sync.WaitGroup
	key := runID + "pool"
	for g := 0; g < 32; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 10; i++ {
				d, err := c.Allow(context.Background(), "sdk-fixed", key, 1)
				if err != nil {
					t.Error(err)
					return
				}
				if d.Allowed {
					admitted.Add(1)
				} else {
					refused.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if admitted.Load() != 3 || refused.Load() != 317 {
		t.Fatalf("admitted %d, refused %d; want 3 and 317", admitted.Load(), refused.Load())
	}
	if n := cd.dials.Load(); n < 1 || n > 4 {
		t.Fatalf("%d connections for a pool of 4", n)
	}
}

// A server that accepts and never answers: Timeout ends the call as unreachable; a ctx deadline
// too; a cancelled ctx is the caller's own error, never a fallback. The connection that timed
// out is not reused.
func TestDeadlinesAndCancellation(t *testing.T) {
	silent := serverEnv(t, "SLUICE_SILENT_ADDR")
	var cd countingDial
	c := newClient(t, Options{Addr: silent, Timeout: 200 * time.Millisecond, Dial: cd.dial})
	var ue *UnreachableError
	if _, err := c.Allow(context.Background(), "r", "k", 1); !errors.As(err, &ue) {
		t.Fatalf("Timeout: got %v, want an UnreachableError", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	slow := newClient(t, Options{Addr: silent, Timeout: time.Hour})
	if _, err := slow.Allow(ctx, "r", "k", 1); !errors.As(err, &ue) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("ctx deadline: got %v", err)
	}
	open := newClient(t, Options{Addr: silent, Timeout: time.Hour, OnUnreachable: FailOpen})
	ctx2, cancel2 := context.WithCancel(context.Background())
	go func() { time.Sleep(50 * time.Millisecond); cancel2() }()
	d, err := open.Allow(ctx2, "r", "k", 1)
	if !errors.Is(err, context.Canceled) || d.Fallback {
		t.Fatalf("cancelled: got %+v %v, want context.Canceled and no fallback", d, err)
	}
	c.Allow(context.Background(), "r", "k", 1)
	if cd.dials.Load() != 2 {
		t.Fatalf("%d connections for two timed-out calls, want 2 (none reused)", cd.dials.Load())
	}
}

// FailOpen and FailClosed against a port that refuses; a server error is never a fallback.
func TestOnUnreachable(t *testing.T) {
	refused := refusedAddr(t)
	closed := newClient(t, Options{Addr: refused, OnUnreachable: FailClosed, BackoffBaseMs: 10, BackoffCapMs: 10})
	for i := 0; i < 20; i++ {
		d, err := closed.Allow(bg(t), "r", "k", 1)
		if err != nil || d.Allowed || !d.Fallback || d.RetryAfterMs < 1 || d.RetryAfterMs > 10 {
			t.Fatalf("call %d: got %+v %v", i, d, err)
		}
	}
	open := newClient(t, Options{Addr: refused, OnUnreachable: FailOpen})
	if d, err := open.Acquire(bg(t), "r", "k", 1, 0); err != nil || !d.Allowed || !d.Fallback || d.HoldID != 0 {
		t.Fatalf("acquire: got %+v %v", d, err)
	}
	if _, err := open.Settle(bg(t), "r", "k", 2, 1); err == nil {
		t.Fatal("a settle that could not be sent passed as done")
	}
	real := newClient(t, Options{OnUnreachable: FailOpen})
	if _, err := real.Allow(bg(t), "sdk-no-such-rule", "k", 1); err == nil {
		t.Fatal("an unknown rule passed as a fallback")
	}
	if _, err := New(Options{OnUnreachable: "maybe"}); err == nil {
		t.Fatal("New took OnUnreachable \"maybe\"")
	}
}

// One TLS connection to a sluiced with a self-signed certificate made by the test script; a
// client that does not trust it is refused, and a plain client gets no answer.
func TestTLS(t *testing.T) {
	addr := serverEnv(t, "SLUICE_TLS_ADDR")
	pem, err := os.ReadFile(serverEnv(t, "SLUICE_TLS_CA"))
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		t.Fatal("no certificate in SLUICE_TLS_CA")
	}
	c := newClient(t, Options{Addr: addr, TLSConfig: &tls.Config{RootCAs: roots}})
	d, err := c.Allow(bg(t), "sdk-fixed", runID+"tls", 1)
	if err != nil || !d.Allowed || d.Remaining != 2 {
		t.Fatalf("over TLS: got %+v %v", d, err)
	}
	untrusting := newClient(t, Options{Addr: addr, TLSConfig: &tls.Config{RootCAs: x509.NewCertPool()}})
	var ue *UnreachableError
	if _, err := untrusting.Allow(bg(t), "sdk-fixed", runID+"tls", 1); !errors.As(err, &ue) ||
		!strings.Contains(err.Error(), "certificate") {
		t.Fatalf("an untrusted certificate: got %v", err)
	}
	plain := newClient(t, Options{Addr: addr, Timeout: 300 * time.Millisecond})
	if _, err := plain.Allow(bg(t), "sdk-fixed", runID+"tls", 1); !errors.As(err, &ue) {
		t.Fatalf("plain RESP to a TLS port: got %v", err)
	}
	if d, err := c.Peek(bg(t), "sdk-fixed", runID+"tls"); err != nil || d.Remaining != 2 {
		t.Fatalf("the refused clients changed the key: %+v %v", d, err)
	}
}

// AUTH failures are server errors, not unreachable: a wrong password never fails open.
func TestWrongPasswordIsNotAFallback(t *testing.T) {
	c := newClient(t, Options{Password: "wrong", OnUnreachable: FailOpen})
	_, err := c.Allow(bg(t), "sdk-fixed", runID+"auth", 1)
	var se *ServerError
	if !errors.As(err, &se) {
		t.Fatalf("got %v, want the server's refusal of AUTH", err)
	}
}

// Benchmarks against a real sluiced (they print figures; nothing asserts a speed).
func benchClient(b *testing.B) *Client {
	addr := os.Getenv("SLUICE_RESP_ADDR")
	if os.Getenv("SLUICE_GO_INTEGRATION") != "1" || addr == "" {
		b.Skip("needs a sluiced: SLUICE_GO_INTEGRATION=1 SLUICE_RESP_ADDR=host:port")
	}
	c, err := New(Options{Addr: addr, CacheSize: -1})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	return c
}

// One decision per round trip, one goroutine.
func BenchmarkAllow(b *testing.B) {
	c := benchClient(b)
	for i := 0; i < b.N; i++ {
		if _, err := c.Allow(context.Background(), "sdk-fixed", runID+"bench", 1); err != nil {
			b.Fatal(err)
		}
	}
}

// 100 decisions per Pipeline call; b.N counts decisions.
func BenchmarkPipeline100(b *testing.B) {
	c := benchClient(b)
	reqs := make([]Request, 100)
	for i := range reqs {
		reqs[i] = Request{Rule: "sdk-fixed", Key: runID + "bench-pipe", Cost: 1}
	}
	for i := 0; i < b.N; i += len(reqs) {
		if _, err := c.Pipeline(context.Background(), reqs); err != nil {
			b.Fatal(err)
		}
	}
}

// Decisions from many goroutines sharing one client (a pool of 8).
func BenchmarkAllowParallel(b *testing.B) {
	c := benchClient(b)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := c.Allow(context.Background(), "sdk-fixed", runID+"bench-par", 1); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// A closed client refuses calls, even under FailOpen, and keeps no connection open.
func TestClosedClient(t *testing.T) {
	var cd countingDial
	c := newClient(t, Options{Dial: cd.dial, OnUnreachable: FailOpen})
	if _, err := c.Allow(bg(t), "sdk-fixed", runID+"closed", 1); err != nil {
		t.Fatal(err)
	}
	c.Close()
	if d, err := c.Allow(bg(t), "sdk-fixed", runID+"closed", 1); err == nil {
		t.Fatalf("a closed client decided: %+v", d)
	}
	if len(c.idle) != 0 {
		t.Fatalf("%d idle connections after Close", len(c.idle))
	}
}
