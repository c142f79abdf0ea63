package sluice

// restart_test.go - the middleware while its sluiced is killed and started again: the test
// starts a real sluiced of its own (the binary, rules and store test_go.sh names) on ports it
// chose, fills the client's pool, kills sluiced by its PID (SIGKILL, once while an in-flight
// hold is live), checks that requests are answered as OnUnreachable says (fail open: served
// without RateLimit fields; fail closed: 429 with Retry-After), starts sluiced again on the
// same ports and checks that decisions come back through the same Client.

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// ownSluiced is a sluiced this test starts and kills.
type ownSluiced struct {
	t          *testing.T
	resp, http int
	dir        string
	extra      []string // more arguments
	cmd        *exec.Cmd
	exited     chan struct{} // closed when cmd has exited (its Wait returned)
}

// freePorts are n distinct ports nothing listened on when chosen: the kernel's choice, each
// listener kept open until all n are chosen (a port closed at once could be chosen again), then
// all closed for sluiced to take. Another process may still take one first: startOwnSluiced
// then tries again with other ports.
func freePorts(t *testing.T, n int) []int {
	var ports []int
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	for len(ports) < n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, ln)
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports
}

// portsOwned says whether process pid listens on every port of 127.0.0.1 (owned), and whether
// another process listens on one of them (taken: a port chosen free that someone took first,
// whose answers would not be sluiced's), from /proc/net/tcp and pid's file descriptors. The
// listeners are read first: a socket listening then was opened before, so pid's descriptors,
// read after, hold it if it is pid's.
func portsOwned(pid int, ports ...int) (owned, taken bool) {
	tcp, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		return false, false
	}
	inodes := map[string]int{} // listening socket inode: its port
	for _, line := range strings.Split(string(tcp), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) < 10 || f[3] != "0A" { // TCP_LISTEN
			continue
		}
		addr, hexPort, _ := strings.Cut(f[1], ":")
		var port int
		if _, err := fmt.Sscanf(hexPort, "%X", &port); err != nil ||
			(addr != "0100007F" && addr != "00000000") { // 127.0.0.1, 0.0.0.0
			continue
		}
		for _, p := range ports {
			if p == port {
				inodes[f[9]] = port
			}
		}
	}
	ours := map[string]bool{}
	fdDir := fmt.Sprintf("/proc/%d/fd", pid)
	if fds, err := os.ReadDir(fdDir); err == nil {
		for _, fd := range fds {
			link, err := os.Readlink(filepath.Join(fdDir, fd.Name()))
			if err == nil && strings.HasPrefix(link, "socket:[") {
				ours[link[8:len(link)-1]] = true
			}
		}
	}
	listening := map[int]bool{}
	for inode, port := range inodes {
		if !ours[inode] {
			return false, true
		}
		listening[port] = true
	}
	return len(listening) == len(ports), false
}

func (s *ownSluiced) addr() string { return fmt.Sprintf("127.0.0.1:%d", s.resp) }

// start runs sluiced on s's ports and waits until it listens on them; the test fails when it
// does not.
func (s *ownSluiced) start() {
	if err := s.tryStart(); err != nil {
		s.t.Fatal(err)
	}
}

// tryStart runs sluiced on s's ports and waits (at most 10 s) until it listens on both. When it
// exits first (a port taken), another process listens on one of them, or it does not listen in
// time, it is killed and the error says why, with its log.
func (s *ownSluiced) tryStart() error {
	t := s.t
	args := []string{"--port", fmt.Sprint(s.resp), "--http-port", fmt.Sprint(s.http), "--grpc-port", "0",
		"--rules", serverEnv(t, "SLUICE_RULES"), "--config-store", filepath.Join(s.dir, "config.db"),
		"--snapshot", ""}
	args = append(args, strings.Fields(os.Getenv("SLUICE_STORE_ARGS"))...)
	args = append(args, s.extra...)
	cmd := exec.Command(serverEnv(t, "SLUICED"), args...)
	logPath := filepath.Join(s.dir, "sluiced.log")
	log, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	s.cmd, s.exited = cmd, exited
	go func() { cmd.Wait(); close(exited) }()
	taken := false
	up := poll(func() bool {
		select {
		case <-exited:
			return true // gone: no use waiting
		default:
		}
		var owned bool
		owned, taken = portsOwned(cmd.Process.Pid, s.resp, s.http)
		return owned || taken
	})
	select {
	case <-exited:
		up = false // it exited (the port was someone else's)
	default:
	}
	if taken {
		up = false // another process listens on one of its ports: not ours to talk to
	}
	if !up {
		s.kill()
		b, _ := os.ReadFile(logPath)
		return fmt.Errorf("sluiced did not start on %s:\n%s", s.addr(), b)
	}
	return nil
}

