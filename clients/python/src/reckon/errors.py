"""Typed exceptions for every way a call to Reckon can fail."""

from __future__ import annotations

from typing import Any, Mapping, Optional


class ReckonError(Exception):
    """Base class of every error this package raises."""


class APIError(ReckonError):
    """The API answered with an error.

    ``status`` is the HTTP status, ``code`` the API's stable error code (for example
    ``"not_found"``), ``message`` its human-readable message and ``request_id`` the
    request's ``X-Request-Id``, which leads to the server's log lines.  ``retry_after``
    is the ``Retry-After`` the server sent, in seconds, if any.
    """

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        request_id: Optional[str] = None,
        retry_after: Optional[float] = None,
        headers: Optional[Mapping[str, str]] = None,
    ) -> None:
        super().__init__(f"{status} {code}: {message}" + (f" (request {request_id})" if request_id else ""))
        self.status = status
        self.code = code
        self.message = message
        self.request_id = request_id
        self.retry_after = retry_after
        self.headers: Mapping[str, str] = dict(headers or {})


class InvalidRequest(APIError):
    """400: the request was refused as malformed (``invalid_request``, ``invalid_parameter``, …)."""


class Unauthorized(APIError):
    """401: no token, an unknown or revoked one, or a bad callback signature."""


class Forbidden(APIError):
    """403: the token may not do this (a system token on a tenant route, a tenant token on a system route, …)."""


class NotFound(APIError):
    """404: no such effect, run, saga, connector, … for this tenant (or no such route)."""


class MethodNotAllowed(APIError):
    """405: the path exists, the method does not."""


class Conflict(APIError):
    """409: the request conflicts with what is recorded (``idempotency_conflict``, ``not_stuck``, …)."""


class Gone(APIError):
    """410: ``events_expired``: the events after the given position were removed by retention."""


class PayloadTooLarge(APIError):
    """413: the body exceeds the server's limit."""


class UnsupportedMediaType(APIError):
    """415: a ``Content-Type`` other than ``application/json``."""


class Unprocessable(APIError):
    """422: ``idempotency_key_reused``, ``unknown_connector``, ``unknown_saga_definition``."""


class RateLimited(APIError):
    """429: too many requests; ``retry_after`` says when to try again."""


class ServerError(APIError):
    """500 or 501: a server-side failure; quote ``request_id`` to find it in the server's log."""


class Unavailable(APIError):
    """503: the server or its database is busy, stopping or unreachable; retry after ``retry_after``."""


class TransportError(ReckonError):
    """The request could not be completed: connection refused or broken, or a timeout.

    A POST that failed this way may or may not have been applied; retry it with the same
    ``Idempotency-Key`` (the client does that by itself within its retry budget).
    """


class WaitTimeout(ReckonError):
    """``wait`` gave up before the awaited object settled.  ``last`` is what was seen last."""

    def __init__(self, message: str, last: Any) -> None:
        super().__init__(message)
        self.last = last


_BY_STATUS: dict[int, type[APIError]] = {
    400: InvalidRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    405: MethodNotAllowed,
    409: Conflict,
    410: Gone,
    413: PayloadTooLarge,
    415: UnsupportedMediaType,
    422: Unprocessable,
    429: RateLimited,
    500: ServerError,
    501: ServerError,
    503: Unavailable,
}


def error_for(
    status: int,
    code: str,
    message: str,
    request_id: Optional[str],
    retry_after: Optional[float],
    headers: Mapping[str, str],
) -> APIError:
    """The exception for an error answer: the subclass of its status, else ``APIError``."""
    cls = _BY_STATUS.get(status)
    if cls is None:
        cls = ServerError if status >= 500 else APIError
    return cls(status, code, message, request_id, retry_after, headers)
