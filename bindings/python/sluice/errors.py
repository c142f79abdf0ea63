"""The errors the client raises. A denial is not an error: it is a Decision with allowed False."""


class SluiceError(Exception):
    """Every error of this package."""


class ServerError(SluiceError):
    """sluiced answered with an error (its text exactly): an unknown rule, a cost it can never
    admit, a release of no such hold, a settle past max_debt."""


class UnreachableError(SluiceError):
    """sluiced could not be reached, or did not answer within the timeout. The call may or may
    not have been executed by the server; it is never sent again by the client."""


class ProtocolError(SluiceError):
    """sluiced answered with a reply of the wrong shape."""
