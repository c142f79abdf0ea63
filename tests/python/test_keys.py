"""The middleware's key functions on requests made here (no server): every vector of
tests/sdk/keys.json (the keys the Node and Go packages make of the same requests: by_ip with
prefixes for IPv4, IPv6 and IPv4-mapped addresses, trusted proxies with X-Forwarded-For,
by_header, by_route, by_user, with_prefix), then what the vectors do not say: by_user() without
a function, and the frameworks' requests (ASGI's repeated fields).

SLUICE_KEYS_JSON: the path of keys.json.
"""

import json
import os

import pytest

from sluice.middleware import Request, by_header, by_ip, by_route, by_user, with_prefix
from sluice.middleware.asgi import request_from_scope

with open(os.environ["SLUICE_KEYS_JSON"]) as f:
    VECTORS = json.load(f)


def req(ip="203.0.113.7", headers=None, method="GET", path="/users/7", route="", user=None,
        raw=None):
    return Request(method, path, headers or {}, ip, route=route, user=user, raw=raw)


def prefixed(v, key):
    return with_prefix(v["prefix"], key) if "prefix" in v else key


def vectors(kind):
    return pytest.mark.parametrize("v", VECTORS[kind], ids=lambda v: json.dumps(v))


def test_every_kind_has_vectors():
    for kind in ("ip", "ip_refused", "header", "route", "user", "trusted_proxies"):
        assert len(VECTORS[kind]) >= 4, kind


@vectors("ip")
def test_ip(v):
    key = prefixed(v, by_ip(v.get("v4"), v.get("v6")))
    assert key(req(v["ip"])) == v["key"]


@vectors("ip_refused")
def test_ip_refused(v):
    with pytest.raises(ValueError):
        by_ip(v.get("v4"), v.get("v6"))


@vectors("header")
def test_header(v):
    assert prefixed(v, by_header(v["name"]))(req(headers=v["headers"])) == v["key"]


@vectors("route")
def test_route(v):
    r = req(method=v["method"], path=v["path"], route=v.get("route", ""))
    assert prefixed(v, by_route())(r) == v["key"]


@vectors("user")
def test_user(v):
    assert prefixed(v, by_user(lambda raw: v["user"]))(req()) == v["key"]


@vectors("trusted_proxies")
def test_trusted_proxies(v):
    key = prefixed(v, by_ip(v.get("v4"), v.get("v6"), trusted_proxies=v["trusted"]))
    headers = {"x-forwarded-for": v["x_forwarded_for"]} if "x_forwarded_for" in v else {}
    assert key(req(v["peer"], headers)) == v["key"]


def test_by_user_reads_the_frameworks_user_as_text():
    assert by_user()(req(user=42)) == "42"
    assert by_user()(req()) is None  # anonymous: no key


def test_ipv4_clients_of_a_dual_stack_server_keep_a_key_per_network():
    key = by_ip(24, 64)
    assert key(req("::ffff:203.0.113.7")) == "203.0.113.0/24"
    assert key(req("::ffff:198.51.100.9")) == "198.51.100.0/24"


def test_asgi_joins_repeated_fields_and_trusted_proxies_read_them_all():
    scope = {"type": "http", "method": "GET", "path": "/x", "client": ("10.0.0.2", 4711),
             "headers": [(b"X-Forwarded-For", b"198.51.100.9"), (b"x-forwarded-for", b"10.0.0.1"),
                         (b"x-user", b"dave")]}
    r = request_from_scope(scope)
    assert r.headers["x-forwarded-for"] == "198.51.100.9, 10.0.0.1"
    assert by_ip(trusted_proxies=["10.0.0.0/8"])(r) == "198.51.100.9"
