package sluice

// middleware.go - net/http middleware over a Client: one decision per request under a named
// rule, the key from a KeyFunc, answered as sluiced's own HTTP API answers (the IETF RateLimit
// fields, a 429 with Retry-After and an application/problem+json body of the same shape; a
// request a max_delay rule admits after a wait is served after that wait).
// An in-flight rule (algorithm: concurrency, read from sluiced with SL.RULE GET, or InFlight set
// by hand) acquires on the way in and releases when the handler returns: after the response,
// when the handler panics, and after a client that went away mid-response only once the
// handler returns (the hold stands for the handler's work, which goes on after a disconnect;
// net/http cancels the request's context). The release never uses the request's context, which is cancelled by then. With Report, the
// release reports the request's latency and whether it was dropped, for an adaptive limit.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// KeyFunc makes the rate-limit key of a request. An error means the request lacks what the key
// needs (a header, a user): the middleware answers 400, as sluiced does, rather than let such
// requests share one key.
type KeyFunc func(r *http.Request) (string, error)

// KeyIP keys by the client's address (the TCP peer, r.RemoteAddr): with prefixV4 32 and
// prefixV6 128 the address as net/http gives it ("192.0.2.7", "2001:db8::1"); with fewer bits
// its network, written "192.0.2.0/24" or, for IPv6, with every group in full
// ("2001:db8:1:2:0:0:0:0/64"). These are the keys the Node and Python packages make, so one
// client is one key whichever service counts it. An IPv4-mapped IPv6 address (::ffff:a.b.c.d,
// what a dual-stack listener sees of an IPv4 client) is keyed as its IPv4 address. A prefix
// outside 0..32 or 0..128 panics (a mistake in the program, found when the KeyFunc is made).
// Behind a proxy the peer is the proxy: use KeyForwardedIP with the proxies you trust.
func KeyIP(prefixV4, prefixV6 int) KeyFunc {
	checkBits("KeyIP", prefixV4, prefixV6)
	return func(r *http.Request) (string, error) {
		host, _, err := net.SplitHostPort(r.RemoteAddr)
		if err != nil {
			host = r.RemoteAddr
		}
		return ipKey(host, prefixV4, prefixV6)
	}
}

func checkBits(fn string, prefixV4, prefixV6 int) {
	if prefixV4 < 0 || prefixV4 > 32 || prefixV6 < 0 || prefixV6 > 128 {
		panic(fmt.Sprintf("sluice.%s(%d, %d): the prefixes are 0..32 (IPv4) and 0..128 (IPv6)",
			fn, prefixV4, prefixV6))
	}
}

// ipKey is the key of the address addr, written as it was given (the whole address) or as its
// network (fewer bits).
func ipKey(addr string, prefixV4, prefixV6 int) (string, error) {
	if rest := strings.TrimPrefix(addr, "::ffff:"); rest != addr && isIPv4Text(rest) {
		addr = rest
	}
	ip := net.ParseIP(addr)
	switch {
	case ip == nil:
		return "", fmt.Errorf("the client address %q is not an IP address", addr)
	case isIPv4Text(addr) && prefixV4 == 32, !isIPv4Text(addr) && prefixV6 == 128:
		return addr, nil
	case isIPv4Text(addr):
		return ip.To4().Mask(net.CIDRMask(prefixV4, 32)).String() + "/" + strconv.Itoa(prefixV4), nil
	}
	masked := ip.To16().Mask(net.CIDRMask(prefixV6, 128))
	var b strings.Builder
	for i := 0; i < 16; i += 2 {
		if i > 0 {
			b.WriteByte(':')
		}
		b.WriteString(strconv.FormatUint(uint64(masked[i])<<8|uint64(masked[i+1]), 16))
	}
	return b.String() + "/" + strconv.Itoa(prefixV6), nil
}

// isIPv4Text: s is an IPv4 address in dotted decimal.
func isIPv4Text(s string) bool {
	return !strings.Contains(s, ":") && net.ParseIP(s) != nil
}

