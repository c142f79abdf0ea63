"""WSGI middleware (Flask, any WSGI app) over a sluice.Client.

    app.wsgi_app = RateLimitMiddleware(app.wsgi_app, RateLimit(Client(...), "api"))

An in-flight rule's hold is released when the server closes the response (PEP 3333: also when
the client went away mid-response, or the body's iteration raised), or when the app raises
before it returns one.
"""

from . import Request


def request_from_environ(environ):
    headers = {k[5:].replace("_", "-").lower(): v for k, v in environ.items()
               if k.startswith("HTTP_")}
    for k in ("CONTENT_TYPE", "CONTENT_LENGTH"):
        if k in environ:
            headers[k.replace("_", "-").lower()] = environ[k]
    path = environ.get("SCRIPT_NAME", "") + environ.get("PATH_INFO", "")
    return Request(method=environ.get("REQUEST_METHOD", ""), path=path, headers=headers,
                   client_ip=environ.get("REMOTE_ADDR", ""), route=path,
                   user=environ.get("REMOTE_USER"), raw=environ)


class _ReleasingBody:
    """The app's response body, releasing the hold when the server closes it."""

    def __init__(self, body, release):
        self.body, self._release = body, release

    def __iter__(self):
        return iter(self.body)

    def close(self):
        try:
            if hasattr(self.body, "close"):
                self.body.close()
        finally:
            self._release()


class RateLimitMiddleware:
    """Limits the app's requests with `limit` (a sluice.middleware.RateLimit whose client is a
    sluice.Client)."""

    def __init__(self, app, limit):
        self.app, self.limit = app, limit

    def __call__(self, environ, start_response):
        req = request_from_environ(environ)
        if not self.limit.applies(req):
            return self.app(environ, start_response)
        out = self.limit.check(req)
        if not out.allowed:
            reason = {429: "Too Many Requests", 400: "Bad Request"}[out.status]
            start_response(f"{out.status} {reason}",
                           out.headers + [("Content-Length", str(len(out.body)))])
            return [out.body]

        def start_with_headers(status, headers, exc_info=None):
            return start_response(status, list(headers) + out.headers, exc_info)

        done = []

        def release():
            if not done:
                done.append(True)
                self.limit.release(out)

        try:
            body = self.app(environ, start_with_headers)
        except BaseException:
            release()
            raise
        return _ReleasingBody(body, release)
