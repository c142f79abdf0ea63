"""WSGI middleware (Flask, any WSGI app) over a sluice.Client.

    app.wsgi_app = RateLimitMiddleware(app.wsgi_app, RateLimit(Client(...), "api"))

Wrapping a Flask app's wsgi_app, the Request's route is the pattern of the app's URL rule the
request matches ("/users/<int:id>", SCRIPT_NAME before it), found in the app's url_map before
the app runs; a request no rule matches, and any other WSGI app, has its path as its route.

An in-flight rule's hold is released when the server closes the response (PEP 3333: also when
the client went away mid-response, or the body's iteration raised), or when the app raises
before it returns one. With the limit's report, it is reported dropped when the app raised,
the status was a 5xx, or the server closed the body before it was read to its end (the client
went away, or the body's iteration raised).
"""

from . import Request


def _rule_pattern(environ, url_map):
    """The pattern of the url_map (a werkzeug Map) rule environ's request matches, or None when
    none does (a 404, 405 or redirect)."""
    try:
        rule, _ = url_map.bind_to_environ(environ).match(return_rule=True)
    except Exception:  # werkzeug's HTTPException or RequestRedirect: no rule of its own
        return None
    return rule.rule


def request_from_environ(environ, url_map=None):
    """The Request of environ; its route the url_map rule's pattern when url_map is given and
    a rule matches, else the path."""
    headers = {k[5:].replace("_", "-").lower(): v for k, v in environ.items()
               if k.startswith("HTTP_")}
    for k in ("CONTENT_TYPE", "CONTENT_LENGTH"):
        if k in environ:
            headers[k.replace("_", "-").lower()] = environ[k]
    path = environ.get("SCRIPT_NAME", "") + environ.get("PATH_INFO", "")
    pattern = _rule_pattern(environ, url_map) if url_map is not None else None
    route = path if pattern is None else environ.get("SCRIPT_NAME", "") + pattern
    return Request(method=environ.get("REQUEST_METHOD", ""), path=path, headers=headers,
                   client_ip=environ.get("REMOTE_ADDR", ""), route=route,
                   user=environ.get("REMOTE_USER"), raw=environ)


class _ReleasingBody:
    """The app's response body, releasing the hold when the server closes it: release(True)
    unless the body was read to its end."""

    def __init__(self, body, release):
        self.body, self._release, self._ended = body, release, False

    def __iter__(self):
        yield from self.body
        self._ended = True

    def close(self):
        try:
            if hasattr(self.body, "close"):
                self.body.close()
        finally:
            self._release(not self._ended)


class RateLimitMiddleware:
    """Limits the app's requests with `limit` (a sluice.middleware.RateLimit whose client is a
    sluice.Client). url_map: the werkzeug Map whose rules name the routes; by default a Flask
    app's, when app is its wsgi_app (or a middleware around it)."""

    def __init__(self, app, limit, url_map=None):
        self.app, self.limit = app, limit
        self.url_map = url_map if url_map is not None else _url_map_of(app)

    def __call__(self, environ, start_response):
        req = request_from_environ(environ, self.url_map)
        if not self.limit.applies(req):
            return self.app(environ, start_response)
        out = self.limit.check(req)
        if not out.allowed:
            reason = {429: "Too Many Requests", 400: "Bad Request"}[out.status]
            start_response(f"{out.status} {reason}",
                           out.headers + [("Content-Length", str(len(out.body)))])
            return [out.body]

        status = [0]

        def start_with_headers(line, headers, exc_info=None):
            status[0] = int(line.split(None, 1)[0]) if line[:3].isdigit() else 0
            return start_response(line, list(headers) + out.headers, exc_info)

        done = []

        def release(dropped):
            if not done:
                done.append(True)
                self.limit.release(out, dropped or status[0] >= 500)

        try:
            body = self.app(environ, start_with_headers)
        except BaseException:
            release(True)
            raise
        return _ReleasingBody(body, release)


def _url_map_of(app):
    """The url_map of the Flask app whose wsgi_app app is (a bound method), or that of the app
    an inner RateLimitMiddleware found; None for any other WSGI app."""
    if isinstance(app, RateLimitMiddleware):
        return app.url_map
    return getattr(getattr(app, "__self__", None), "url_map", None)
