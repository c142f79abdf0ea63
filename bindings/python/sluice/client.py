"""The blocking client of sluiced, on redis-py (pooled connections, timeouts, TLS, pipelines).

Thread-safe: redis-py's pool hands each thread a connection of its own; the over-limit cache is
guarded by one lock (each of its calls does at most 8 steps).
"""

import contextlib
import threading

import redis

from . import _core
from .cache import DEFAULT_SIZE
from .decision import parse_decision
from .errors import ProtocolError, UnreachableError

_UNREACHABLE = (redis.ConnectionError, redis.TimeoutError)


def make_pool(mod, host, port, credentials, timeout_ms, tls, tls_ca, tls_check_hostname,
              max_connections):
    """A connection pool of redis-py's module `mod` (redis or redis.asyncio) to sluiced;
    credentials: (username, password), either None. With max_connections, a caller finding
    every connection busy waits for one (up to timeout_ms)."""
    seconds = timeout_ms / 1000 if timeout_ms else None
    username, password = credentials
    opts = dict(host=host, port=port, username=username, password=password,
                socket_timeout=seconds, socket_connect_timeout=seconds)
    if tls:
        opts.update(connection_class=mod.SSLConnection, ssl_ca_certs=tls_ca,
                    ssl_cert_reqs="required" if tls_ca else "none",
                    ssl_check_hostname=bool(tls_check_hostname and tls_ca))
    if max_connections:
        return mod.BlockingConnectionPool(max_connections=max_connections, timeout=seconds, **opts)
    return mod.ConnectionPool(**opts)