// kill ends sluiced by its PID with SIGKILL, a crash: nothing is drained or closed politely.
// One that has exited already is left alone.
func (s *ownSluiced) kill() {
	select {
	case <-s.exited:
		return
	default:
	}
	if err := syscall.Kill(s.cmd.Process.Pid, syscall.SIGKILL); err != nil {
		s.t.Fatalf("killing sluiced (pid %d): %v", s.cmd.Process.Pid, err)
	}
	<-s.exited
}

// startOwnSluiced starts a sluiced on ports of its choosing, killed when the test ends (the kill
// registered before it starts, so that one slow to start is killed too); a start that fails is
// tried again, three times in all, with other ports.
func startOwnSluiced(t *testing.T, extra ...string) *ownSluiced {
	s := &ownSluiced{t: t, dir: t.TempDir(), extra: extra}
	t.Cleanup(func() {
		if s.cmd != nil {
			s.kill()
		}
	})
	var err error
	for try := 0; try < 3; try++ {
		p := freePorts(t, 2)
		s.resp, s.http = p[0], p[1]
		if err = s.tryStart(); err == nil {
			return s
		}
		t.Logf("start %d: %v", try+1, err)
	}
	t.Fatal(err)
	return nil
}

func TestMiddlewareSluicedKilledAndRestarted(t *testing.T) {
	for _, mode := range []Unreachable{FailOpen, FailClosed} {
		mode := mode
		t.Run(string(mode), func(t *testing.T) { killAndRestart(t, mode) })
	}
}

func killAndRestart(t *testing.T, mode Unreachable) {
	s := startOwnSluiced(t)
	c := newClient(t, Options{Addr: s.addr(), OnUnreachable: mode, PoolSize: 4})
	prefix := runID + "kill-" + string(mode) + "-"
	var releaseErrors atomic.Int64
	started, finish := make(chan struct{}, 1), make(chan struct{})
	jobs := &Limiter{Client: c, Rule: "go-mw-jobs", Key: WithPrefix(prefix, KeyHeader("X-User")),
		OnReleaseError: func(error) { releaseErrors.Add(1) }}
	plain := &Limiter{Client: c, Rule: "go-mw", Key: WithPrefix(prefix, KeyHeader("X-User"))}
	mux := http.NewServeMux()
	mux.Handle("/plain", plain.Middleware(okHandler))
	mux.Handle("/job", jobs.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("wait") != "" {
			started <- struct{}{}
			<-finish
		}
		io.WriteString(w, "ok")
	})))
	srv := serve(t, mux)
	// decisions through the pool: several at once, so it holds more than one connection
	done := make(chan int, 4)
	for i := 0; i < 4; i++ {
		go func(i int) {
			r, _ := getNoFatal(srv.URL+"/plain", fmt.Sprintf("u%d", i))
			done <- r
		}(i)
	}
	for i := 0; i < 4; i++ {
		if code := <-done; code != 200 {
			t.Fatalf("before the kill: %d", code)
		}
	}
	// an in-flight hold live across the kill: its release cannot reach sluiced
	held := make(chan int, 1)
	go func() {
		code, _ := getNoFatal(srv.URL+"/job?wait=1", "held")
		held <- code
	}()
	<-started
	if d, err := c.Peek(bg(t), "go-mw-jobs", prefix+"held"); err != nil || d.Remaining != 0 {
		t.Fatalf("the hold before the kill: %+v %v", d, err)
	}
	s.kill()
	close(finish)
	if code := <-held; code != 200 {
		t.Fatalf("the held request, finished after the kill: %d", code)
	}
	if releaseErrors.Load() != 1 {
		t.Fatalf("OnReleaseError heard %d failed releases, want 1", releaseErrors.Load())
	}
	// sluiced down: every request is decided by OnUnreachable, none by a broken pooled connection
	for _, path := range []string{"/plain", "/job", "/plain", "/job"} {
		resp, body := get(t, srv.URL+path, "down")
		want := map[Unreachable]int{FailOpen: 200, FailClosed: 429}[mode]
		if resp.StatusCode != want || resp.Header.Get("RateLimit") != "" {
			t.Fatalf("%s with sluiced down: %d %v %s, want %d without RateLimit", path, resp.StatusCode, resp.Header, body, want)
		}
		if mode == FailClosed && resp.Header.Get("Retry-After") == "" {
			t.Fatalf("%s refused without Retry-After", path)
		}
	}
	// started again on the same ports: the same Client decides again
	s.start()
	if !poll(func() bool {
		resp, _ := get(t, srv.URL+"/plain", "back")
		return resp.StatusCode == 200 && resp.Header.Get("RateLimit") != ""
	}) {
		t.Fatal("no decision from sluiced after its restart")
	}
	for i, want := range []int{200, 429} { // "back" had one; go-mw admits 2
		if resp, body := get(t, srv.URL+"/plain", "back"); resp.StatusCode != want || resp.Header.Get("RateLimit") == "" {
			t.Fatalf("after the restart, request %d: %d %s, want %d with RateLimit", i+2, resp.StatusCode, body, want)
		}
	}
	if resp, _ := get(t, srv.URL+"/job", "fresh"); resp.StatusCode != 200 || resp.Header.Get("RateLimit") == "" {
		t.Fatalf("an in-flight request after the restart: %d %v", resp.StatusCode, resp.Header)
	}
	if !poll(func() bool {
		d, err := c.Peek(bg(t), "go-mw-jobs", prefix+"fresh")
		return err == nil && d.Remaining == 1
	}) {
		t.Fatal("the in-flight request's hold after the restart was not released")
	}
	// the hold whose release was lost: a memory store lost it with the process; a Redis store
	// kept it, and it stands until its hold_timeout
	d, err := c.Peek(bg(t), "go-mw-jobs", prefix+"held")
	wantLeft := int64(1)
	if strings.Contains(os.Getenv("SLUICE_STORE_ARGS"), "redis://") {
		wantLeft = 0
	}
	if err != nil || d.Remaining != wantLeft {
		t.Fatalf("the hold whose release was lost, after the restart: %+v %v, want %d left", d, err, wantLeft)
	}
}

