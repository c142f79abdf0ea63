"""ASGI middleware (Starlette, FastAPI, any ASGI app) over a sluice.AsyncClient.

    app.add_middleware(RateLimitMiddleware, limit=RateLimit(AsyncClient(...), "api"))

An in-flight rule's hold is released once, at the first of: the response's last body message
sent, the client's disconnect seen by the app (http.disconnect), the app returning or raising.
With the limit's report, it is reported dropped for a disconnect before the response's end, an
app that raised or returned without finishing the response, or a 5xx status.
"""

import asyncio

from . import Request


def request_from_scope(scope):
    headers = {}
    for k, v in scope.get("headers", []):  # a repeated field is one, joined (as WSGI's are)
        name, value = k.decode("latin-1").lower(), v.decode("latin-1")
        headers[name] = f"{headers[name]}, {value}" if name in headers else value
    client = scope.get("client") or ("", 0)
    return Request(method=scope.get("method", ""), path=scope.get("path", ""), headers=headers,
                   client_ip=client[0], route=scope.get("path", ""), raw=scope)


def _encode(headers):
    return [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers]


class RateLimitMiddleware:
    """Limits the app's HTTP requests with `limit` (a sluice.middleware.RateLimit whose client is
    a sluice.AsyncClient); other scopes (websocket, lifespan) pass untouched."""

    def __init__(self, app, limit):
        self.app, self.limit = app, limit

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        req = request_from_scope(scope)
        if not self.limit.applies(req):
            return await self.app(scope, receive, send)
        out = await self.limit.acheck(req)
        if not out.allowed:
            await send({"type": "http.response.start", "status": out.status,
                        "headers": _encode(out.headers)})
            await send({"type": "http.response.body", "body": out.body})
            return
        done, status = False, 0

        async def release(dropped):
            nonlocal done
            if not done:
                done = True
                # shielded: a cancelled request still gives its hold back
                await asyncio.shield(self.limit.arelease(out, dropped))

        async def send_with_headers(msg):
            nonlocal status
            if msg["type"] == "http.response.start":
                status = msg.get("status", 0)
                msg = dict(msg, headers=list(msg.get("headers", [])) + _encode(out.headers))
            await send(msg)
            if msg["type"] == "http.response.body" and not msg.get("more_body", False):
                await release(status >= 500)

        async def receive_watching():
            msg = await receive()
            if msg["type"] == "http.disconnect":
                await release(True)  # before the response's end: the client went away
            return msg

        try:
            await self.app(scope, receive_watching, send_with_headers)
        except BaseException:
            await release(True)
            raise
        await release(True)  # returned without finishing its response