class Client:
    """A client of sluiced's RESP port.

    host, port, password: where sluiced listens and its --requirepass; username "admin" and the
    --admin-password for a client that changes rules (SL.RULE, SL.RESET). timeout_ms bounds the
    connect and each command (0: none); a failed command is never sent again. tls: connect with TLS
    (tls_ca: the CA file that signed sluiced's certificate; without it the certificate is not
    checked). max_connections: the pool's bound. cache_size: entries of the over-limit cache (0:
    off). on_unreachable: "raise" (UnreachableError), "allow" (admit, fallback=True) or "deny"
    (refuse with a backoff as retry_after_ms, fallback=True). backoff_base_ms, backoff_cap_ms: that
    backoff, full jitter in [0, min(cap, base * 2^n)] ms at the n-th failure in a row, from 0
    (default 50 and 2000, as in every sluice package). clock_ns: the monotonic clock the cache
    reads (tests substitute one). seed: the backoff's generator (default random). connection: a
    redis.Redis of your own instead."""

    def __init__(self, host="127.0.0.1", port=6390, *, password=None, username=None,
                 timeout_ms=500, tls=False,
                 tls_ca=None, tls_check_hostname=True, max_connections=None,
                 cache_size=DEFAULT_SIZE, on_unreachable="raise",
                 backoff_base_ms=_core.BACKOFF_BASE_MS, backoff_cap_ms=_core.BACKOFF_CAP_MS,
                 clock_ns=None, seed=None, connection=None):
        self._core = _core.Core(cache_size, on_unreachable, clock_ns, seed, backoff_base_ms,
                                backoff_cap_ms)
        self._lock = threading.Lock()
        self.redis = connection or redis.Redis(connection_pool=make_pool(
            redis, host, port, (username, password), timeout_ms, tls, tls_ca, tls_check_hostname,
            max_connections))

    @property
    def cache_hits(self):
        """Calls answered by the over-limit cache since the client was made."""
        return self._core.cache.hits

    def close(self):
        """Closes the pool's connections."""
        self.redis.close()
        self.redis.connection_pool.disconnect()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _send(self, args):
        try:
            return self.redis.execute_command(*args)
        except (redis.ResponseError, redis.AuthenticationError) as e:
            # a wrong password is sluiced's refusal, not sluiced unreachable: never failed open
            raise _core.server_error(e) from None
        except _UNREACHABLE as e:
            raise _core.unreachable_error(e) from e

    def _uncached(self, args, with_hold=False):
        """The Decision of a call the over-limit cache stays out of."""
        try:
            reply = self._send(args)
        except UnreachableError as e:
            return self._core.unreachable(e)
        self._core.failures = 0
        return parse_decision(reply, with_hold=with_hold)

    def allow(self, rule, key, cost=1, *, priority=None):
        """SL.ALLOW: decides a request of cost units (0 peeks). A repeated denial of the same cost
        is answered from the over-limit cache. priority: one of the rule's priorities (PRIORITY
        p; None: the rule's lowest); the decision is then that priority's view, and the cache
        neither answers it nor keeps its refusal (a refusal of one priority says nothing of
        another). A priority the rule lacks is sluiced's ServerError."""
        args = _core.allow_args(rule, key, cost, priority)
        if priority is not None:
            return self._uncached(args)
        with self._lock:
            hit, asked = self._core.cached(rule, key, cost)
        if hit is not None:
            return hit
        try:
            reply = self._send(args)
        except UnreachableError as e:
            return self._core.unreachable(e)
        with self._lock:
            return self._core.answered(rule, key, cost, reply, asked)

    def peek(self, rule, key, *, priority=None):
        """SL.PEEK: the key's decision, charging nothing; never cached. priority: that priority's
        view (as allow's)."""
        args = _core.peek_args(rule, key, priority)
        if priority is not None:
            return self._uncached(args)
        try:
            reply = self._send(args)
        except UnreachableError as e:
            return self._core.unreachable(e)
        self._core.failures = 0
        with self._lock:
            d = parse_decision(reply)
            self._core.cache.record(rule, key, 0, d, self._core.clock_ns())
        return d

    def settle(self, rule, key, reserved, actual, at_ms=None):
        """SL.SETTLE: a reservation of `reserved` units cost `actual`; the key's decision after.
        Giving units back forgets the cached denial."""
        args = _core.settle_args(rule, key, reserved, actual, at_ms)
        if actual < reserved:
            with self._lock:
                self._core.cache.forget(rule, key)
        try:
            reply = self._send(args)
        except UnreachableError as e:
            return self._core.unreachable(e)
        self._core.failures = 0
        if actual < reserved:
            with self._lock:
                self._core.cache.forget(rule, key)
        return parse_decision(reply)

    def reset(self, rule, key):
        """SL.RESET: the key starts fresh, here and in the cache."""
        with self._lock:
            self._core.cache.forget(rule, key)
        reply = self._send(("SL.RESET", rule, key))
        if reply not in (b"OK", "OK", True):
            raise ProtocolError(f"SL.RESET answered {reply!r:.100}")

    def acquire(self, rule, key, cost=1, timeout_ms=None, *, priority=None):
        """SL.ACQUIRE on an in-flight rule: a Decision whose hold_id names the hold to release
        (0: none made). Never cached. priority: one of the rule's priorities (PRIORITY p), as
        allow's."""
        return self._uncached(_core.acquire_args(rule, key, cost, timeout_ms, priority), True)

    def release(self, rule, key, hold_id, *, latency_ms=None, dropped=False):
        """SL.RELEASE: frees the hold at once. ServerError "no such hold" when the key holds no
        live hold of that id (released before, expired, never made). A release frees units, so it
        forgets the key's cached denial, as the C client does. latency_ms (LATENCY: the hold's
        work's latency in milliseconds, fractions allowed, 0 .. 3600000; ValueError outside,
        nothing sent) and dropped (DROPPED: the work was dropped, timed out or failed for load)
        report to an adaptive limit; a fixed limit ignores them."""
        args = _core.release_args(rule, key, hold_id, latency_ms, dropped)
        with self._lock:
            self._core.cache.forget(rule, key)
        reply = self._send(args)
        if reply not in (b"OK", "OK", True):
            raise ProtocolError(f"SL.RELEASE answered {reply!r:.100}")

    @contextlib.contextmanager
    def hold(self, rule, key, cost=1, timeout_ms=None, *, priority=None):
        """Acquires on entry and releases on exit (also when the block raises); yields the
        Decision, which the block checks (a refused acquire holds nothing to release)."""
        d = self.acquire(rule, key, cost, timeout_ms, priority=priority)
        try:
            yield d
        finally:
            if d.hold_id:
                self.release(rule, key, d.hold_id)

    def allow_many(self, requests):
        """Sends (rule, key, cost) requests, or (rule, key, cost, priority), in one pipeline (one
        round trip, not all or nothing: each is decided on its own). Returns, in order, a Decision or the ServerError of each;
        cached denials are answered without being sent."""
        out, sent = [None] * len(requests), []
        with self._lock:
            for i, req in enumerate(requests):
                rule, key, cost, priority = _core.many_request(req)
                args = _core.allow_args(rule, key, cost, priority)
                out[i], asked = self._core.cached(rule, key, cost, priority)
                if out[i] is None:
                    sent.append((i, args, asked))
        if not sent:
            return out
        pipe = self.redis.pipeline(transaction=False)
        for _, args, _ in sent:
            pipe.execute_command(*args)
        try:
            replies = pipe.execute(raise_on_error=False)
        except _UNREACHABLE as e:
            fallback = self._core.unreachable(_core.unreachable_error(e))
            return [d if d is not None else fallback for d in out]
        with self._lock:
            for (i, _, asked), reply in zip(sent, replies):
                rule, key, cost, priority = _core.many_request(requests[i])
                out[i] = (_core.server_error(reply) if isinstance(reply, redis.ResponseError)
                          else self._core.answered(rule, key, cost, reply, asked, priority))
        return out

    def command(self, *args):
        """Any other command (SL.RULE, SL.OVERRIDE, INFO, ...), its reply as redis-py gives it."""
        return self._send(args)
