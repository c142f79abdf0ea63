package sluice

// middleware_test.go - the middleware in a real net/http server (httptest.Server listens on
// 127.0.0.1), real HTTP requests, a real sluiced.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func serve(t *testing.T, h http.Handler) *httptest.Server {
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the panic test's panic
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

func get(t *testing.T, url, user string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	if user != "" {
		req.Header.Set("X-User", user)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, string(body)
}

var okHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })

var resetField = regexp.MustCompile(`;t=[0-9]+$`)

// The third request of a rule of 2 is a 429 with the headers and body sluiced's own /v1/auth
// gives for the same state: compared with sluiced's answer to a key in that state.
func TestMiddlewareRefusesAsSluicedDoes(t *testing.T) {
	c := newClient(t, Options{})
	lim := &Limiter{Client: c, Rule: "go-mw", Key: WithPrefix(runID, KeyHeader("X-User"))}
	srv := serve(t, lim.Middleware(okHandler))
	auth := "http://" + serverEnv(t, "SLUICE_HTTP_ADDR") + "/v1/auth/go-mw?key=" + runID + "twin"
	var ours, theirs []*http.Response
	var ourBody, theirBody string
	for i := 0; i < 3; i++ {
		r, b := get(t, srv.URL, "u1")
		ours, ourBody = append(ours, r), b
		r, b = get(t, auth, "")
		theirs, theirBody = append(theirs, r), b
	}
	for i, want := range []int{200, 200, 429} {
		if ours[i].StatusCode != want {
			t.Fatalf("request %d: status %d, want %d", i, ours[i].StatusCode, want)
		}
	}
	if ours[1].Header.Get("RateLimit-Policy") != `"go-mw";q=2;w=3600` ||
		!regexp.MustCompile(`^"go-mw";r=0;t=[0-9]+$`).MatchString(ours[1].Header.Get("RateLimit")) {
		t.Fatalf("admitted: %v", ours[1].Header)
	}
	o, s := ours[2], theirs[2]
	for _, h := range []string{"RateLimit-Policy", "Content-Type"} {
		if o.Header.Get(h) != s.Header.Get(h) {
			t.Errorf("%s: ours %q, sluiced's %q", h, o.Header.Get(h), s.Header.Get(h))
		}
	}
	if a, b := resetField.ReplaceAllString(o.Header.Get("RateLimit"), ""), resetField.ReplaceAllString(s.Header.Get("RateLimit"), ""); a != b || a == "" {
		t.Errorf("RateLimit: ours %q, sluiced's %q", o.Header.Get("RateLimit"), s.Header.Get("RateLimit"))
	}
	if o.Header.Get("Retry-After") == "" || s.Header.Get("Retry-After") == "" {
		t.Errorf("Retry-After: ours %q, sluiced's %q", o.Header.Get("Retry-After"), s.Header.Get("Retry-After"))
	}
	if ourBody != theirBody || !strings.Contains(ourBody, `"status":429`) {
		t.Errorf("body: ours %s, sluiced's %s", ourBody, theirBody)
	}
	r, body := get(t, srv.URL, "")
	if r.StatusCode != 400 || r.Header.Get("Content-Type") != "application/problem+json" ||
		!strings.Contains(body, "X-User") {
		t.Errorf("no key: %d %s", r.StatusCode, body)
	}
	r, body = get(t, srv.URL, strings.Repeat("k", 2000))
	if r.StatusCode != 400 || !strings.Contains(body, `"detail":"key is longer than`) {
		t.Errorf("a key past sluiced's --key-max: %d %s", r.StatusCode, body)
	}
}

// A shadow rule in sluiced never refuses; a Limiter in shadow mode never refuses either, and
// still says what is left.
func TestMiddlewareShadow(t *testing.T) {
	c := newClient(t, Options{})
	rule := &Limiter{Client: c, Rule: "go-mw-shadow", Key: WithPrefix(runID, KeyHeader("X-User"))}
	mode := &Limiter{Client: c, Rule: "go-mw", Key: WithPrefix(runID+"shadow", KeyHeader("X-User")), Shadow: true}
	for _, lim := range []*Limiter{rule, mode} {
		srv := serve(t, lim.Middleware(okHandler))
		for i := 0; i < 4; i++ {
			r, body := get(t, srv.URL, "s1")
			if r.StatusCode != 200 || body != "ok" {
				t.Fatalf("%s request %d: %d %s", lim.Rule, i, r.StatusCode, body)
			}
		}
	}
	d, err := c.Peek(bg(t), "go-mw", runID+"shadows1")
	if err != nil || d.Remaining != 0 {
		t.Fatalf("shadow mode did not charge the key: %+v %v", d, err)
	}
}

