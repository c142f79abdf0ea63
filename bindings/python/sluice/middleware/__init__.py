"""What the middleware of every framework shares, with no framework in it: the request as the key
functions see it, the key functions, the rule's facts the headers need, and the answer to give.

The frameworks' own modules: sluice.middleware.asgi (Starlette, FastAPI, any ASGI app),
sluice.middleware.wsgi (Flask, any WSGI app), sluice.middleware.django.
"""

import ipaddress
import json
import logging
import re
import time
from dataclasses import dataclass, field

from ..errors import UnreachableError


log = logging.getLogger("sluice")

RULE_INFO_TTL_S = 10  # how long the facts of a rule (algorithm, window) are kept between reads
RULE_INFO_RETRY_S = 1  # after sluiced refused a read (NOPERM), how long until the next is tried
WARN_EVERY_S = 10  # a failure to read a rule, or to release a hold, is logged once in this long
LATENCY_MAX_MS = 3_600_000  # the most a release reports (1h): a longer request reports that


@dataclass
class Request:
    """A request as key functions see it. headers: names in lower case (one value each, repeated
    fields joined with ", "); client_ip: the peer's
    address (or, behind trusted proxies, see by_ip); route: the route's pattern when the
    framework gives one (Django's ResolverMatch.route "users/<int:id>", middleware class and
    decorator; Flask's URL rule "/users/<int:id>" when the WSGI middleware wraps app.wsgi_app),
    else the path (ASGI, any other WSGI app, a path no route matches); user: the
    framework's user id when it has one; raw: the framework's own request (scope, environ,
    HttpRequest)."""

    method: str
    path: str
    headers: dict
    client_ip: str
    route: str = ""
    user: object = None
    raw: object = None


# ---- keys ---------------------------------------------------------------------------------
#
# The keys are the Node and Go packages' (tests/sdk/keys.json holds the vectors all three run):
# bare values, "203.0.113.0/24", "dave", "/users/{id}", so services in different languages that
# share a rule count one client under one key. with_prefix() puts a kind before them.

def _client_ip(req, trusted):
    ip = req.client_ip
    if not trusted or not _in(ip, trusted):
        return ip
    # behind our own proxies: the rightmost X-Forwarded-For entry that is not one of them
    # (entries to its left were written by the client and are never believed); the leftmost
    # when all are (Express's "trust proxy" does the same)
    hops = [h.strip(" ") for h in req.headers.get("x-forwarded-for", "").split(",")]
    hops = [h for h in hops if h]
    for hop in reversed(hops[1:]):
        if not _in(hop, trusted):
            return hop
    return hops[0] if hops else ip


def _address(text):
    """The address text names, an IPv4-mapped IPv6 address (::ffff:a.b.c.d: how a dual-stack
    server sees an IPv4 client) as its IPv4 address; None when text is not an address."""
    try:
        a = ipaddress.ip_address(text)
    except ValueError:
        return None
    return (a.ipv4_mapped if a.version == 6 else None) or a


def _in(ip, nets):
    a = _address(ip)
    return a is not None and any(a in n for n in nets)


def _bits(name, v, most):
    if v is None:
        return most
    if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= most:
        raise ValueError(f"{name} must be an integer from 0 to {most}, or None")
    return v


def _network(a, bits):
    """a's network of prefix length bits, as "<address>/<bits>", IPv6 groups written in full
    ("2001:db8:0:0:0:0:0:0/64", as the Node package writes them)."""
    n = int(a) >> (a.max_prefixlen - bits) << (a.max_prefixlen - bits) if bits else 0
    if a.version == 4:
        return f"{ipaddress.IPv4Address(n)}/{bits}"
    return ":".join(f"{(n >> s) & 0xffff:x}" for s in range(112, -1, -16)) + f"/{bits}"


def by_ip(prefix=None, prefix6=None, trusted_proxies=()):
    """The client's address ("203.0.113.7", "2001:db8::1"), or its network with a prefix
    length: by_ip(24) counts 203.0.113.0/24 as one client ("203.0.113.0/24"), prefix6 does the
    same for IPv6 (by_ip(24, 64): "2001:db8:0:0:0:0:0:0/64"); None (32, 128) keeps the whole
    address. An IPv4-mapped address (::ffff:a.b.c.d, an IPv4 client of a dual-stack server) is
    keyed as its IPv4 address. trusted_proxies: networks of your own proxies; a request from one
    is keyed by the rightmost X-Forwarded-For address that is not one of them."""
    bits4, bits6 = _bits("prefix", prefix, 32), _bits("prefix6", prefix6, 128)
    nets = [ipaddress.ip_network(n) for n in trusted_proxies]

    def key(req):
        text = _client_ip(req, nets)
        a = _address(text)
        if a is None:
            return None
        bits = bits4 if a.version == 4 else bits6
        if bits == a.max_prefixlen:  # the address, as the framework wrote it
            return str(a) if a.version == 4 and ":" in text else text
        return _network(a, bits)

    return key