// KeyForwardedIP keys by the client's address behind proxies you trust, as KeyIP does: the
// rightmost X-Forwarded-For entry that is not one of trusted (the leftmost when all are), or the
// TCP peer itself when the peer is not trusted, so a client cannot choose its key by sending
// the header itself. trusted lists networks ("10.0.0.0/8", "2001:db8::/32") and addresses
// ("10.0.0.2"); an entry that is neither panics. Express's 'trust proxy' with those networks
// picks the same address, so the Node package's keys.ip() makes the same key.
func KeyForwardedIP(trusted []string, prefixV4, prefixV6 int) KeyFunc {
	checkBits("KeyForwardedIP", prefixV4, prefixV6)
	var nets []*net.IPNet
	for _, t := range trusted {
		_, n, err := net.ParseCIDR(t)
		if err != nil {
			ip := net.ParseIP(t)
			if ip == nil {
				panic(fmt.Sprintf("sluice.KeyForwardedIP: %q is neither a network nor an address", t))
			}
			bits := 128
			if ip.To4() != nil {
				ip, bits = ip.To4(), 32
			}
			n = &net.IPNet{IP: ip, Mask: net.CIDRMask(bits, bits)}
		}
		nets = append(nets, n)
	}
	trustedIP := func(addr string) bool {
		ip := net.ParseIP(addr)
		if ip == nil {
			return false
		}
		for _, n := range nets {
			if n.Contains(ip) { // an IPv4-mapped address is in an IPv4 network
				return true
			}
		}
		return false
	}
	return func(r *http.Request) (string, error) {
		host, _, err := net.SplitHostPort(r.RemoteAddr)
		if err != nil {
			host = r.RemoteAddr
		}
		hops := []string{host} // the peer, then X-Forwarded-For from its right end
		var xff []string
		for _, h := range r.Header.Values("X-Forwarded-For") {
			for _, e := range strings.Split(h, ",") {
				// as Express's proxy-addr reads it: spaces trimmed (a tab stays, and makes
				// the entry no address), empty entries dropped
				if e = strings.Trim(e, " "); e != "" {
					xff = append(xff, e)
				}
			}
		}
		for i := len(xff) - 1; i >= 0; i-- {
			hops = append(hops, xff[i])
		}
		client := hops[len(hops)-1]
		for _, h := range hops[:len(hops)-1] {
			if !trustedIP(h) {
				client = h
				break
			}
		}
		return ipKey(client, prefixV4, prefixV6)
	}
}

// KeyHeader keys by a request header's value; a request without it is refused with 400.
func KeyHeader(name string) KeyFunc {
	return func(r *http.Request) (string, error) {
		if v := r.Header.Get(name); v != "" {
			return v, nil
		}
		return "", fmt.Errorf("the request has no %s header", name)
	}
}

// KeyRoute keys by the route: pattern, the route as your router names it ("/users/{id}"), so
// that every request to it shares one budget, for every client together, whatever the IDs in
// its path; "" keys by the request's path. Give each route's Limiter (or the Middleware around
// that route's handler) its own KeyRoute. The method is not in the key: the Node and Python
// packages make the same key of the same route.
func KeyRoute(pattern string) KeyFunc {
	return func(r *http.Request) (string, error) {
		if pattern != "" {
			return pattern, nil
		}
		return r.URL.Path, nil
	}
}

// KeyUser keys by the user that user finds for the request (from a session, a token, the
// request's context); "" is a request without a user, refused with 400.
func KeyUser(user func(r *http.Request) string) KeyFunc {
	return func(r *http.Request) (string, error) {
		if u := user(r); u != "" {
			return u, nil
		}
		return "", errors.New("the request has no user")
	}
}

// WithPrefix puts prefix before the keys key makes ("ip:" + address), so that keys of several
// kinds under one rule stay apart.
func WithPrefix(prefix string, key KeyFunc) KeyFunc {
	return func(r *http.Request) (string, error) {
		k, err := key(r)
		return prefix + k, err
	}
}