// remainingOf peeks the in-flight rule's key.
func remainingOf(t *testing.T, c *Client, key string) int64 {
	d, err := c.Peek(bg(t), "go-mw-jobs", key)
	if err != nil {
		t.Fatal(err)
	}
	return d.Remaining
}

// An in-flight rule of 1, InFlight not set: the middleware reads the algorithm from sluiced and
// acquires. A second request while the first runs is refused; the first's hold is released
// when its response ends, so the next is admitted.
func TestMiddlewareInFlightReleasedWhenTheResponseEnds(t *testing.T) {
	c := newClient(t, Options{})
	key := runID + "jobs-end"
	started, finish := make(chan struct{}), make(chan struct{})
	lim := &Limiter{Client: c, Rule: "go-mw-jobs", Key: func(*http.Request) (string, error) { return key, nil }}
	srv := serve(t, lim.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			close(started)
			<-finish
		}
		io.WriteString(w, "done")
	})))
	first := make(chan int, 1)
	go func() {
		resp, err := http.Get(srv.URL + "/slow")
		if err != nil {
			first <- 0
			return
		}
		resp.Body.Close()
		first <- resp.StatusCode
	}()
	<-started
	if r, _ := get(t, srv.URL, ""); r.StatusCode != 429 {
		t.Fatalf("a second request while the first holds the slot: %d", r.StatusCode)
	}
	close(finish)
	if code := <-first; code != 200 {
		t.Fatalf("the first request: %d", code)
	}
	if !poll(func() bool { return remainingOf(t, c, key) == 1 }) {
		t.Fatal("the hold was not released after the response")
	}
	if r, _ := get(t, srv.URL, ""); r.StatusCode != 200 {
		t.Fatalf("after the release: %d", r.StatusCode)
	}
}

// A handler that panics: net/http drops the connection, and the hold is released.
func TestMiddlewareInFlightReleasedWhenTheHandlerPanics(t *testing.T) {
	c := newClient(t, Options{})
	key := runID + "jobs-panic"
	lim := &Limiter{Client: c, Rule: "go-mw-jobs", Key: func(*http.Request) (string, error) { return key, nil }}
	srv := serve(t, lim.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		panic("the handler failed")
	})))
	if _, err := http.Get(srv.URL); err == nil {
		t.Fatal("a panicking handler gave a response")
	}
	if !poll(func() bool { return remainingOf(t, c, key) == 1 }) {
		t.Fatal("the hold was not released after the panic")
	}
}

// A client that disconnects mid-response: the handler has sent a first chunk and waits. The
// hold stands for the handler's work, which goes on after the client has gone: net/http
// cancels the request's context, the handler sees it and works on (until `finish`), and the
// slot stays taken until the handler returns. The rule's hold_timeout is an hour: only the
// release can free the slot within the test.
func TestMiddlewareInFlightHeldUntilTheHandlerReturnsAfterADisconnect(t *testing.T) {
	c := newClient(t, Options{})
	key := runID + "jobs-gone"
	sawCancel, finish := make(chan bool, 1), make(chan struct{})
	lim := &Limiter{Client: c, Rule: "go-mw-jobs", Key: func(*http.Request) (string, error) { return key, nil }}
	srv := serve(t, lim.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "first chunk\n")
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
			sawCancel <- true
		case <-time.After(30 * time.Second):
			sawCancel <- false
		}
		<-finish // the work after the disconnect
	})))
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "GET /stream HTTP/1.1\r\nHost: x\r\n\r\n")
	br := bufio.NewReader(conn)
	for i := 0; i < 50; i++ { // the head, then the chunk's size line, then the chunk
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if line == "first chunk\n" {
			break
		}
	}
	if n := remainingOf(t, c, key); n != 0 {
		t.Fatalf("%d left while the response is under way, want 0", n)
	}
	conn.Close()
	if !<-sawCancel {
		close(finish)
		t.Fatal("the handler never saw the client go")
	}
	if n := remainingOf(t, c, key); n != 0 {
		close(finish)
		t.Fatalf("%d left while the handler still works after the disconnect, want 0", n)
	}
	close(finish)
	if !poll(func() bool { return remainingOf(t, c, key) == 1 }) {
		t.Fatal("the hold was not released when the handler returned")
	}
}

