"""The asyncio client of sluiced, on redis.asyncio: the same calls as sluice.Client, awaited.

One client per event loop: its over-limit cache is not locked (it is only touched between
awaits, on the loop's thread).
"""

import contextlib

import redis
import redis.asyncio

from . import _core
from .cache import DEFAULT_SIZE
from .client import make_pool
from .decision import parse_decision
from .errors import ProtocolError, UnreachableError

_UNREACHABLE = (redis.ConnectionError, redis.TimeoutError, OSError)


class AsyncClient:
    """sluice.Client's options and calls, for asyncio (see sluice.Client)."""

    def __init__(self, host="127.0.0.1", port=6390, *, password=None, username=None,
                 timeout_ms=500, tls=False,
                 tls_ca=None, tls_check_hostname=True, max_connections=None,
                 cache_size=DEFAULT_SIZE, on_unreachable="raise",
                 backoff_base_ms=_core.BACKOFF_BASE_MS, backoff_cap_ms=_core.BACKOFF_CAP_MS,
                 clock_ns=None, seed=None, connection=None):
        self._core = _core.Core(cache_size, on_unreachable, clock_ns, seed, backoff_base_ms,
                                backoff_cap_ms)
        self.redis = connection or redis.asyncio.Redis(connection_pool=make_pool(
            redis.asyncio, host, port, (username, password), timeout_ms, tls, tls_ca,
            tls_check_hostname, max_connections))

    @property
    def cache_hits(self):
        """Calls answered by the over-limit cache since the client was made."""
        return self._core.cache.hits

    async def close(self):
        """Closes the pool's connections."""
        await self.redis.close()
        await self.redis.connection_pool.disconnect()

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        await self.close()

    async def _send(self, args):
        try:
            return await self.redis.execute_command(*args)
        except (redis.ResponseError, redis.AuthenticationError) as e:
            # a wrong password is sluiced's refusal, not sluiced unreachable: never failed open
            raise _core.server_error(e) from None
        except _UNREACHABLE as e:
            raise _core.unreachable_error(e) from e

    async def _uncached(self, args, with_hold=False):
        """The Decision of a call the over-limit cache stays out of."""
        try:
            reply = await self._send(args)
        except UnreachableError as e:
            return self._core.unreachable(e)
        self._core.failures = 0
        return parse_decision(reply, with_hold=with_hold)

    async def allow(self, rule, key, cost=1, *, priority=None):
        """SL.ALLOW (see sluice.Client.allow: priority keeps the cache out)."""
        args = _core.allow_args(rule, key, cost, priority)
        if priority is not None:
            return await self._uncached(args)
        hit, asked = self._core.cached(rule, key, cost)
        if hit is not None:
            return hit
        try:
            reply = await self._send(args)
        except UnreachableError as e:
            return self._core.unreachable(e)
        return self._core.answered(rule, key, cost, reply, asked)

    async def peek(self, rule, key, *, priority=None):
        """SL.PEEK (see sluice.Client.peek)."""
        args = _core.peek_args(rule, key, priority)
        if priority is not None:
            return await self._uncached(args)
        try:
            reply = await self._send(args)
        except UnreachableError as e:
            return self._core.unreachable(e)
        self._core.failures = 0
        d = parse_decision(reply)
        self._core.cache.record(rule, key, 0, d, self._core.clock_ns())
        return d

    async def settle(self, rule, key, reserved, actual, at_ms=None):
        """SL.SETTLE (see sluice.Client.settle)."""
        args = _core.settle_args(rule, key, reserved, actual, at_ms)
        if actual < reserved:
            self._core.cache.forget(rule, key)
        try:
            reply = await self._send(args)
        except UnreachableError as e:
            return self._core.unreachable(e)
        self._core.failures = 0
        if actual < reserved:
            self._core.cache.forget(rule, key)
        return parse_decision(reply)

    async def reset(self, rule, key):
        """SL.RESET (see sluice.Client.reset)."""
        self._core.cache.forget(rule, key)
        reply = await self._send(("SL.RESET", rule, key))
        if reply not in (b"OK", "OK", True):
            raise ProtocolError(f"SL.RESET answered {reply!r:.100}")

    async def acquire(self, rule, key, cost=1, timeout_ms=None, *, priority=None):
        """SL.ACQUIRE (see sluice.Client.acquire)."""
        args = _core.acquire_args(rule, key, cost, timeout_ms, priority)
        return await self._uncached(args, True)

    async def release(self, rule, key, hold_id, *, latency_ms=None, dropped=False):
        """SL.RELEASE (see sluice.Client.release: latency_ms and dropped report to an adaptive
        limit): forgets the key's cached denial."""
        args = _core.release_args(rule, key, hold_id, latency_ms, dropped)
        self._core.cache.forget(rule, key)
        reply = await self._send(args)
        if reply not in (b"OK", "OK", True):
            raise ProtocolError(f"SL.RELEASE answered {reply!r:.100}")

    @contextlib.asynccontextmanager
    async def hold(self, rule, key, cost=1, timeout_ms=None, *, priority=None):
        """Acquires on entry, releases on exit (see sluice.Client.hold)."""
        d = await self.acquire(rule, key, cost, timeout_ms, priority=priority)
        try:
            yield d
        finally:
            if d.hold_id:
                await self.release(rule, key, d.hold_id)

    async def allow_many(self, requests):
        """One pipeline of (rule, key, cost) requests (see sluice.Client.allow_many)."""
        out, sent = [None] * len(requests), []
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
            replies = await pipe.execute(raise_on_error=False)
        except _UNREACHABLE as e:
            fallback = self._core.unreachable(_core.unreachable_error(e))
            return [d if d is not None else fallback for d in out]
        for (i, _, asked), reply in zip(sent, replies):
            rule, key, cost, priority = _core.many_request(requests[i])
            out[i] = (_core.server_error(reply) if isinstance(reply, redis.ResponseError)
                      else self._core.answered(rule, key, cost, reply, asked, priority))
        return out

    async def command(self, *args):
        """Any other command, its reply as redis.asyncio gives it."""
        return await self._send(args)
