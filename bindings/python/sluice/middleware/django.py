"""Django: a middleware class over settings.SLUICE_LIMIT, and a decorator for one view.

    # settings.py
    SLUICE_LIMIT = RateLimit(Client(...), "api", key=by_ip(24))
    MIDDLEWARE = [..., "sluice.middleware.django.RateLimitMiddleware"]

    # views.py
    @ratelimit(RateLimit(client, "reports", key=by_user()))
    def report(request): ...

The Request's route is the pattern of the URL the request resolves to, as Django's
ResolverMatch.route writes it ("users/<int:id>"), for the middleware class (which resolves the
path itself, before Django does) and the decorator alike; a path that resolves to nothing has
its path as its route.

An in-flight rule's hold is released when the server closes the response (also when the client
went away mid-response), or when the view raises. With the limit's report, it is reported dropped
when the view raised, the status was a 5xx, or a streaming response was closed before its end.
"""

from django.http import HttpResponse

from . import Request


def request_from_django(request, route=""):
    meta = request.META
    headers = {k[5:].replace("_", "-").lower(): v for k, v in meta.items() if k.startswith("HTTP_")}
    user = getattr(request, "user", None)
    uid = user.pk if user is not None and getattr(user, "is_authenticated", False) else None
    return Request(method=request.method, path=request.path, headers=headers,
                   client_ip=meta.get("REMOTE_ADDR", ""), route=route or request.path,
                   user=uid, raw=request)


def _refusal(out):
    resp = HttpResponse(out.body, status=out.status, content_type="application/problem+json")
    for k, v in out.headers:
        if k != "Content-Type":
            resp[k] = v
    return resp


def _guarded(limit, request, route, call, block=True):
    """Runs call() under limit: the refusal, or call's response with the headers and the hold
    released when it is closed."""
    req = request_from_django(request, route)
    if not limit.applies(req):
        return call()
    out = limit.check(req)
    request.sluice = out.decision
    request.limited = not out.allowed
    if not out.allowed and block:
        return _refusal(out)
    try:
        response = call()
    except BaseException:
        limit.release(out, True)
        raise
    for k, v in out.headers:  # a refusal let through (block=False): its RateLimit fields only
        if out.allowed or k.startswith("RateLimit"):
            response[k] = v
    close = response.close
    # a streaming body (a sync one: an async one is not watched) must be read to its end
    ended = [not getattr(response, "streaming", False) or getattr(response, "is_async", False)]
    if not ended[0]:
        def to_the_end(chunks):
            yield from chunks
            ended[0] = True

        response.streaming_content = to_the_end(response.streaming_content)

    def close_and_release():
        try:
            close()
        finally:
            limit.release(out, not ended[0] or response.status_code >= 500)

    response.close = close_and_release
    return response


class RateLimitMiddleware:
    """Limits every request with settings.SLUICE_LIMIT: a sluice.middleware.RateLimit over a
    sluice.Client, or a list of them (each applied in turn, the first refusal answers)."""

    def __init__(self, get_response):
        from django.conf import settings

        limits = settings.SLUICE_LIMIT
        self.get_response = get_response
        self.limits = list(limits) if isinstance(limits, (list, tuple)) else [limits]

    def __call__(self, request):
        call = lambda: self.get_response(request)  # noqa: E731
        route = _resolved_route(request)
        for limit in reversed(self.limits):
            call = (lambda lim, inner: lambda: _guarded(lim, request, route, inner))(limit, call)
        return call()


def _resolved_route(request):
    """The route pattern request.path_info resolves to (in request.urlconf when a middleware
    set one), or "" when it resolves to none or has no pattern (re_path)."""
    from django.urls import Resolver404, resolve

    try:
        match = resolve(request.path_info, getattr(request, "urlconf", None))
    except Resolver404:
        return ""
    return match.route or ""


def ratelimit(limit, block=True):
    """A view decorator, as django-ratelimit's: limits the view with `limit`. block=False lets a
    refused request through with request.limited True (request.sluice holds the decision)."""

    def wrap(view):
        def guarded(request, *args, **kwargs):
            match = getattr(request, "resolver_match", None)
            route = getattr(match, "route", "") if match else ""
            return _guarded(limit, request, route, lambda: view(request, *args, **kwargs), block)

        guarded.__name__, guarded.__doc__ = view.__name__, view.__doc__
        guarded.__wrapped__ = view
        return guarded

    return wrap