// getNoFatal is get for other goroutines: the status, or 0 when the request failed.
func getNoFatal(url, user string) (int, string) {
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("X-User", user)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// A sluiced with an admin password does not show its rules to the default user: the middleware
// cannot read that go-mw-jobs (a limit of 1) is an in-flight rule, and decides with SL.ALLOW,
// which takes a unit that no release gives back: after one request, the next is refused.
// InFlight set by hand acquires and releases: one request after another all pass.
func TestMiddlewareInFlightByHandWhereTheRuleCannotBeRead(t *testing.T) {
	s := startOwnSluiced(t, "--requirepass", "pw", "--admin-password", "apw")
	c := newClient(t, Options{Addr: s.addr(), Password: "pw"})
	if _, err := c.Do(bg(t), "SL.RULE", "GET", "go-mw-jobs"); err == nil || !strings.Contains(err.Error(), "NOPERM") {
		t.Fatalf("SL.RULE GET as the default user: %v, want NOPERM", err)
	}
	for _, inFlight := range []bool{false, true} {
		key := fmt.Sprintf("%sbyhand-%v", runID, inFlight)
		lim := &Limiter{Client: c, Rule: "go-mw-jobs", InFlight: inFlight, Window: time.Hour,
			Key: func(*http.Request) (string, error) { return key, nil }}
		srv := serve(t, lim.Middleware(okHandler))
		want := map[bool][]int{false: {200, 429, 429}, true: {200, 200, 200}}[inFlight]
		for i, code := range want {
			if r, body := get(t, srv.URL, ""); r.StatusCode != code {
				t.Fatalf("InFlight %v, request %d: %d %s, want %d", inFlight, i+1, r.StatusCode, body, code)
			}
			if inFlight && !poll(func() bool {
				d, err := c.Peek(bg(t), "go-mw-jobs", key)
				return err == nil && d.Remaining == 1
			}) {
				t.Fatalf("InFlight: request %d's hold was not released", i+1)
			}
		}
	}
}

// sluiced down when the middleware first asks for its rule, then up: the middleware asks again
// on the next request, so it learns that go-mw-jobs (a limit of 1) is an in-flight rule and
// acquires and releases: one request after another all pass. While it was down, the request
// was decided by OnUnreachable (fail open: served without RateLimit fields).
func TestMiddlewareInFlightRuleReadOnceSluicedIsBack(t *testing.T) {
	s := startOwnSluiced(t)
	c := newClient(t, Options{Addr: s.addr(), OnUnreachable: FailOpen})
	s.kill()
	key := runID + "firstdown"
	lim := &Limiter{Client: c, Rule: "go-mw-jobs", Key: func(*http.Request) (string, error) { return key, nil }}
	srv := serve(t, lim.Middleware(okHandler))
	if r, body := get(t, srv.URL, ""); r.StatusCode != 200 || r.Header.Get("RateLimit") != "" {
		t.Fatalf("sluiced down: %d %v %s, want 200 without RateLimit", r.StatusCode, r.Header, body)
	}
	s.start()
	for i := 0; i < 3; i++ {
		if r, body := get(t, srv.URL, ""); r.StatusCode != 200 || r.Header.Get("RateLimit") == "" {
			t.Fatalf("sluiced back, request %d: %d %v %s, want 200 with RateLimit", i+1, r.StatusCode, r.Header, body)
		}
		if !poll(func() bool {
			d, err := c.Peek(bg(t), "go-mw-jobs", key)
			return err == nil && d.Remaining == 1
		}) {
			t.Fatalf("sluiced back, request %d: its unit was not given back", i+1)
		}
	}
}
