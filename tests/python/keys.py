"""The middleware's key functions on requests made here (no server): by_ip with and without
prefixes, for IPv4, IPv6 and IPv4-mapped addresses, behind trusted proxies (X-Forwarded-For);
by_header, by_route and by_user.
"""

import sys

import harness
from harness import check
from sluice.middleware import Request, by_header, by_ip, by_route, by_user


def req(ip="203.0.113.7", headers=None, method="GET", path="/users/7", route="", user=None,
        raw=None):
    return Request(method, path, headers or {}, ip, route=route, user=user, raw=raw)


def expect(name, key, request, want):
    got = key(request)
    check(name, got == want, f"got {got!r}, want {want!r}")


def ip_keys():
    expect("by_ip: an IPv4 address", by_ip(), req("203.0.113.7"), "ip:203.0.113.7")
    expect("by_ip(24): its /24", by_ip(24), req("203.0.113.7"), "ip:203.0.113.0/24")
    expect("by_ip(24, 64): an IPv6 address's /64", by_ip(24, 64), req("2001:db8:1:2:3:4:5:6"),
           "ip:2001:db8:1:2::/64")
    expect("by_ip: an IPv4-mapped address is its IPv4 address", by_ip(),
           req("::ffff:203.0.113.7"), "ip:203.0.113.7")
    a = by_ip(24, 64)(req("::ffff:203.0.113.7"))
    b = by_ip(24, 64)(req("::ffff:198.51.100.9"))
    check("by_ip(24, 64): IPv4-mapped clients of two networks keep two keys, each its /24",
          (a, b) == ("ip:203.0.113.0/24", "ip:198.51.100.0/24"), f"{a} {b}")
    expect("by_ip: no address, no key", by_ip(), req("not-an-address"), None)
    proxied = by_ip(trusted_proxies=["10.0.0.0/8"])
    xff = {"x-forwarded-for": "203.0.113.5, 198.51.100.9, 10.0.0.1"}
    expect("trusted proxies: the rightmost X-Forwarded-For entry not a proxy", proxied,
           req("10.0.0.2", xff), "ip:198.51.100.9")
    expect("trusted proxies: a peer that is not one of them is the client", proxied,
           req("203.0.113.7", xff), "ip:203.0.113.7")
    expect("trusted proxies: an IPv4-mapped peer in an IPv4 network is trusted", proxied,
           req("::ffff:10.0.0.2", xff), "ip:198.51.100.9")


def other_keys():
    expect("by_header: the header's value", by_header("X-User"),
           req(headers={"x-user": "dave"}), "header:x-user:dave")
    expect("by_header: no header, no key", by_header("X-User"), req(), None)
    expect("by_route: the method and the pattern", by_route(),
           req(route="/users/<id>"), "route:GET /users/<id>")
    expect("by_route: the path when no pattern", by_route(), req(), "route:GET /users/7")
    expect("by_user: the framework's user", by_user(), req(user=42), "user:42")
    expect("by_user: anonymous, no key", by_user(), req(), None)
    expect("by_user(get): a function of the framework's request", by_user(lambda r: r["who"]),
           req(raw={"who": "dave"}), "user:dave")


if __name__ == "__main__":
    ip_keys()
    other_keys()
    harness.finish()