// Limiter limits the requests of a handler under one rule of sluiced. Set its fields, then
// wrap handlers with Middleware; do not change the fields afterwards.
type Limiter struct {
	Client *Client // required
	Rule   string  // the rule's name in sluiced, required
	Key    KeyFunc // nil: KeyIP(32, 128)
	// Cost is the units a request takes; nil: 1.
	Cost func(r *http.Request) int64
	// Priority is the request's priority under a rule with `priorities` (PRIORITY p); nil or
	// "": none, the rule's lowest. A priority the rule lacks is sluiced's *ServerError, which
	// goes to OnError (by default a 503).
	Priority func(r *http.Request) string
	// Report: an in-flight rule's release reports the request's latency (from the middleware
	// getting it to the handler's return) and DROPPED when the handler panicked, the status was
	// a 5xx, or the client went away before the handler returned (the request's context was
	// cancelled), for an adaptive limit (`adaptive: aimd` or `vegas`). Off by default: a 5xx or
	// a client that gives up is not always load, and a sluiced older than LATENCY refuses such
	// a release (the hold then lives to its timeout).
	Report bool
	// InFlight: the rule is an in-flight rule (algorithm: concurrency): a request acquires a
	// hold on the way in and releases it when the handler returns, however it returns. false:
	// the middleware reads the rule's algorithm from sluiced (SL.RULE GET, on first use and
	// again every ruleInfoTTL) and acquires for a concurrency rule all the same; set InFlight
	// where sluiced will not tell (SL.RULE GET needs the admin permission when sluiced has an
	// admin password): while sluiced refuses to tell, a request is decided with SL.ALLOW,
	// which on an in-flight rule takes a unit that no release gives back. While sluiced cannot
	// be reached to tell, a request is decided by the Client's OnUnreachable, as the decision
	// would be, and the next request asks again.
	InFlight bool
	// HoldTimeout bounds a hold's life when the release never comes (a crash); 0: the rule's
	// hold_timeout.
	HoldTimeout time.Duration
	// Shadow decides and sets the RateLimit fields but never refuses (a rule with shadow: true
	// in sluiced never refuses either).
	Shadow bool
	// Window is the rule's window for RateLimit-Policy's w and the 429's detail. 0: read from
	// sluiced with the algorithm (SL.RULE GET); while it cannot be read, w is left out.
	Window time.Duration
	// OnError answers a request whose decision failed (sluiced unreachable under Raise, an
	// unknown rule); nil: 503 with a problem. OnReleaseError hears of a release that failed.
	OnError        func(w http.ResponseWriter, r *http.Request, err error)
	OnReleaseError func(err error)

	infoMu    sync.Mutex
	info      ruleInfo  // what sluiced said of the rule
	infoAsked time.Time // when sluiced was last asked (zero: never)
}

// ruleInfo is what the middleware needs of a rule's definition in sluiced.
type ruleInfo struct {
	known    bool  // sluiced answered SL.RULE GET
	windowS  int64 // the window in seconds, rounded up; 0: unknown
	inFlight bool  // algorithm: concurrency
}

const (
	ruleInfoTTL = 10 * time.Second // how long an answer stands: a rule changed in sluiced is seen
	ruleRetry   = time.Minute      // how often a rule sluiced refused to tell of is asked again
)

// Middleware returns next limited by l: func(http.Handler) http.Handler, as routers take it.
func (l *Limiter) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		started := time.Now()
		key, err := l.keyOf(r)
		if err != nil {
			writeProblem(w, http.StatusBadRequest, "Bad Request", err.Error())
			return
		}
		cost := int64(1)
		if l.Cost != nil {
			cost = l.Cost(r)
		}
		var o RequestOptions
		if l.Priority != nil {
			o.Priority = l.Priority(r)
		}
		info, unreachable := l.ruleInfo()
		var d Decision
		if unreachable != nil {
			// the algorithm is unknown and sluiced cannot be reached: decided as the decision
			// would be (OnUnreachable), never with an SL.ALLOW that an in-flight rule would
			// charge with a unit no release gives back
			d, err = l.Client.fallback(unreachable)
		} else if l.InFlight || info.inFlight {
			d, err = l.Client.AcquireWith(r.Context(), l.Rule, key, cost, l.HoldTimeout, o)
		} else {
			d, err = l.Client.AllowWith(r.Context(), l.Rule, key, cost, o)
		}
		if err != nil {
			l.fail(w, r, err)
			return
		}
		if d.HoldID != 0 && l.Report {
			sw := &statusWriter{ResponseWriter: w}
			w = sw
			defer func() {
				p := recover()
				l.releaseWith(key, d.HoldID, ReleaseOptions{Latency: minDuration(time.Since(started), LatencyMax),
					Dropped: p != nil || sw.status >= 500 || r.Context().Err() != nil})
				if p != nil {
					panic(p)
				}
			}()
		} else if d.HoldID != 0 {
			defer l.release(key, d.HoldID)
		}
		if !d.Fallback {
			l.setHeaders(w.Header(), d, info.windowS)
		}
		if !d.Allowed && !l.Shadow {
			l.refuse(w, d, info.windowS)
			return
		}
		if d.Allowed && d.RetryAfterMs > 0 && !waitDelay(r.Context(), d.RetryAfterMs) {
			return // the client went away during a max_delay rule's wait: nothing to serve
		}
		next.ServeHTTP(w, r)
	})
}