def by_header(name):
    """The value of header `name` (its name in any case); a request without it, or with it
    empty, has no key."""
    name = name.lower()

    def key(req):
        v = req.headers.get(name)
        return None if v is None or v == "" else v

    return key


def by_route():
    """The route: its pattern when the framework gives one (see Request.route), else the path
    (the method is not in the key)."""
    return lambda req: req.route or req.path


def by_user(get=None):
    """The user: get(raw request) when given, else the framework's user id, as text; an
    anonymous request (None or "") has no key."""

    def key(req):
        u = get(req.raw) if get else req.user
        return None if u is None or u == "" else str(u)

    return key


def with_prefix(prefix, key):
    """key's keys with prefix put before them (with_prefix("user:", by_user())), so that keys of
    several kinds under one rule stay apart; a request without a key from key has none."""

    def prefixed(req):
        k = key(req)
        return None if k is None else prefix + k

    return prefixed


# ---- the rule's facts ---------------------------------------------------------------------

_DURATION = re.compile(r"(\d+)(ns|us|ms|s|m|h|d)")
_UNIT_NS = {"ns": 1, "us": 10**3, "ms": 10**6, "s": 10**9, "m": 60 * 10**9, "h": 3600 * 10**9,
            "d": 86400 * 10**9}


def duration_ns(text):
    """A duration as rules write it ("1h30m", "250ms") in ns; ValueError when malformed."""
    if not isinstance(text, str) or not text or _DURATION.sub("", text):
        raise ValueError(f"not a duration: {text!r}")
    return sum(int(n) * _UNIT_NS[u] for n, u in _DURATION.findall(text))


@dataclass
class RuleInfo:
    algorithm: str
    window_s: int  # rounded up, as sluiced writes it in RateLimit-Policy


