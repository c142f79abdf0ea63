"""bench/packages/py_bench.py - the Python package sluice beside the `limits` library (what
Flask-Limiter and slowapi use); run by bench/packages/python.sh, which starts the servers.

  serve FW KIND PORT STORE_PORT   an app on 127.0.0.1:PORT, GET /hello: FW flask (werkzeug's
                                  threaded server, as the integration tests serve it) or fastapi
                                  (uvicorn); KIND bare, sluice (the middleware, sluiced at
                                  STORE_PORT, rule "bench") or limits (limits' RedisStorage at
                                  STORE_PORT with a fixed window, called before each request as
                                  Flask-Limiter and slowapi call it); the key is the x-key header
  load PORT N KEYS SEED           N requests one at a time over one keep-alive connection: prints
                                  p50 us, p99 us, req/s, non-200
  inproc N KEYS ROUNDS            sluice.inproc's Table against limits' MemoryStorage
  client N KEYS ROUNDS BATCH SM SR RD   sluice.Client against limits' RedisStorage hit()
"""

import http.client
import logging
import random
import statistics
import sys
import time

LIMIT = 10**9  # far above any run: every decision is an admission that writes its state
LOG_LIMIT = 2**20  # sliding_log's most, and the moving window's: also far above a run


def keys_for(n, keys, seed):
    rnd = random.Random(seed)
    return [f"k{rnd.randrange(keys)}" for _ in range(n)]


def limits_limiter(port, moving=False):
    from limits import RateLimitItemPerHour
    from limits.storage import RedisStorage
    from limits.strategies import FixedWindowRateLimiter, MovingWindowRateLimiter
    storage = RedisStorage(f"redis://127.0.0.1:{port}")
    strat = (MovingWindowRateLimiter if moving else FixedWindowRateLimiter)(storage)
    strat.keep = storage  # a strategy holds its storage by a weak reference
    return strat, RateLimitItemPerHour(LIMIT)


def serve_flask(kind, port, store):
    from flask import Flask, Response, abort, request
    from werkzeug.serving import make_server
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # no access log, in every case
    app = Flask("bench")

    @app.get("/hello")
    def hello():
        return Response("hello\n", mimetype="text/plain")

    if kind == "limits":
        strat, item = limits_limiter(store)

        @app.before_request
        def limit():
            if not strat.hit(item, "bench", request.headers.get("x-key", "")):
                abort(429)
    wsgi = app.wsgi_app
    if kind == "sluice":
        import sluice
        from sluice.middleware import RateLimit, by_header
        from sluice.middleware.wsgi import RateLimitMiddleware
        client = sluice.Client(port=store, timeout_ms=5000)
        wsgi = RateLimitMiddleware(wsgi, RateLimit(client, "bench", key=by_header("x-key"),
                                                   algorithm="fixed_window", window="1h"))
    app.wsgi_app = wsgi
    make_server("127.0.0.1", port, app, threaded=True).serve_forever()


def serve_fastapi(kind, port, store):
    import uvicorn
    from fastapi import FastAPI, Request
    from fastapi.responses import PlainTextResponse
    app = FastAPI()

    @app.get("/hello")
    async def hello():
        return PlainTextResponse("hello\n")

    if kind == "limits":  # slowapi's way: the synchronous storage, called in the event loop
        strat, item = limits_limiter(store)

        @app.middleware("http")
        async def limit(request: Request, call_next):
            if not strat.hit(item, "bench", request.headers.get("x-key", "")):
                return PlainTextResponse("too many\n", status_code=429)
            return await call_next(request)
    if kind == "sluice":
        import sluice
        from sluice.middleware import RateLimit, by_header
        from sluice.middleware.asgi import RateLimitMiddleware
        client = sluice.AsyncClient(port=store, timeout_ms=5000)
        app.add_middleware(RateLimitMiddleware, limit=RateLimit(
            client, "bench", key=by_header("x-key"), algorithm="fixed_window", window="1h"))
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="critical", lifespan="off",
                access_log=False)


def load(port, n, keys, seed):
    ks = keys_for(n, keys, seed)
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    lat, bad = [], 0
    t0 = time.perf_counter()
    for k in ks:
        s = time.perf_counter_ns()
        c.request("GET", "/hello", headers={"x-key": k})
        r = c.getresponse()
        r.read()
        lat.append(time.perf_counter_ns() - s)
        bad += r.status != 200
    wall = time.perf_counter() - t0
    lat.sort()
    print(f"{lat[len(lat) // 2] / 1e3:.1f} {lat[len(lat) * 99 // 100] / 1e3:.1f} {n / wall:.0f} {bad}")