// Priority: a request's priority from a header. With one of the two slots held, low (and none,
// the lowest) are shed for high's reserve of 1, high passes; an unknown priority is sluiced's
// error, answered by OnError (the default: a 503 that says it).
func TestMiddlewarePriority(t *testing.T) {
	c := newClient(t, Options{})
	key := runID + "prio"
	held, err := c.Acquire(bg(t), "go-mw-prio", key, 1, 0)
	if err != nil || held.HoldID == 0 {
		t.Fatalf("a first hold: %+v %v", held, err)
	}
	defer c.Release(bg(t), "go-mw-prio", key, held.HoldID)
	// InFlight and Window set by hand: the middleware asks sluiced nothing of the rule
	lim := &Limiter{Client: c, Rule: "go-mw-prio", InFlight: true, Window: time.Hour,
		Key:      func(*http.Request) (string, error) { return key, nil },
		Priority: func(r *http.Request) string { return r.Header.Get("X-Priority") }}
	srv := serve(t, lim.Middleware(okHandler))
	status := func(p string) (int, string) {
		req, _ := http.NewRequest("GET", srv.URL, nil)
		if p != "" {
			req.Header.Set("X-Priority", p)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, tc := range []struct {
		p    string
		want int
	}{{"low", 429}, {"", 429}, {"high", 200}} {
		if got, body := status(tc.p); got != tc.want {
			t.Fatalf("priority %q: %d %s, want %d", tc.p, got, body, tc.want)
		}
	}
	if got, body := status("urgent"); got != 503 || !strings.Contains(body, "unknown priority 'urgent'") {
		t.Fatalf("an unknown priority: %d %s, want 503 with sluiced's error", got, body)
	}
}

// adaptiveLimit is the adaptive rule's limit for key once every hold of it is released, or -1.
func adaptiveLimit(t *testing.T, c *Client, rule, key string) int64 {
	limit := int64(-1)
	if !poll(func() bool {
		d, err := c.Peek(bg(t), rule, key)
		limit = d.Limit
		return err == nil && d.Remaining == d.Limit
	}) {
		return -1
	}
	return limit
}

// Report: an adaptive (aimd) rule from a limit of 2. Two requests (a window) grow it to 3; a
// window with a 5xx, a panic, a request slower than latency_timeout or a client gone before the
// end halves it to 1; without Report nothing moves it. Only the slow case uses go-mw-adapt-slow
// (latency_timeout 100ms): the others' go-mw-adapt waits 10m, so that no request of theirs is
// a drop for being slow on a loaded machine.
func TestMiddlewareReportsToAnAdaptiveLimit(t *testing.T) {
	c := newClient(t, Options{})
	var key atomic.Value
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/e500":
			w.WriteHeader(http.StatusInternalServerError)
		case "/panic":
			panic("the handler failed")
		case "/slow":
			time.Sleep(150 * time.Millisecond)
		case "/gone":
			io.WriteString(w, "first chunk\n")
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
			case <-time.After(30 * time.Second):
			}
		}
		io.WriteString(w, "ok")
	})
	rules := map[*httptest.Server]string{}
	mk := func(rule string, report bool) *httptest.Server {
		lim := &Limiter{Client: c, Rule: rule, Window: time.Hour, Report: report,
			Key: func(*http.Request) (string, error) { return key.Load().(string), nil }}
		srv := serve(t, lim.Middleware(handler))
		rules[srv] = rule
		return srv
	}
	reporting, slow, quiet := mk("go-mw-adapt", true), mk("go-mw-adapt-slow", true), mk("go-mw-adapt", false)
	run := func(srv *httptest.Server, name string, paths ...string) int64 {
		rule := rules[srv]
		k := runID + "adapt-" + name
		key.Store(k)
		for _, p := range paths {
			if p == "/gone" {
				conn, err := net.Dial("tcp", srv.Listener.Addr().String())
				if err != nil {
					t.Fatal(err)
				}
				fmt.Fprintf(conn, "GET /gone HTTP/1.1\r\nHost: x\r\n\r\n")
				br := bufio.NewReader(conn)
				for i := 0; i < 50; i++ {
					if line, err := br.ReadString('\n'); err != nil || line == "first chunk\n" {
						break
					}
				}
				conn.Close()
			} else if resp, err := http.Get(srv.URL + p); err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			adaptiveLimit(t, c, rule, k) // one request at a time: each release lands before the next
		}
		return adaptiveLimit(t, c, rule, k)
	}
	if got := run(reporting, "grow", "/ok", "/ok"); got != 3 {
		t.Fatalf("two fast requests: limit %d, want 3", got)
	}
	for _, p := range []string{"/e500", "/panic", "/slow", "/gone"} {
		srv := reporting
		if p == "/slow" {
			srv = slow
		}
		if got := run(srv, "drop"+p[1:], "/ok", p); got != 1 {
			t.Fatalf("%s is a drop: limit %d, want 1", p, got)
		}
	}
	if got := run(quiet, "quiet", "/ok", "/ok", "/e500", "/slow"); got != 2 {
		t.Fatalf("without Report: limit %d, want 2", got)
	}
}

