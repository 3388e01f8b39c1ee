"""The package's exceptions: one base class, and one subclass per gRPC status an analyst meets."""

from __future__ import annotations

import grpc

__all__ = [
    "LdpcovError",
    "RpcError",
    "NotFoundError",
    "AuthenticationError",
    "PermissionDeniedError",
    "NotReleasableError",
    "InvalidRequestError",
    "UnavailableError",
    "UnimplementedError",
    "BudgetExhaustedError",
    "PlannerError",
]


class LdpcovError(Exception):
    """Base class of every error this package raises."""


class RpcError(LdpcovError):
    """A call to the aggregator failed with a gRPC status.

    Attributes
    ----------
    code : grpc.StatusCode
        The status code (``grpc.StatusCode.NOT_FOUND``, …).
    details : str
        The server's message.
    method : str
        The RPC, e.g. ``"GetEstimate"``.
    """

    def __init__(self, method: str, code: grpc.StatusCode, details: str) -> None:
        self.method = method
        self.code = code
        self.details = details
        super().__init__(f"{method} failed: {code.name}: {details}")


class NotFoundError(RpcError, LookupError):
    """``NOT_FOUND``: no collection with that id."""


class AuthenticationError(RpcError):
    """``UNAUTHENTICATED``: no token, or a token the daemon does not know."""


class PermissionDeniedError(RpcError):
    """``PERMISSION_DENIED``: a known token without the right (estimates need the admin token)."""


class NotReleasableError(RpcError):
    """``FAILED_PRECONDITION``: e.g. fewer reports than the collection's ``min_reports``."""


class InvalidRequestError(RpcError, ValueError):
    """``INVALID_ARGUMENT`` or ``OUT_OF_RANGE``: the server refused the request's values."""


class UnavailableError(RpcError, ConnectionError):
    """``UNAVAILABLE``: the daemon cannot be reached."""


class UnimplementedError(RpcError, NotImplementedError):
    """``UNIMPLEMENTED``: the daemon is older than this package and lacks the RPC."""


class BudgetExhaustedError(RpcError):
    """``RESOURCE_EXHAUSTED``: e.g. a central release beyond what is left of the budget."""


class PlannerError(LdpcovError, ValueError):
    """The planner has no closed form for this collection (see :mod:`ldpcov.planner`)."""


_BY_CODE: dict[grpc.StatusCode, type[RpcError]] = {
    grpc.StatusCode.NOT_FOUND: NotFoundError,
    grpc.StatusCode.UNAUTHENTICATED: AuthenticationError,
    grpc.StatusCode.PERMISSION_DENIED: PermissionDeniedError,
    grpc.StatusCode.FAILED_PRECONDITION: NotReleasableError,
    grpc.StatusCode.INVALID_ARGUMENT: InvalidRequestError,
    grpc.StatusCode.OUT_OF_RANGE: InvalidRequestError,
    grpc.StatusCode.UNAVAILABLE: UnavailableError,
    grpc.StatusCode.UNIMPLEMENTED: UnimplementedError,
    grpc.StatusCode.RESOURCE_EXHAUSTED: BudgetExhaustedError,
}


def from_grpc(method: str, error: grpc.RpcError) -> RpcError:
    """The package's exception for a failed call."""
    code = error.code() if hasattr(error, "code") else grpc.StatusCode.UNKNOWN
    details = (error.details() if hasattr(error, "details") else None) or str(error)
    if code == grpc.StatusCode.UNIMPLEMENTED:
        details = (
            f"{details} (the daemon does not implement {method}: "
            "it is older than this package; upgrade ldpcov-aggregator)"
        )
    return _BY_CODE.get(code, RpcError)(method, code, details)
