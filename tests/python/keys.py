"""The middleware's key functions on requests made here (no server): every vector of
tests/sdk/keys.json (the keys the Node and Go packages make of the same requests: by_ip with
prefixes for IPv4, IPv6 and IPv4-mapped addresses, trusted proxies with X-Forwarded-For,
by_header, by_route, by_user, with_prefix), then what the vectors do not say: by_user() without
a function, and the frameworks' requests (ASGI's repeated fields).

argv[1]: the path of keys.json.
"""

import json
import sys

import harness
from harness import check
from sluice.middleware import Request, by_header, by_ip, by_route, by_user, with_prefix
from sluice.middleware.asgi import request_from_scope


def req(ip="203.0.113.7", headers=None, method="GET", path="/users/7", route="", user=None,
        raw=None):
    return Request(method, path, headers or {}, ip, route=route, user=user, raw=raw)


def expect(name, key, request, want):
    got = key(request)
    check(name, got == want, f"got {got!r}, want {want!r}")


def prefixed(v, key):
    return with_prefix(v["prefix"], key) if "prefix" in v else key


def vectors(path):
    with open(path) as f:
        vs = json.load(f)
    for v in vs["ip"]:
        key = prefixed(v, by_ip(v.get("v4"), v.get("v6")))
        expect(f"keys.json ip {v}", key, req(v["ip"]), v["key"])
    for v in vs["ip_refused"]:
        try:
            by_ip(v.get("v4"), v.get("v6"))
            check(f"keys.json ip_refused {v}: by_ip raises ValueError", False)
        except ValueError:
            check(f"keys.json ip_refused {v}: by_ip raises ValueError", True)
    for v in vs["header"]:
        expect(f"keys.json header {v}", prefixed(v, by_header(v["name"])),
               req(headers=v["headers"]), v["key"])
    for v in vs["route"]:
        expect(f"keys.json route {v}", prefixed(v, by_route()),
               req(method=v["method"], path=v["path"], route=v.get("route", "")), v["key"])
    for v in vs["user"]:
        expect(f"keys.json user {v}", prefixed(v, by_user(lambda raw, u=v["user"]: u)), req(),
               v["key"])
    for v in vs["trusted_proxies"]:
        key = prefixed(v, by_ip(v.get("v4"), v.get("v6"), trusted_proxies=v["trusted"]))
        headers = {"x-forwarded-for": v["x_forwarded_for"]} if "x_forwarded_for" in v else {}
        expect(f"keys.json trusted_proxies {v}", key, req(v["peer"], headers), v["key"])
    check("keys.json has vectors of every kind",
          all(len(vs[k]) >= 4 for k in ("ip", "ip_refused", "header", "route", "user",
                                         "trusted_proxies")))


def beyond():
    expect("by_user(): the framework's user, as text", by_user(), req(user=42), "42")
    expect("by_user(): anonymous, no key", by_user(), req(), None)
    a = by_ip(24, 64)(req("::ffff:203.0.113.7"))
    b = by_ip(24, 64)(req("::ffff:198.51.100.9"))
    check("by_ip(24, 64): IPv4 clients of a dual-stack server keep a key per network",
          (a, b) == ("203.0.113.0/24", "198.51.100.0/24"), f"{a} {b}")
    scope = {"type": "http", "method": "GET", "path": "/x", "client": ("10.0.0.2", 4711),
             "headers": [(b"X-Forwarded-For", b"198.51.100.9"), (b"x-forwarded-for", b"10.0.0.1"),
                         (b"x-user", b"dave")]}
    r = request_from_scope(scope)
    check("ASGI: a repeated field is one, joined with \", \" in order",
          r.headers.get("x-forwarded-for") == "198.51.100.9, 10.0.0.1", r.headers)
    expect("ASGI: trusted proxies read every X-Forwarded-For field",
           by_ip(trusted_proxies=["10.0.0.0/8"]), r, "198.51.100.9")


if __name__ == "__main__":
    vectors(sys.argv[1])
    beyond()
    harness.finish()
