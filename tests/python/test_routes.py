"""by_route() in real frameworks, requests made in this process through each framework's own
test client (Flask's, Django's: the whole WSGI stack, the middleware in it), no sluiced: the
key each request was decided under, as a client that records it sees it. Where the framework
gives the route's pattern, /users/1 and /users/2 share one key; where it does not, the path is
the key.
"""

import sys
import types

from sluice.decision import Decision
from sluice.middleware import RateLimit, by_route


class Recording:
    """A client that admits every request and records its key."""

    def __init__(self):
        self.keys = []

    def allow(self, rule, key, cost=1, priority=None):
        self.keys.append(key)
        return Decision(True, 9, 8, 0, 1000)


def limit(client):  # the rule's facts given: nothing is read from sluiced
    return RateLimit(client, "r", key=by_route(), algorithm="fixed_window", window="1h")


def test_flask_url_rule():
    from flask import Flask

    from sluice.middleware.wsgi import RateLimitMiddleware

    app = Flask("routes")

    @app.get("/users/<int:uid>")
    def user(uid):
        return "ok"

    rec, outer = Recording(), Recording()
    app.wsgi_app = RateLimitMiddleware(app.wsgi_app, limit(rec))
    app.wsgi_app = RateLimitMiddleware(app.wsgi_app, limit(outer))  # one around another
    c = app.test_client()
    got = [c.get(p).status_code for p in ("/users/1", "/users/2", "/nothing/1")]
    assert got == [200, 200, 404]
    assert rec.keys == ["/users/<int:uid>", "/users/<int:uid>", "/nothing/1"]
    assert outer.keys == rec.keys
    rec.keys.clear()
    c.get("/users/3", environ_overrides={"SCRIPT_NAME": "/app"})
    assert rec.keys == ["/app/users/<int:uid>"]


def test_plain_wsgi_path():
    from werkzeug.test import Client

    from sluice.middleware.wsgi import RateLimitMiddleware

    def app(environ, start_response):
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [b"ok"]

    rec = Recording()
    c = Client(RateLimitMiddleware(app, limit(rec)))
    for p in ("/users/1", "/users/2"):
        c.get(p)
    assert rec.keys == ["/users/1", "/users/2"]


def test_django_resolver_route():
    import django
    from django.conf import settings
    from django.http import HttpResponse
    from django.test import Client
    from django.urls import path

    from sluice.middleware.django import ratelimit

    mw, deco = Recording(), Recording()

    def view(request, uid):
        return HttpResponse("ok")

    urls = types.ModuleType("routes_test_urls")
    urls.urlpatterns = [path("users/<int:uid>", view),
                        path("items/<int:uid>", ratelimit(limit(deco))(view))]
    sys.modules["routes_test_urls"] = urls
    settings.configure(DEBUG=False, SECRET_KEY="test", ALLOWED_HOSTS=["testserver"],
                       ROOT_URLCONF="routes_test_urls", SLUICE_LIMIT=limit(mw),
                       MIDDLEWARE=["sluice.middleware.django.RateLimitMiddleware"],
                       LOGGING_CONFIG=None)
    django.setup()
    c = Client()
    got = [c.get(p).status_code for p in ("/users/1", "/users/2", "/items/1", "/items/2",
                                          "/nothing/1")]
    assert got == [200, 200, 200, 200, 404]
    assert mw.keys == ["users/<int:uid>", "users/<int:uid>", "items/<int:uid>",
                       "items/<int:uid>", "/nothing/1"]
    assert deco.keys == ["items/<int:uid>", "items/<int:uid>"]