def parse_rule_info(reply):
    """The facts of SL.RULE GET's JSON reply."""
    j = json.loads(reply)
    return RuleInfo(j["algorithm"], -(-duration_ns(j["window"]) // 10**9))


# ---- the answer ---------------------------------------------------------------------------

def sf_string(s):
    """s as a structured-field string, as sluiced writes the policy name."""
    out = "".join("\\" + c if c in '"\\' else c if " " <= c <= "~" else "?" for c in s)
    return f'"{out}"'


def ceil_s(ms):
    return -(-ms // 1000)


def _clamp(n):
    return min(max(n, 0), 999_999_999_999_999)


@dataclass
class Outcome:
    """What the middleware does: let the request through with `headers` added to its response
    (and release hold_id when the response ends), or answer it with status, headers and body.
    started: time.monotonic() when the middleware got the request (a report's latency)."""

    allowed: bool
    headers: list = field(default_factory=list)
    status: int = 200
    body: bytes = b""
    hold_id: int = 0
    key: str = ""
    decision: object = None
    started: float = 0.0


def problem(status, title, detail, headers=()):
    body = json.dumps({"type": "about:blank", "title": title, "status": status, "detail": detail},
                      separators=(",", ":")).encode()
    return Outcome(False, list(headers) + [("Content-Type", "application/problem+json")],
                   status, body)


class RateLimit:
    """One rule applied to requests: rule (its name in sluiced), key (a function of the
    Request: by_ip(), by_header(name), by_route(), by_user(), or your own returning a string,
    None when the request lacks what it needs: a 400), cost (units per request, or a function of
    the Request), shadow (never refuse: a request over the limit goes through, logged and counted
    in shadow_refusals), timeout_ms (an in-flight rule's hold: at most the rule's hold_timeout),
    match (a function of the Request: only requests it is true for are limited), max_key_bytes
    (a longer key is a 400, never sent: sluiced refuses keys past its --max-key-length, 1024).
    priority: the request's priority under a rule with `priorities` (PRIORITY p), a string or a
    function of the Request returning one or None (the rule's lowest); a priority the rule lacks
    is sluiced's ServerError, which the middleware does not catch (the framework's 500).
    report: an in-flight rule's release reports the request's latency (from the middleware
    getting it to its response's end, in ms) and DROPPED when the handler raised, the response
    was a 5xx or the client went away before it ended, for an adaptive limit (`adaptive: aimd`
    or `vegas`). Off by default: a 5xx or a client that gives up is not always load, and a
    sluiced older than LATENCY refuses such a release (the hold then lives to its timeout).

    client: a sluice.Client for WSGI and Django, a sluice.AsyncClient for ASGI. The rule's
    algorithm (an in-flight rule, algorithm concurrency, acquires and releases) and window (for
    RateLimit-Policy) are read from sluiced with SL.RULE GET and kept RULE_INFO_TTL_S seconds,
    unless given as algorithm and window ("1m"); give them when sluiced has --admin-password
    (only admin may read rules there) and the client is not admin: while sluiced refuses to
    tell, requests are decided with SL.ALLOW, which on an in-flight rule takes a unit no release
    gives back. What happens when sluiced cannot be reached is the client's on_unreachable; a
    request that finds sluiced unreachable before the rule's algorithm was ever read is decided
    by on_unreachable too (not sent as SL.ALLOW), and the next request reads the rule again."""

    def __init__(self, client, rule, key=None, cost=1, shadow=False, timeout_ms=None, match=None,
                 max_key_bytes=1024, algorithm=None, window=None, priority=None, report=False):
        self.client, self.rule, self.max_key_bytes = client, rule, max_key_bytes
        self.priority, self.report = priority, report
        self.key = key or by_ip()
        self.cost, self.shadow, self.timeout_ms, self.match = cost, shadow, timeout_ms, match
        self.shadow_refusals = 0  # requests shadow mode let through over the limit
        self.release_failures = 0  # holds whose release failed (they expire by themselves)
        self._info, self._info_until, self._warned_at = None, 0.0, -WARN_EVERY_S
        if (algorithm is None) != (window is None):
            raise ValueError("give both algorithm and window, or neither")
        if algorithm is not None:  # the rule's facts given: never read from sluiced
            self._info = RuleInfo(algorithm, -(-duration_ns(window) // 10**9))
            self._info_until = float("inf")

    def applies(self, req):
        return self.match is None or self.match(req)

    def _key_of(self, req):
        """The request's key, or the 400 Outcome when it has none or one too long."""
        key = self.key(req)
        if key is None:
            return None, problem(400, "Bad Request",
                                 f"rule '{self.rule}': the request lacks what its key needs")
        if len(key.encode("utf-8", "surrogateescape")) > self.max_key_bytes:
            return None, problem(400, "Bad Request", f"rule '{self.rule}': the request's key "
                                 f"is longer than {self.max_key_bytes} bytes")
        return key, None

    def _cost(self, req):
        return self.cost(req) if callable(self.cost) else self.cost

    def _priority(self, req):
        return self.priority(req) if callable(self.priority) else self.priority

    def _info_fresh(self):
        """True while the rule's facts need no reading: kept RULE_INFO_TTL_S, and after sluiced
        refused a read none is tried for RULE_INFO_RETRY_S. After a read that could not reach
        sluiced the next request reads again (sluiced down still costs one call a request: see
        _unknown)."""
        return time.monotonic() < self._info_until

    def _set_info(self, reply):
        self._info, self._info_until = parse_rule_info(reply), time.monotonic() + RULE_INFO_TTL_S

    def _info_failed(self, e):
        """A read of the rule failed with e: sluiced's refusal holds off the next read; sluiced
        unreachable does not (the next request asks again)."""
        if not isinstance(e, UnreachableError):
            self._info_until = time.monotonic() + RULE_INFO_RETRY_S
        now = time.monotonic()
        if now >= self._warned_at + WARN_EVERY_S:  # logged at a limited rate
            self._warned_at = now
            log.warning("sluice: rule %r: cannot read it from sluiced: %s", self.rule, e)

    def check(self, req):
        """The Outcome for req (blocking: a sluice.Client)."""
        started = time.monotonic()
        key, refusal = self._key_of(req)
        if refusal is not None:
            return refusal
        failed = None
        if not self._info_fresh():
            failed = self._fetch_info(lambda: self.client.command("SL.RULE", "GET", self.rule))
        cost, priority = self._cost(req), self._priority(req)
        if self._unknown(failed):
            d = self.client._core.unreachable(failed)
        elif self._info is not None and self._info.algorithm == "concurrency":
            d = self.client.acquire(self.rule, key, cost, self.timeout_ms, priority=priority)
        else:
            d = self.client.allow(self.rule, key, cost, priority=priority)
        out = self.outcome(key, d)
        out.started = started
        return out

    async def acheck(self, req):
        """The Outcome for req (asyncio: a sluice.AsyncClient)."""
        started = time.monotonic()
        key, refusal = self._key_of(req)
        if refusal is not None:
            return refusal
        failed = None
        if not self._info_fresh():
            try:
                self._set_info(await self.client.command("SL.RULE", "GET", self.rule))
            except Exception as e:  # unreachable, or not allowed: decide without them
                self._info_failed(e)
                failed = e
        cost, priority = self._cost(req), self._priority(req)
        if self._unknown(failed):
            d = self.client._core.unreachable(failed)
        elif self._info is not None and self._info.algorithm == "concurrency":
            d = await self.client.acquire(self.rule, key, cost, self.timeout_ms, priority=priority)
        else:
            d = await self.client.allow(self.rule, key, cost, priority=priority)
        out = self.outcome(key, d)
        out.started = started
        return out

    def _fetch_info(self, get):
        """Reads the rule's facts with get(); the exception when that failed, else None."""
        try:
            self._set_info(get())
        except Exception as e:  # unreachable, or not allowed: decide without them
            self._info_failed(e)
            return e
        return None

    def _unknown(self, failed):
        """True when the rule's algorithm was never read and reading it just found sluiced
        unreachable (failed): the request is then decided by the client's on_unreachable, as
        its decision would be, never by an SL.ALLOW that, should sluiced be back by then, would
        take a unit of an in-flight rule that no release gives back."""
        return self._info is None and isinstance(failed, UnreachableError)

    def outcome(self, key, d):
        """The Outcome of decision d for key: headers as sluiced's HTTP API sets them."""
        headers = []
        if self._info is not None and not d.fallback:
            p = sf_string(self.rule)
            headers += [("RateLimit-Policy", f"{p};q={_clamp(d.limit)};w={_clamp(self._info.window_s)}"),
                        ("RateLimit", f"{p};r={_clamp(d.remaining)};t={_clamp(ceil_s(d.reset_after_ms))}")]
        if d.allowed:
            return Outcome(True, headers, hold_id=d.hold_id, key=key, decision=d)
        if self.shadow:
            self.shadow_refusals += 1
            log.debug("sluice: shadow: rule %r would refuse key %r", self.rule, key)
            return Outcome(True, headers, key=key, decision=d)
        if d.retry_after_ms >= 0:
            headers.append(("Retry-After", str(ceil_s(d.retry_after_ms))))
        if d.fallback:
            detail = f"rule '{self.rule}': the rate limiter cannot be reached, and refuses"
        elif self._info is not None:
            detail = f"rule '{self.rule}' allows {d.limit} per {self._info.window_s}s"
        else:
            detail = f"rule '{self.rule}' allows {d.limit}"
        out = problem(429, "Too Many Requests", detail, headers)
        out.key, out.decision = key, d
        return out

    def _report(self, outcome, dropped):
        """release()'s report of the request: none unless self.report."""
        if not self.report:
            return {}
        ms = min(max(time.monotonic() - outcome.started, 0.0) * 1000, LATENCY_MAX_MS)
        return {"latency_ms": ms, "dropped": bool(dropped)}

    def release(self, outcome, dropped=False):
        """Releases outcome's hold (blocking), with the request's report when self.report
        (dropped: the handler raised, the response was a 5xx or the client went away); a failure
        is logged, never raised."""
        if outcome.hold_id:
            try:
                self.client.release(self.rule, outcome.key, outcome.hold_id,
                                    **self._report(outcome, dropped))
            except Exception as e:
                self._release_failed(e)

    async def arelease(self, outcome, dropped=False):
        """Releases outcome's hold (asyncio), as release(); a failure is logged, never raised."""
        if outcome.hold_id:
            try:
                await self.client.release(self.rule, outcome.key, outcome.hold_id,
                                          **self._report(outcome, dropped))
            except Exception as e:
                self._release_failed(e)

    def _release_failed(self, e):
        """Counted in release_failures, logged at a limited rate; the hold expires by itself at
        the rule's hold_timeout."""
        self.release_failures += 1
        now = time.monotonic()
        if now >= self._warned_at + WARN_EVERY_S:
            self._warned_at = now
            log.warning("sluice: rule %r: a hold could not be released (%d so far): %s",
                        self.rule, self.release_failures, e)
