// Command go_bench is the Go package sluice.dev/go beside its peers, run by bench/packages/go.sh
// in a module that requires the package through a replace to its unpacked zip. Prints figures;
// asserts nothing. Subcommands:
//
//	serve CASE ADDR SLUICED_ADDR      net/http on ADDR, GET /hello -> "hello"; CASE bare (the
//	                                  handler alone) or sluice (Limiter.Middleware, rule "bench",
//	                                  key KeyHeader("X-Key"), over sluiced at SLUICED_ADDR)
//	load ADDR N KEYS SEED             N requests one at a time over one keep-alive connection,
//	                                  X-Key drawn uniformly from KEYS keys; prints
//	                                  "p50_us p99_us req_per_s non200"
//	client N KEYS ROUNDS CONC LUA SLMEM SLREDIS REDIS
//	                                  decisions/s from CONC goroutines sharing one Client
//	                                  (PoolSize CONC): Client.Allow through sluiced (memory
//	                                  store; a redis-server with sluice.so), and EVALSHA of the
//	                                  GCRA script LUA sent with Client.Do straight to that
//	                                  redis-server; rounds interleaved, medians and ratios
package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math/rand"
	"net"
	"net/http"
	"os"
	"sort"
	"strconv"
	"sync"
	"syscall"
	"time"

	sluice "sluice.dev/go"
)

const rule = "bench" // gcra, 1 000 000 per second, burst 1 000 000: go.sh writes the rules file

func keyStream(n, keys int, seed int64) []string {
	r := rand.New(rand.NewSource(seed))
	out := make([]string, n)
	for i := range out {
		out[i] = "user:" + strconv.Itoa(r.Intn(keys))
	}
	return out
}

func median(v []float64) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	m := len(s) / 2
	if len(s)%2 == 1 {
		return s[m]
	}
	return (s[m-1] + s[m]) / 2
}

func must(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "go_bench:", err)
		os.Exit(1)
	}
}

func serve(kind, addr, sluicedAddr string) {
	var h http.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "hello")
	})
	if kind == "sluice" {
		c, err := sluice.New(sluice.Options{Addr: sluicedAddr})
		must(err)
		lim := &sluice.Limiter{Client: c, Rule: rule, Key: sluice.KeyHeader("X-Key")}
		h = lim.Middleware(h)
	} else if kind != "bare" {
		must(fmt.Errorf("unknown case %q", kind))
	}
	mux := http.NewServeMux()
	mux.Handle("/hello", h)
	must(http.ListenAndServe(addr, mux))
}

// load sends raw HTTP/1.1 on one connection (no client library between the clock and the
// socket), one request at a time, and reads each response by its Content-Length.
func load(addr string, n, keys int, seed int64) {
	nc, err := net.Dial("tcp", addr)
	must(err)
	defer nc.Close()
	br := bufio.NewReader(nc)
	stream := keyStream(n, keys, seed)
	lat := make([]float64, n)
	bad := 0
	start := time.Now()
	for i, k := range stream {
		t0 := time.Now()
		_, err := io.WriteString(nc, "GET /hello HTTP/1.1\r\nHost: bench\r\nX-Key: "+k+"\r\n\r\n")
		must(err)
		resp, err := http.ReadResponse(br, nil)
		must(err)
		_, err = io.Copy(io.Discard, resp.Body)
		must(err)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			bad++
		}
		lat[i] = float64(time.Since(t0).Nanoseconds()) / 1e3
	}
	wall := time.Since(start).Seconds()
	sort.Float64s(lat)
	fmt.Printf("%.1f %.1f %.0f %d\n", lat[n/2], lat[n*99/100], float64(n)/wall, bad)
}

type clientCase struct {
	name string
	do   func(ctx context.Context, key string) error
}

