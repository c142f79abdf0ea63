"""A decision of sluiced, as a record, and the parsing of its RESP reply (pure: no I/O)."""

from dataclasses import dataclass

from .errors import ProtocolError


@dataclass(frozen=True)
class Decision:
    """One decision. allowed: the cost was admitted (a max_delay rule may admit after a wait of
    retry_after_ms). limit: the rule's capacity; remaining: units left after this request;
    retry_after_ms: 0 when allowed, else until the cost fits (-1: never); reset_after_ms: until
    the key is fresh again. from_cache: the client answered a repeated denial itself. fallback:
    sluiced was unreachable and the client's on_unreachable answered. hold_id: an acquire's hold,
    to release (0: no hold made)."""

    allowed: bool
    limit: int
    remaining: int
    retry_after_ms: int
    reset_after_ms: int
    from_cache: bool = False
    fallback: bool = False
    hold_id: int = 0


def parse_decision(reply, with_hold=False):
    """The Decision in a reply [allowed, limit, remaining, retry_after_ms, reset_after_ms] (and
    hold_id when with_hold). Raises ProtocolError for any other shape."""
    want = 6 if with_hold else 5
    if not isinstance(reply, (list, tuple)) or len(reply) != want:
        raise ProtocolError(f"expected a reply of {want} integers, got {reply!r:.200}")
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in reply):
        raise ProtocolError(f"expected a reply of {want} integers, got {reply!r:.200}")
    return Decision(
        allowed=reply[0] == 1,
        limit=reply[1],
        remaining=reply[2],
        retry_after_ms=reply[3],
        reset_after_ms=reply[4],
        hold_id=reply[5] if with_hold else 0,
    )