def rounds(cases, nrounds, n):
    """Runs every case once untimed, then nrounds rounds of every case; prints decisions/s
    (median, min, max), CPU per decision and the median of per-round ratios to the first."""
    for _, f in cases:
        f()
    rate = {name: [] for name, _ in cases}
    cpu = {name: [] for name, _ in cases}
    for _ in range(nrounds):
        for name, f in cases:
            w, c = time.perf_counter(), time.process_time()
            f()
            w, c = time.perf_counter() - w, time.process_time() - c
            rate[name].append(n / w)
            cpu[name].append(c / n * 1e6)
    first = cases[0][0]
    print(f"  {'case':<58} {'decisions/s':>12} {'min':>10} {'max':>10} {'CPU us':>8} {'x first':>8}")
    for name, _ in cases:
        r = rate[name]
        ratio = statistics.median(a / b for a, b in zip(r, rate[first]))
        print(f"  {name:<58} {statistics.median(r):12.0f} {min(r):10.0f} {max(r):10.0f} "
              f"{statistics.median(cpu[name]):8.2f} {ratio:8.2f}")


def inproc(n, keys, nrounds):
    from limits import RateLimitItemPerHour
    from limits.storage import MemoryStorage
    from limits.strategies import FixedWindowRateLimiter, MovingWindowRateLimiter
    from sluice.inproc import Rule, Table
    ks = keys_for(n, keys, 7)
    item = RateLimitItemPerHour(LIMIT)
    fixed_store, moving_store = MemoryStorage(), MemoryStorage()  # held: strategies hold weakly
    fixed = FixedWindowRateLimiter(fixed_store)
    moving = MovingWindowRateLimiter(moving_store)
    table = Table(Rule("fixed_window", limit=LIMIT, window="1h"))
    slog = Table(Rule("sliding_log", limit=LOG_LIMIT, window="1h"))

    def run_limits(strat, it=item):
        def f():
            for k in ks:
                strat.hit(it, "bench", k)
        return f

    def run_table(t, now):
        def f():
            tn = time.time_ns
            for k in ks:
                t.decide(k, 1, tn() if now is None else now)
        return f

    cases = [("limits MemoryStorage, FixedWindowRateLimiter.hit", run_limits(fixed)),
             ("sluice.inproc Table(fixed_window).decide(key, 1, time_ns())", run_table(table, None)),
             ("the same, the time read once per round", run_table(table, time.time_ns()))]
    if n * (nrounds + 1) <= 2_000_000:  # a moving window keeps every hit: bounded memory
        cases += [("limits MemoryStorage, MovingWindowRateLimiter.hit", run_limits(moving, RateLimitItemPerHour(LOG_LIMIT))),
                  ("sluice.inproc Table(sliding_log).decide", run_table(slog, None))]
    rounds(cases, nrounds, n)


def client(n, keys, nrounds, batch, sm, sr, rd):
    import sluice
    ks = keys_for(n, keys, 11)
    strat, item = limits_limiter(rd)
    mstrat, _ = limits_limiter(rd, moving=True)
    cm = sluice.Client(port=sm, timeout_ms=5000, max_connections=1)
    cr = sluice.Client(port=sr, timeout_ms=5000, max_connections=1)

    def one(c):
        def f():
            for k in ks:
                c.allow("bench", k)
        return f

    def many(c):
        def f():
            for i in range(0, n, batch):
                c.allow_many([("bench", k, 1) for k in ks[i:i + batch]])
        return f

    def hit(s, ns):
        def f():
            for k in ks:
                s.hit(item, ns, k)
        return f

    rounds([("limits RedisStorage, FixedWindowRateLimiter.hit", hit(strat, "bench")),
            ("limits RedisStorage, MovingWindowRateLimiter.hit", hit(mstrat, "bench-moving")),
            ("Client.allow, sluiced memory store", one(cm)),
            ("Client.allow, sluiced over the same Redis (sluice.so)", one(cr)),
            (f"Client.allow_many, {batch} per pipeline, sluiced memory", many(cm)),
            (f"Client.allow_many, {batch} per pipeline, sluiced over Redis", many(cr))],
           nrounds, n)


def main(argv):
    mode, a = argv[1], argv[2:]
    if mode == "serve":
        {"flask": serve_flask, "fastapi": serve_fastapi}[a[0]](a[1], int(a[2]), int(a[3]))
    elif mode == "load":
        load(int(a[0]), int(a[1]), int(a[2]), int(a[3]))
    elif mode == "inproc":
        inproc(int(a[0]), int(a[1]), int(a[2]))
    elif mode == "client":
        client(*(int(x) for x in a))
    else:
        sys.exit(f"unknown mode {mode}")


if __name__ == "__main__":
    main(sys.argv)