// cpuUs is this process's CPU time so far (user + system), microseconds.
func cpuUs() float64 {
	var ru syscall.Rusage
	must(syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e3
}

// run spreads stream over conc goroutines and returns decisions per second and this process's
// CPU time per decision (us): what the client costs its caller.
func run(c clientCase, stream []string, conc int) (float64, float64) {
	ctx := context.Background()
	cpu0 := cpuUs()
	var wg sync.WaitGroup
	errs := make(chan error, conc)
	start := time.Now()
	per := (len(stream) + conc - 1) / conc
	for g := 0; g < conc; g++ {
		lo, hi := g*per, (g+1)*per
		if hi > len(stream) {
			hi = len(stream)
		}
		wg.Add(1)
		go func(part []string) {
			defer wg.Done()
			for _, k := range part {
				if err := c.do(ctx, k); err != nil {
					errs <- err
					return
				}
			}
		}(stream[lo:hi])
	}
	wg.Wait()
	select {
	case err := <-errs:
		must(fmt.Errorf("%s: %v", c.name, err))
	default:
	}
	return float64(len(stream)) / time.Since(start).Seconds(), (cpuUs() - cpu0) / float64(len(stream))
}

func allowVia(c *sluice.Client) func(context.Context, string) error {
	return func(ctx context.Context, key string) error {
		d, err := c.Allow(ctx, rule, key, 1)
		if err == nil && !d.Allowed {
			err = fmt.Errorf("refused %s", key)
		}
		return err
	}
}

func client(n, keys, rounds, conc int, luaPath, slMem, slRedis, redisAddr string) {
	ctx := context.Background()
	opts := func(addr string) sluice.Options {
		return sluice.Options{Addr: addr, PoolSize: conc, Timeout: 5 * time.Second}
	}
	mem, err := sluice.New(opts(slMem))
	must(err)
	onRedis, err := sluice.New(opts(slRedis))
	must(err)
	raw, err := sluice.New(opts(redisAddr))
	must(err)
	script, err := os.ReadFile(luaPath)
	must(err)
	rep, err := raw.Do(ctx, "SCRIPT", "LOAD", string(script))
	must(err)
	sha := rep.Str
	// redis_rate's Limit{Rate: 1000000, Burst: 1000000, Period: time.Second}, its key prefix
	evalsha := func(ctx context.Context, key string) error {
		rep, err := raw.Do(ctx, "EVALSHA", sha, "1", "rate:"+key, "1000000", "1000000", "1", "1")
		if err == nil && (len(rep.Elems) != 4 || rep.Elems[0].Int != 1) {
			err = fmt.Errorf("refused or unexpected reply for %s: %+v", key, rep)
		}
		return err
	}
	cases := []clientCase{
		{"EVALSHA redis_rate's GCRA -> redis-server", evalsha},
		{"Client.Allow -> sluiced (memory store)", allowVia(mem)},
		{"Client.Allow -> sluiced -> redis-server (sluice.so)", allowVia(onRedis)},
	}
	stream := keyStream(n, keys, 11)
	for _, c := range cases {
		run(c, stream[:n/5], conc) // warm-up: connections made, keys created
	}
	rates := make([][]float64, len(cases))
	cpus := make([][]float64, len(cases))
	for r := 0; r < rounds; r++ {
		for i, c := range cases {
			rate, cpu := run(c, stream, conc)
			rates[i] = append(rates[i], rate)
			cpus[i] = append(cpus[i], cpu)
		}
	}
	fmt.Printf("client decisions, %d goroutines sharing one Client (PoolSize %d): %d per round, %d rounds, medians\n",
		conc, conc, n, rounds)
	for i, c := range cases {
		ratios := make([]float64, rounds)
		for r := range ratios {
			ratios[r] = rates[i][r] / rates[0][r]
		}
		sorted := append([]float64(nil), rates[i]...)
		sort.Float64s(sorted)
		fmt.Printf("  %-52s %9.0f decisions/s  (min %.0f, max %.0f)  x%.2f of the first  %.2f us CPU/decision here\n",
			c.name, median(rates[i]), sorted[0], sorted[len(sorted)-1], median(ratios), median(cpus[i]))
	}
	mem.Close()
	onRedis.Close()
	raw.Close()
}

func main() {
	a := os.Args[1:]
	atoi := func(i int) int {
		v, err := strconv.Atoi(a[i])
		must(err)
		return v
	}
	switch {
	case len(a) == 4 && a[0] == "serve":
		serve(a[1], a[2], a[3])
	case len(a) == 5 && a[0] == "load":
		load(a[1], atoi(2), atoi(3), int64(atoi(4)))
	case len(a) == 9 && a[0] == "client":
		client(atoi(1), atoi(2), atoi(3), atoi(4), a[5], a[6], a[7], a[8])
	default:
		fmt.Fprintln(os.Stderr, "usage: go_bench serve|load|client ...")
		os.Exit(2)
	}
}
