"""sluice: a client of sluiced (sync and asyncio), middleware for ASGI, WSGI and Django, and an
in-process binding of libsluice. See README.md."""

from ._version import __version__
from .backoff import Rng, backoff_ms, retry_delay_ms
from .cache import OverLimitCache
from .decision import Decision
from .errors import ProtocolError, ServerError, SluiceError, UnreachableError


def __getattr__(name):
    # the clients import redis-py, the in-process binding loads libsluice: only when asked for
    if name == "Client":
        from .client import Client
        return Client
    if name == "AsyncClient":
        from .aio import AsyncClient
        return AsyncClient
    raise AttributeError(f"module 'sluice' has no attribute {name!r}")


__all__ = ["__version__", "Client", "AsyncClient", "Decision", "OverLimitCache", "Rng",
           "backoff_ms", "retry_delay_ms", "SluiceError", "ServerError", "UnreachableError",
           "ProtocolError"]
