package sluice

// keys_test.go - the key functions against tests/sdk/keys.json, the keys every package's
// middleware (Python, Node, Go) makes of the same request, so one client, user or route is one
// key in sluiced whichever language's service counts it.

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
)

// keyVector is one vector of keys.json; Key nil: the request lacks what the key needs.
type keyVector struct {
	IP            string            `json:"ip"`
	V4            *float64          `json:"v4"`
	V6            *float64          `json:"v6"`
	Prefix        string            `json:"prefix"`
	Name          string            `json:"name"`
	Headers       map[string]string `json:"headers"`
	Method        string            `json:"method"`
	Path          string            `json:"path"`
	Route         string            `json:"route"`
	User          interface{}       `json:"user"`
	Peer          string            `json:"peer"`
	XForwardedFor *string           `json:"x_forwarded_for"`
	Trusted       []string          `json:"trusted"`
	Key           *string           `json:"key"`
}

func (v keyVector) bits() (int, int) {
	v4, v6 := 32, 128
	if v.V4 != nil {
		v4 = int(*v.V4)
	}
	if v.V6 != nil {
		v6 = int(*v.V6)
	}
	return v4, v6
}

// peerAddr is r.RemoteAddr for a client at ip: "ip:port", "[ip]:port" for IPv6 (and for text
// that is not an address at all, which KeyIP must refuse).
func peerAddr(ip string) string { return net.JoinHostPort(ip, "40000") }

func readKeys(t *testing.T) map[string]json.RawMessage {
	raw, err := os.ReadFile(serverEnv(t, "SLUICE_KEYS"))
	if err != nil {
		t.Fatal(err)
	}
	var table map[string]json.RawMessage
	if err := json.Unmarshal(raw, &table); err != nil {
		t.Fatal(err)
	}
	return table
}

func TestSharedKeys(t *testing.T) {
	table := readKeys(t)
	kinds := map[string]func(v keyVector) KeyFunc{
		"ip":     func(v keyVector) KeyFunc { return KeyIP(v.bits()) },
		"header": func(v keyVector) KeyFunc { return KeyHeader(v.Name) },
		"route":  func(v keyVector) KeyFunc { return KeyRoute(v.Route) },
		"user": func(v keyVector) KeyFunc {
			return KeyUser(func(*http.Request) string {
				if v.User == nil {
					return ""
				}
				return fmt.Sprint(v.User) // a number as its decimal text
			})
		},
		"trusted_proxies": func(v keyVector) KeyFunc {
			v4, v6 := v.bits()
			return KeyForwardedIP(v.Trusted, v4, v6)
		},
	}
	for kind, mk := range kinds {
		var vectors []keyVector
		if err := json.Unmarshal(table[kind], &vectors); err != nil || len(vectors) == 0 {
			t.Fatalf("keys.json: no %s vectors (%v)", kind, err)
		}
		for i, v := range vectors {
			key := mk(v)
			if v.Prefix != "" {
				key = WithPrefix(v.Prefix, key)
			}
			method := v.Method
			if method == "" {
				method = "GET"
			}
			path := v.Path
			if path == "" {
				path = "/"
			}
			r := httptest.NewRequest(method, path, nil)
			r.RemoteAddr = peerAddr(v.IP)
			if kind == "trusted_proxies" {
				r.RemoteAddr = peerAddr(v.Peer)
			}
			for name, value := range v.Headers {
				r.Header.Set(name, value)
			}
			if v.XForwardedFor != nil {
				r.Header.Set("X-Forwarded-For", *v.XForwardedFor)
			}
			got, err := key(r)
			switch {
			case v.Key == nil && err == nil:
				t.Errorf("%s %d (%+v): key %q, want none (an error: the middleware's 400)", kind, i, v, got)
			case v.Key != nil && (err != nil || got != *v.Key):
				t.Errorf("%s %d (%+v): key %q %v, want %q", kind, i, v, got, err, *v.Key)
			}
		}
	}
	var refused []keyVector
	if err := json.Unmarshal(table["ip_refused"], &refused); err != nil || len(refused) == 0 {
		t.Fatalf("keys.json: no ip_refused vectors (%v)", err)
	}
	for _, v := range refused {
		v4, v6 := v.bits()
		if float64(v4) != deref(v.V4, 32) || float64(v6) != deref(v.V6, 128) {
			continue // not an integer: a Go int cannot be one
		}
		func() {
			defer func() {
				if p := recover(); p == nil || !strings.Contains(fmt.Sprint(p), "prefixes are 0..32") {
					t.Errorf("KeyIP(%d, %d) made a KeyFunc (%v), want a panic", v4, v6, p)
				}
			}()
			KeyIP(v4, v6)
		}()
	}
}

func deref(p *float64, def float64) float64 {
	if p == nil {
		return def
	}
	return *p
}

// A trusted entry that is neither a network nor an address is a mistake found at once.
func TestKeyForwardedIPRefusesABadNetwork(t *testing.T) {
	defer func() {
		if p := recover(); p == nil {
			t.Error("KeyForwardedIP took \"10.0.0.0/33\"")
		}
	}()
	KeyForwardedIP([]string{"10.0.0.0/33"}, 32, 128)
}