// waitDelay waits out a max_delay rule's delay before the request is served, as sluiced's
// /v1/auth holds back its answer; false when ctx ended first.
func waitDelay(ctx context.Context, delayMs int64) bool {
	t := time.NewTimer(msDur(delayMs))
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

func (l *Limiter) keyOf(r *http.Request) (string, error) {
	if l.Key == nil {
		return KeyIP(32, 128)(r)
	}
	return l.Key(r)
}

func (l *Limiter) fail(w http.ResponseWriter, r *http.Request, err error) {
	var se *ServerError
	if errors.As(err, &se) && strings.Contains(se.Msg, "key is longer than") {
		// the request's own fault (a header past sluiced's --key-max), as sluiced answers it
		writeProblem(w, http.StatusBadRequest, "Bad Request", strings.TrimPrefix(se.Msg, "ERR "))
		return
	}
	if l.OnError != nil {
		l.OnError(w, r, err)
		return
	}
	writeProblem(w, http.StatusServiceUnavailable, "Service Unavailable",
		"the rate limiter cannot decide: "+err.Error())
}

// release frees the hold after the handler, with a context of its own: the request's is
// cancelled once the client has gone.
func (l *Limiter) release(key string, id int64) {
	l.releaseWith(key, id, ReleaseOptions{})
}

// releaseWith is release with a report (Report).
func (l *Limiter) releaseWith(key string, id int64, o ReleaseOptions) {
	ctx, cancel := context.WithTimeout(context.Background(), l.Client.opts.Timeout)
	defer cancel()
	if err := l.Client.ReleaseWith(ctx, l.Rule, key, id, o); err != nil && l.OnReleaseError != nil {
		l.OnReleaseError(err)
	}
}

func minDuration(a, b time.Duration) time.Duration {
	if a < b {
		return a
	}
	return b
}

// statusWriter notes the status the handler answers (200 when it writes without one); Flush
// and Hijack reach the writer it wraps, as Unwrap does for http.ResponseController.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 && code >= 200 { // 1xx: informational, the status is still to come
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *statusWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	if h, ok := w.ResponseWriter.(http.Hijacker); ok {
		return h.Hijack()
	}
	return nil, nil, errors.New("sluice: the ResponseWriter cannot be hijacked")
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// setHeaders sets RateLimit-Policy and RateLimit as sluiced does:
// `"api";q=100;w=60` and `"api";r=42;t=1`.
func (l *Limiter) setHeaders(h http.Header, d Decision, ws int64) {
	policy := sfString(l.Rule) + ";q=" + strconv.FormatInt(sfClamp(d.Limit), 10)
	if ws > 0 {
		policy += ";w=" + strconv.FormatInt(sfClamp(ws), 10)
	}
	h.Set("RateLimit-Policy", policy)
	h.Set("RateLimit", sfString(l.Rule)+";r="+strconv.FormatInt(sfClamp(d.Remaining), 10)+
		";t="+strconv.FormatInt(sfClamp(ceilDiv(d.ResetAfterMs, 1000)), 10))
}

// refuse answers 429 with Retry-After (seconds, rounded up; none when the cost never fits) and
// the body sluiced's /v1/auth sends.
func (l *Limiter) refuse(w http.ResponseWriter, d Decision, ws int64) {
	if d.RetryAfterMs >= 0 {
		w.Header().Set("Retry-After", strconv.FormatInt(ceilDiv(d.RetryAfterMs, 1000), 10))
	}
	detail := fmt.Sprintf("rule '%s' allows %d per %ds", l.Rule, d.Limit, ws)
	if d.Fallback {
		detail = "the rate limiter cannot be reached; refusing until it can"
	} else if ws == 0 {
		detail = fmt.Sprintf("rule '%s' allows %d per window", l.Rule, d.Limit)
	}
	writeProblem(w, http.StatusTooManyRequests, "Too Many Requests", detail)
}

// writeProblem answers with an RFC 9457 problem: {"type":"about:blank","title":...,
// "status":...,"detail":...}, the fields in sluiced's order.
func writeProblem(w http.ResponseWriter, status int, title, detail string) {
	body := struct {
		Type   string `json:"type"`
		Title  string `json:"title"`
		Status int    `json:"status"`
		Detail string `json:"detail"`
	}{"about:blank", title, status, detail}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // as sluiced writes it: '<' stays '<'
	enc.Encode(body)
	b := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	w.Write(b)
}

// ruleInfo is what the middleware knows of its rule: Window and InFlight when set, the rest from
// sluiced (SL.RULE GET). The first request asks, and requests meanwhile wait for its answer; an
// answer older than ruleInfoTTL is asked again by one request while the others go on with it.
// A rule sluiced refused to tell of (NOPERM, an unknown rule) is asked again at most every
// ruleRetry; one it could not be asked of (unreachable) by the next request. The error is that
// *UnreachableError when the algorithm is still unknown (never answered, InFlight unset): the
// request is then decided by OnUnreachable.
func (l *Limiter) ruleInfo() (ruleInfo, error) {
	fixed := ruleInfo{known: true, inFlight: l.InFlight}
	if l.Window > 0 {
		fixed.windowS = ceilDiv(ceilMs(l.Window), 1000)
	}
	if l.InFlight && l.Window > 0 {
		return fixed, nil // all set by hand: nothing to ask
	}
	var err error
	l.infoMu.Lock()
	info, asked := l.info, l.infoAsked
	wait := ruleRetry
	if info.known {
		wait = ruleInfoTTL
	}
	if asked.IsZero() || time.Since(asked) >= wait {
		l.infoAsked = time.Now()
		if !info.known {
			info, err = l.askRule(info) // under the lock: the first requests wait for the answer
		} else {
			l.infoMu.Unlock()
			info, err = l.askRule(info)
			l.infoMu.Lock()
		}
		var ue *UnreachableError
		if info.known {
			l.info = info
		} else if errors.As(err, &ue) {
			l.infoAsked = time.Time{} // sluiced down, not refusing: the next request asks
		}
	}
	l.infoMu.Unlock()
	var ue *UnreachableError
	if info.known || l.InFlight || !errors.As(err, &ue) {
		err = nil // known, or an error the decision will meet (or not) by itself
	}
	if fixed.windowS > 0 {
		info.windowS = fixed.windowS
	}
	info.inFlight = info.inFlight || l.InFlight
	return info, err
}

// askRule reads the rule from sluiced; old and the error when it cannot.
func (l *Limiter) askRule(old ruleInfo) (ruleInfo, error) {
	ctx, cancel := context.WithTimeout(context.Background(), l.Client.opts.Timeout)
	defer cancel()
	def, err := l.Client.ruleDef(ctx, l.Rule)
	if err != nil {
		return old, err
	}
	info := ruleInfo{known: true, inFlight: def.Algorithm == "concurrency"}
	if win, err := parseRuleDuration(def.Window); err == nil && def.Window != "" {
		info.windowS = ceilDiv(ceilMs(win), 1000)
	}
	return info, nil
}

// ruleDefinition is what the middleware reads of a rule's JSON (SL.RULE GET).
type ruleDefinition struct {
	Algorithm string `json:"algorithm"`
	Window    string `json:"window"`
}

// ruleDef reads a rule's definition from sluiced (SL.RULE GET name).
func (c *Client) ruleDef(ctx context.Context, rule string) (ruleDefinition, error) {
	var def ruleDefinition
	rep, err := c.command(ctx, "SL.RULE", "GET", rule)
	if err != nil {
		return def, err
	}
	err = json.Unmarshal([]byte(rep.Str), &def)
	return def, err
}

// parseRuleDuration reads a duration as sluiced writes one: Go's units plus days ("1d2h").
func parseRuleDuration(s string) (time.Duration, error) {
	days := time.Duration(0)
	if i := strings.IndexByte(s, 'd'); i > 0 {
		n, err := strconv.ParseInt(s[:i], 10, 32)
		if err != nil {
			return 0, fmt.Errorf("bad duration %q", s)
		}
		days, s = time.Duration(n)*24*time.Hour, s[i+1:]
		if s == "" {
			return days, nil
		}
	}
	d, err := time.ParseDuration(s)
	return days + d, err
}

// sfString is an RFC 8941 sf-string as sluiced writes it: printable ASCII, '"' and '\'
// escaped, any other byte as '?'.
func sfString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c >= 0x20 && c < 0x7f:
			b.WriteByte(c)
		default:
			b.WriteByte('?')
		}
	}
	b.WriteByte('"')
	return b.String()
}

const sfIntegerMax = 999999999999999 // RFC 8941 §3.3.1

func sfClamp(v int64) int64 {
	if v < 0 {
		return 0
	}
	if v > sfIntegerMax {
		return sfIntegerMax
	}
	return v
}

func ceilDiv(a, b int64) int64 {
	if a <= 0 {
		return 0
	}
	q := a / b
	if a%b != 0 {
		q++
	}
	return q
}
