"""The same small web app in each framework, limited by sluice's middleware, served for real on
127.0.0.1 (a port the kernel picks) in a thread of the test's process:

  /fixed/ok      limited by rule mw-fixed (limit 2 an hour)
  /mshadow/ok    the same rule, with the middleware's shadow mode
  /shadow/ok     rule mw-shadow (a shadow rule in sluiced, limit 1)
  /jobs/ok       rule mw-jobs (in flight, limit 1): answers at once
  /jobs/boom     the handler raises
  /open/ok       rule mw-fixed through a client of a sluiced that is down, failing open
  /closed/ok     the same, failing closed
  /jobs/stream   a streaming body of 64 KiB chunks, 6000 at most (two minutes), one every 20 ms
  /prio/ok       rule mw-prio (in flight, limit 2, high's reserve 1), the priority from X-Priority
  /adapt/...     rule mw-adapt (in flight, adaptive aimd from 2, latency_timeout 10m), the
                 middleware reporting: ok, boom (raises), e500 (answers 500), slow (150 ms), stream
  /adaptslow/... rule mw-adapt-slow (the same, latency_timeout 100ms), the middleware reporting
  /quiet/...     the same rule, the middleware not reporting (the default)
  /kopen/ok      rule mw-kill (limit 1000 an hour) in a sluiced the test kills and starts again
                 (the kill port), through a client failing open
  /kclosed/ok    the same, through a client failing closed
  /kidle/ok      the same rule through a client failing closed that is idle while it is down
  /khold/...     rule mw-khold (in flight, limit 1) in that sluiced, failing open: ok, stream
  /soft/ok       Django only: the decorator with block=False on mw-fixed; the view says what
                 request.limited and request.sluice told it

Every rule is keyed by the X-User header. FRAMEWORKS maps a name to a function of the two
sluiced's RESP ports that starts the app and returns (port, stop); KILLED holds the RateLimits
of the kill port's paths (kopen, kclosed, kidle, khold), for their counters.
"""

import asyncio
import threading
import time

import harness
import sluice
from sluice.middleware import RateLimit, by_header

CHUNK = b"x" * 65536
CHUNKS_MAX = 6000


KILLED = {}


def limits(client, kind, kill_port):
    """The middleware's rules, each for the paths under its prefix. kind makes the clients of
    a sluiced that cannot be reached (a port nothing listens on), failing open and closed, and
    those of the sluiced on kill_port."""

    def under(prefix):
        return lambda req: req.path.startswith(prefix)

    user = by_header("x-user")
    shadowed = RateLimit(client, "mw-fixed", key=user, shadow=True, match=under("/mshadow/"))
    down = harness.refused_port()
    return [RateLimit(client, "mw-fixed", key=user, match=under("/fixed/")), shadowed,
            RateLimit(client, "mw-shadow", key=user, match=under("/shadow/")),
            RateLimit(client, "mw-jobs", key=user, match=under("/jobs/")),
            RateLimit(client, "mw-prio", key=user, match=under("/prio/"),
                      priority=lambda req: req.headers.get("x-priority")),
            RateLimit(client, "mw-adapt", key=user, match=under("/adapt/"), report=True),
            RateLimit(client, "mw-adapt-slow", key=user, match=under("/adaptslow/"), report=True),
            RateLimit(client, "mw-adapt", key=user, match=under("/quiet/")),
            RateLimit(kind(port=down, on_unreachable="allow"), "mw-fixed", key=user,
                      match=under("/open/")),
            RateLimit(kind(port=down, on_unreachable="deny"), "mw-fixed", key=user,
                      match=under("/closed/"))] + killed(kind, kill_port, user, under)


def killed(kind, port, user, under):
    """The limits of the sluiced the test kills: each client keeps a pool of connections to
    it, which the kill leaves dead."""
    fail_open = kind(port=port, on_unreachable="allow", timeout_ms=5000)
    fail_closed = kind(port=port, on_unreachable="deny", timeout_ms=5000)
    KILLED.update(kopen=RateLimit(fail_open, "mw-kill", key=user, match=under("/kopen/")),
                  kclosed=RateLimit(fail_closed, "mw-kill", key=user, match=under("/kclosed/")),
                  kidle=RateLimit(kind(port=port, on_unreachable="deny", timeout_ms=5000),
                                  "mw-kill", key=user, match=under("/kidle/")),
                  khold=RateLimit(fail_open, "mw-khold", key=user, match=under("/khold/")))
    return list(KILLED.values())


SLOW_S = 0.15  # past mw-adapt-slow's latency_timeout of 100ms


def chunks():
    for _ in range(CHUNKS_MAX):
        yield CHUNK
        time.sleep(0.02)


# ---- ASGI: FastAPI under uvicorn ----------------------------------------------------------

