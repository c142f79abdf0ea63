package sluice

// server_test.go - what the tests against real servers share. tests/integration/test_go.sh
// starts them (sluiced, spares to stop, a TLS sluiced, a port that never answers) and names
// them in the environment; without SLUICE_GO_INTEGRATION=1 these tests are skipped.

import (
	"context"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

func serverEnv(t *testing.T, name string) string {
	t.Helper()
	if os.Getenv("SLUICE_GO_INTEGRATION") != "1" {
		t.Skip("needs the servers tests/integration/test_go.sh starts")
	}
	v := os.Getenv(name)
	if v == "" {
		t.Fatalf("%s is not set", name)
	}
	return v
}

// runID makes this run's keys fresh, so a rerun against the same sluiced starts from empty keys.
var runID = fmt.Sprintf("go%d-", time.Now().UnixNano())

func newClient(t *testing.T, opts Options) *Client {
	t.Helper()
	if opts.Addr == "" {
		opts.Addr = serverEnv(t, "SLUICE_RESP_ADDR")
	}
	if opts.Timeout == 0 { // roomy: a test passes with a CPU hog beside it
		opts.Timeout, opts.DialTimeout = 20*time.Second, 20*time.Second
	}
	c, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// refusedAddr is an address whose connections are refused for the rest of the test: a TCP
// socket bound to the port and never listening holds it. A port chosen and closed at once
// would not do: another socket (an HTTP server of the test itself) may be given it next, and
// the client then talks to that.
func refusedAddr(t *testing.T) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("127.0.0.1:%d", sa.(*syscall.SockaddrInet4).Port)
}

func bg(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// spare is a sluiced a case may stop: its address and PID.
type spare struct {
	addr string
	pid  int
}

var (
	sparesMu   sync.Mutex
	sparesLeft []spare
	sparesRead bool
)

// takeSpare hands out one of the spare sluiced servers, each once.
func takeSpare(t *testing.T) spare {
	t.Helper()
	list := serverEnv(t, "SLUICE_SPARES")
	sparesMu.Lock()
	defer sparesMu.Unlock()
	if !sparesRead {
		for _, s := range strings.Split(list, ",") {
			var sp spare
			i := strings.LastIndexByte(s, '/')
			if _, err := fmt.Sscan(s[i+1:], &sp.pid); i < 0 || err != nil {
				t.Fatalf("SLUICE_SPARES: bad entry %q", s)
			}
			sp.addr = s[:i]
			sparesLeft = append(sparesLeft, sp)
		}
		sparesRead = true
	}
	if len(sparesLeft) == 0 {
		t.Fatal("no spare sluiced left: test_go.sh starts one per case that stops its server")
	}
	sp := sparesLeft[0]
	sparesLeft = sparesLeft[1:]
	return sp
}

// stop ends the spare by its PID and waits (at most 10 s) until its port refuses connections.
func (s spare) stop(t *testing.T) {
	t.Helper()
	if err := syscall.Kill(s.pid, syscall.SIGTERM); err != nil {
		t.Fatalf("stopping sluiced (pid %d): %v", s.pid, err)
	}
	for i := 0; i < 200; i++ {
		c, err := net.DialTimeout("tcp", s.addr, time.Second)
		if err != nil {
			return
		}
		c.Close()
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("sluiced at %s still accepts connections 10 s after SIGTERM", s.addr)
}

// poll runs cond every 20 ms until it is true, at most 500 times; it reports whether it was.
func poll(cond func() bool) bool {
	for i := 0; i < 500; i++ {
		if cond() {
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return false
}

func TestVersionIsTheProjects(t *testing.T) {
	if want := serverEnv(t, "SLUICE_VERSION"); Version != want {
		t.Fatalf("Version is %q, CMakeLists.txt says %q", Version, want)
	}
}