// The client's OnUnreachable in the middleware: deny is a 429 with Retry-After and no
// RateLimit fields, allow passes, raise is a 503 problem.
func TestMiddlewareOnUnreachable(t *testing.T) {
	refused := refusedAddr(t)
	want := map[Unreachable]int{FailClosed: 429, FailOpen: 200, Raise: 503}
	for mode, code := range want {
		c := newClient(t, Options{Addr: refused, OnUnreachable: mode})
		lim := &Limiter{Client: c, Rule: "go-mw", Window: time.Hour}
		r, body := get(t, serve(t, lim.Middleware(okHandler)).URL, "")
		if r.StatusCode != code {
			t.Fatalf("%s: %d %s, want %d", mode, r.StatusCode, body, code)
		}
		if r.Header.Get("RateLimit") != "" {
			t.Errorf("%s: RateLimit fields without a decision: %v", mode, r.Header)
		}
		if mode == FailClosed && r.Header.Get("Retry-After") == "" {
			t.Errorf("deny without Retry-After")
		}
	}
}

// The RateLimit fields' strings as sluiced writes them.
func TestStructuredFieldStrings(t *testing.T) {
	for in, want := range map[string]string{`api`: `"api"`, `a"b\c`: `"a\"b\\c"`, "é\t": `"???"`} {
		if got := sfString(in); got != want {
			t.Errorf("sfString(%q) = %s, want %s", in, got, want)
		}
	}
	for in, want := range map[string]time.Duration{"1h": time.Hour, "1d2h": 26 * time.Hour,
		"1m30s": 90 * time.Second, "250ms": 250 * time.Millisecond, "2d": 48 * time.Hour} {
		if got, err := parseRuleDuration(in); err != nil || got != want {
			t.Errorf("parseRuleDuration(%q) = %v %v", in, got, err)
		}
	}
}

// A max_delay rule admits a request past its capacity after a wait (an hour here): the
// middleware holds the request back for it. Once sluiced has charged the delayed request (the
// key's reset time grew by an interval), the client gives up: the handler never ran for it.
func TestMiddlewareWaitsOutAMaxDelay(t *testing.T) {
	c := newClient(t, Options{})
	var served atomic.Int64
	key := runID + "d1"
	lim := &Limiter{Client: c, Rule: "go-mw-delay", Key: WithPrefix(runID, KeyHeader("X-User"))}
	srv := serve(t, lim.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
	})))
	var before Decision
	for i := 0; i < 5; i++ { // the requests within the capacity, served at once
		if r, _ := get(t, srv.URL, "d1"); r.StatusCode != 200 {
			t.Fatalf("request %d: %d", i, r.StatusCode)
		}
		var err error
		if before, err = c.Peek(bg(t), "go-mw-delay", key); err != nil || before.Remaining == 0 {
			break
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL, nil)
	req.Header.Set("X-User", "d1")
	done := make(chan error, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	charged := poll(func() bool {
		d, err := c.Peek(bg(t), "go-mw-delay", key)
		return err == nil && d.ResetAfterMs > before.ResetAfterMs+1800*1000
	})
	cancel()
	if err := <-done; !charged || !errors.Is(err, context.Canceled) {
		t.Fatalf("the delayed request: charged %v, ended with %v", charged, err)
	}
	if served.Load() != before.Limit {
		t.Fatalf("served %d, want the capacity %d (the delayed request not at all)", served.Load(), before.Limit)
	}
}

// KeyRoute keys by the route the program names, not the path: requests for /users/1, /users/2
// and /users/3 are one key, so the third is refused under a rule of 2.
func TestMiddlewareKeyRouteIsOneKeyPerRoute(t *testing.T) {
	c := newClient(t, Options{})
	lim := &Limiter{Client: c, Rule: "go-mw", Window: time.Hour, Key: WithPrefix(runID, KeyRoute("/users/{id}"))}
	mux := http.NewServeMux()
	mux.Handle("/users/", lim.Middleware(okHandler))
	srv := serve(t, mux)
	for i, want := range []int{200, 200, 429} {
		if r, body := get(t, fmt.Sprintf("%s/users/%d", srv.URL, i+1), ""); r.StatusCode != want {
			t.Fatalf("/users/%d: %d %s, want %d", i+1, r.StatusCode, body, want)
		}
	}
	if d, err := c.Peek(bg(t), "go-mw", runID+"/users/{id}"); err != nil || d.Remaining != 0 {
		t.Fatalf("the route's key: %+v %v", d, err)
	}
}