def start_asgi(port, kill_port):
    import uvicorn
    from fastapi import FastAPI
    from fastapi.responses import PlainTextResponse, StreamingResponse

    from sluice.middleware.asgi import RateLimitMiddleware

    app = FastAPI()

    @app.get("/{group}/ok")
    async def ok(group: str):
        return PlainTextResponse("ok")

    @app.get("/{group}/boom")
    async def boom(group: str):
        raise RuntimeError("the handler failed")

    @app.get("/{group}/e500")
    async def e500(group: str):
        return PlainTextResponse("failed", status_code=500)

    @app.get("/{group}/slow")
    async def slow(group: str):
        await asyncio.sleep(SLOW_S)
        return PlainTextResponse("ok")

    @app.get("/{group}/stream")
    async def stream(group: str):
        async def body():
            for _ in range(CHUNKS_MAX):
                yield CHUNK
                await asyncio.sleep(0.02)
        return StreamingResponse(body())

    client = sluice.AsyncClient(port=port, timeout_ms=5000)
    for limit in limits(client, sluice.AsyncClient, kill_port):
        app.add_middleware(RateLimitMiddleware, limit=limit)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="critical",
                                           lifespan="off"))
    t = threading.Thread(target=server.run, daemon=True)
    t.start()
    for _ in range(400):
        if server.started:
            break
        time.sleep(0.05)
    bound = server.servers[0].sockets[0].getsockname()[1]

    def stop():
        server.should_exit = True
        t.join(30)

    return bound, stop


# ---- WSGI: Flask, and Django, under werkzeug's server ---------------------------------------

def serve_wsgi(app):
    from werkzeug.serving import make_server

    server = make_server("127.0.0.1", 0, app, threaded=True)
    t = threading.Thread(target=server.serve_forever, daemon=True)
    t.start()

    def stop():
        server.shutdown()
        t.join(30)

    return server.server_port, stop


def start_flask(port, kill_port):
    from flask import Flask, Response

    from sluice.middleware.wsgi import RateLimitMiddleware

    app = Flask("sluice_test")

    @app.get("/<group>/ok")
    def ok(group):
        return "ok"

    @app.get("/<group>/boom")
    def boom(group):
        raise RuntimeError("the handler failed")

    @app.get("/<group>/e500")
    def e500(group):
        return "failed", 500

    @app.get("/<group>/slow")
    def slow(group):
        time.sleep(SLOW_S)
        return "ok"

    @app.get("/<group>/stream")
    def stream(group):
        return Response(chunks())

    client = sluice.Client(port=port, timeout_ms=5000)
    for limit in limits(client, sluice.Client, kill_port):
        app.wsgi_app = RateLimitMiddleware(app.wsgi_app, limit)
    return serve_wsgi(app)


def _django_setup(port, kill_port):
    import sys
    import types

    import django
    from django.conf import settings
    from django.http import HttpResponse, StreamingHttpResponse
    from django.urls import path

    from sluice.middleware.django import ratelimit

    client = sluice.Client(port=port, timeout_ms=5000)
    deco = ratelimit(RateLimit(client, "mw-jobs", key=by_header("x-user")))

    def ok(request, group=""):
        return HttpResponse("ok")

    def boom(request, group=""):
        raise RuntimeError("the handler failed")

    def e500(request, group=""):
        return HttpResponse("failed", status=500)

    def slow(request, group=""):
        time.sleep(SLOW_S)
        return HttpResponse("ok")

    def stream(request, group=""):
        return StreamingHttpResponse(chunks())

    @ratelimit(RateLimit(client, "mw-fixed", key=by_header("x-user")), block=False)
    def soft(request):
        d = request.sluice
        return HttpResponse(f"limited={request.limited} allowed={d.allowed} "
                            f"remaining={d.remaining}", content_type="text/plain")

    urls = types.ModuleType("sluice_test_urls")
    urls.urlpatterns = [path("jobs/ok", ok), path("jobs/boom", boom), path("jobs/stream", stream),
                        path("deco/ok", deco(ok)), path("deco/boom", deco(boom)),
                        path("deco/stream", deco(stream)), path("soft/ok", soft),
                        path("<str:group>/ok", ok),
                        path("<str:group>/boom", boom), path("<str:group>/e500", e500),
                        path("<str:group>/slow", slow), path("<str:group>/stream", stream)]
    sys.modules["sluice_test_urls"] = urls
    settings.configure(DEBUG=False, SECRET_KEY="test", ALLOWED_HOSTS=["127.0.0.1"],
                       ROOT_URLCONF="sluice_test_urls",
                       SLUICE_LIMIT=limits(client, sluice.Client, kill_port),
                       MIDDLEWARE=["sluice.middleware.django.RateLimitMiddleware"],
                       LOGGING_CONFIG=None)
    django.setup()


def start_django(port, kill_port):
    from django.core.wsgi import get_wsgi_application

    _django_setup(port, kill_port)
    return serve_wsgi(get_wsgi_application())


FRAMEWORKS = {"asgi": start_asgi, "flask": start_flask, "django": start_django}
