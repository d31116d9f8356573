"""Serve Reckon's connector wire protocol and the HTTP turn handler from WSGI or ASGI.

Reckon's reactors POST to your connector's ``dispatch_url``, ``status_url``,
``compensate_url`` and ``cancel_url`` (``docs/openapi/connector.json``).  Write each as a
plain function of a :class:`Call`; :class:`Connector` checks what Reckon sends and answers
in the protocol::

    def dispatch(call: Call) -> dict:
        if call.args["amount"] <= 0:
            raise Rejected("amount must be positive")          # 422: FAILED, nothing applied
        return bank.wire(call.idempotency_key, **call.args)     # 200: CONFIRMED with this result

    def status(call: Call) -> Status:
        wire = bank.find(call.idempotency_key)
        return Present(wire) if wire else Absent()

    app = Connector(dispatch=dispatch, status=status)           # app.wsgi, or app.asgi

The app answers ``POST /dispatch``, ``/status``, ``/compensate`` and ``/cancel`` (``paths``
renames them); register those URLs with ``Client.put_connector``.  :class:`TurnHandler` does
the same for a tenant's HTTP turn handler (``docs/turns.md``).
"""

from __future__ import annotations

import asyncio
import inspect
import json
import re
import uuid
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Iterable, Mapping, Optional, Sequence, Union

__all__ = [
    "Call", "Original", "Rejected", "Retryable", "Accepted",
    "Status", "Present", "Absent", "Duplicate", "Inconclusive",
    "Connector", "Turn", "TurnEffect", "TurnArtifact", "TurnAnswer", "TurnHandler", "MAX_BODY_BYTES",
]

#: The largest request body the apps read; a larger one is answered 413.
MAX_BODY_BYTES = 8 << 20

Headers = list[tuple[str, str]]
Answer = tuple[int, Headers, bytes]
StartResponse = Callable[[str, Headers], Any]


# -- what handlers receive and raise ------------------------------------------------------

@dataclass(frozen=True)
class Original:
    """A compensation's confirmed effect being undone."""

    effect_id: str
    result: Any


@dataclass(frozen=True)
class Call:
    """One call of a reactor: a dispatch, status check, compensation or cancel of an effect."""

    kind: str
    effect_id: str
    idempotency_key: str
    business_key: Optional[str]
    args: dict[str, Any]
    attempt: int
    correlation_id: str
    callback_secret: Optional[str] = field(default=None, repr=False)
    original: Optional[Original] = None
    traceparent: Optional[str] = None
    tracestate: Optional[str] = None


class Rejected(Exception):
    """A definite refusal: nothing was applied and never will be for this call (FAILED).

    ``status`` is the 4xx to answer (default 422; not 408, 425 or 429, which mean something else).
    """

    def __init__(self, message: str, status: int = 422) -> None:
        if not 400 <= status <= 499 or status in (408, 425, 429):
            raise ValueError(f"Rejected status {status}: want a 4xx other than 408, 425 and 429")
        super().__init__(message)
        self.message = message
        self.status = status


class Retryable(Exception):
    """Nothing was applied; try again after ``after`` seconds (or the connector's backoff).

    Raise it only before doing anything.  Answered ``429`` with ``Retry-After``; note that
    Reckon pauses the connector for every effect for that long.
    """

    def __init__(self, message: str = "try again later", *, after: Optional[float] = None) -> None:
        if after is not None and after < 0:
            raise ValueError("after must not be negative")
        super().__init__(message)
        self.message = message
        self.after = after


class Accepted(Exception):
    """The work was accepted and will be reported with a callback (``202``).

    ``correlation_id`` names the operation in the callback; None: the call's own.
    """

    def __init__(self, correlation_id: Optional[str] = None) -> None:
        if correlation_id is not None and not correlation_id:
            raise ValueError("an empty correlation_id")
        super().__init__(correlation_id or "accepted")
        self.correlation_id = correlation_id


@dataclass(frozen=True)
class Present:
    """Status check: it happened; CONFIRMED with ``result``."""

    result: Any = None


@dataclass(frozen=True)
class Absent:
    """Status check: it did not happen; Reckon dispatches it again."""


@dataclass(frozen=True)
class Duplicate:
    """Status check: it happened ``count`` (≥ 2) times; CONFIRMED with the first ``result``, extras compensated."""

    count: int
    result: Any = None

    def __post_init__(self) -> None:
        if self.count < 2:
            raise ValueError("Duplicate count must be at least 2")


@dataclass(frozen=True)
class Inconclusive:
    """Status check: cannot tell yet; asked again with backoff, STUCK after the connector's limit."""


Status = Union[Present, Absent, Duplicate, Inconclusive]


class _BadRequest(Exception):
    pass


# -- the apps -----------------------------------------------------------------------------

def _json(status: int, value: Any, extra: Optional[Headers] = None) -> Answer:
    body = json.dumps(value, separators=(",", ":"), allow_nan=False).encode()
    return status, [("Content-Type", "application/json")] + (extra or []), body


def _error(status: int, message: str, extra: Optional[Headers] = None) -> Answer:
    return _json(status, {"error": message}, extra)


class _App:
    """WSGI and ASGI adapters around ``handle``; handlers run in a thread under ASGI."""

    def _route(self, path: str) -> Optional[Callable[..., Any]]:
        raise NotImplementedError

    def _answer(self, path: str, headers: Mapping[str, str], body: bytes, result: Any, exc: Optional[BaseException]) \
            -> Answer:
        raise NotImplementedError

    def _prepare(self, path: str, headers: Mapping[str, str], body: bytes) -> Any:
        raise NotImplementedError

    def _precheck(self, method: str, path: str, length: Optional[int]) -> Optional[Answer]:
        if self._route(path) is None:
            return _error(404, f"no handler at {path}")
        if method != "POST":
            return 405, [("Allow", "POST"), ("Content-Type", "application/json")], b'{"error":"POST only"}'
        if length is not None and length > MAX_BODY_BYTES:
            return _error(413, f"body larger than {MAX_BODY_BYTES} bytes")
        return None

    def handle(self, method: str, path: str, headers: Mapping[str, str], body: bytes) -> Answer:
        """Answer one request (headers with lower-case names): the core of both adapters."""
        early = self._precheck(method, path, len(body))
        if early is not None:
            return early
        try:
            arg = self._prepare(path, headers, body)
        except _BadRequest as e:
            return _error(400, str(e))
        fn = self._route(path)
        assert fn is not None
        if inspect.iscoroutinefunction(fn):
            return self._answer(path, headers, body, None, TypeError("an async handler needs the ASGI app"))
        try:
            result = fn(arg)
        except Exception as e:  # the handler's failure is an answer of the protocol
            return self._answer(path, headers, body, None, e)
        return self._answer(path, headers, body, result, None)

    async def _ahandle(self, method: str, path: str, headers: Mapping[str, str], body: bytes) -> Answer:
        early = self._precheck(method, path, len(body))
        if early is not None:
            return early
        try:
            arg = self._prepare(path, headers, body)
        except _BadRequest as e:
            return _error(400, str(e))
        fn = self._route(path)
        assert fn is not None
        try:
            if inspect.iscoroutinefunction(fn):
                result = await fn(arg)
            else:
                result = await asyncio.to_thread(fn, arg)
        except Exception as e:
            return self._answer(path, headers, body, None, e)
        return self._answer(path, headers, body, result, None)

    # WSGI (PEP 3333)
    def wsgi(self, environ: Mapping[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        """The WSGI application."""
        method = str(environ.get("REQUEST_METHOD", "GET"))
        path = str(environ.get("PATH_INFO", "") or "/")
        headers = {k[5:].replace("_", "-").lower(): str(v) for k, v in environ.items() if k.startswith("HTTP_")}
        if "CONTENT_TYPE" in environ:
            headers["content-type"] = str(environ["CONTENT_TYPE"])
        try:
            length = int(environ.get("CONTENT_LENGTH") or 0)
        except ValueError:
            length = -1
        if length < 0:
            status, hdrs, out = _error(400, "bad Content-Length")
        else:
            early = self._precheck(method, path, length)
            if early is not None:
                status, hdrs, out = early
            else:
                body = environ["wsgi.input"].read(length) if length else b""
                status, hdrs, out = self.handle(method, path, headers, body)
        start_response(f"{status} {_REASONS.get(status, 'Status')}", hdrs + [("Content-Length", str(len(out)))])
        return [out]

    # ASGI 3
    async def asgi(self, scope: Mapping[str, Any], receive: Callable[[], Awaitable[Mapping[str, Any]]],
                   send: Callable[[Mapping[str, Any]], Awaitable[None]]) -> None:
        """The ASGI application (``http`` and ``lifespan`` scopes)."""
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            raise ValueError(f"unsupported ASGI scope {scope['type']!r}")
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        method, path = str(scope["method"]), str(scope["path"])
        try:
            declared: Optional[int] = int(headers["content-length"]) if "content-length" in headers else None
        except ValueError:
            declared = None
        answer = self._precheck(method, path, declared)
        if answer is None:
            chunks, size = [], 0
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    return
                chunk = message.get("body", b"")
                size += len(chunk)
                if size > MAX_BODY_BYTES:
                    answer = _error(413, f"body larger than {MAX_BODY_BYTES} bytes")
                    break
                chunks.append(chunk)
                if not message.get("more_body", False):
                    break
            if answer is None:
                answer = await self._ahandle(method, path, headers, b"".join(chunks))
        status, hdrs, out = answer
        await send({"type": "http.response.start", "status": status,
                    "headers": [(k.lower().encode(), v.encode())
                                for k, v in hdrs + [("Content-Length", str(len(out)))]]})
        await send({"type": "http.response.body", "body": out})


_REASONS = {200: "OK", 202: "Accepted", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed",
            409: "Conflict", 413: "Payload Too Large", 422: "Unprocessable Entity", 429: "Too Many Requests",
            500: "Internal Server Error", 503: "Service Unavailable"}

_UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")
_SECRET = re.compile(r"^[0-9a-f]{64}$")
_CALL_FIELDS = {"effect_id", "idempotency_key", "business_key", "args", "attempt", "correlation_id", "original"}


def _object(body: bytes) -> dict[str, Any]:
    try:
        value = json.loads(body)
    except (ValueError, UnicodeDecodeError) as e:
        raise _BadRequest(f"the body is not JSON: {e}") from None
    if not isinstance(value, dict):
        raise _BadRequest("the body is not a JSON object")
    return value


def _int(value: Any, what: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise _BadRequest(f"{what} must be an integer ≥ {minimum}")
    return value


def parse_call(kind: str, headers: Mapping[str, str], body: bytes) -> Call:
    """Check a reactor's call against the protocol and return it; raises ValueError naming what is wrong."""
    try:
        return _parse_call(kind, headers, body)
    except _BadRequest as e:
        raise ValueError(str(e)) from None


def _parse_call(kind: str, headers: Mapping[str, str], body: bytes) -> Call:
    key = headers.get("idempotency-key", "")
    effect_id = headers.get("reckon-effect-id", "")
    attempt_h = headers.get("reckon-attempt", "")
    if not key:
        raise _BadRequest("the Idempotency-Key header is missing")
    if not _UUID.match(effect_id):
        raise _BadRequest("the Reckon-Effect-Id header is missing or not a UUID")
    if not attempt_h.isdigit() or int(attempt_h) < 1:
        raise _BadRequest("the Reckon-Attempt header is missing or not a positive integer")
    secret = headers.get("reckon-callback-secret")
    if secret is not None and not _SECRET.match(secret):
        raise _BadRequest("the Reckon-Callback-Secret header is not 64 hex characters")
    data = _object(body)
    unknown = set(data) - _CALL_FIELDS
    if unknown:
        raise _BadRequest(f"unknown fields {sorted(unknown)}")
    missing = {"effect_id", "idempotency_key", "business_key", "args", "attempt", "correlation_id"} - set(data)
    if missing:
        raise _BadRequest(f"missing fields {sorted(missing)}")
    if not isinstance(data["effect_id"], str) or data["effect_id"].lower() != effect_id.lower():
        raise _BadRequest("effect_id differs from the Reckon-Effect-Id header")
    if data["idempotency_key"] != key:
        raise _BadRequest("idempotency_key differs from the Idempotency-Key header")
    if data["business_key"] is not None and not isinstance(data["business_key"], str):
        raise _BadRequest("business_key must be a string or null")
    if not isinstance(data["args"], dict):
        raise _BadRequest("args must be an object")
    attempt = _int(data["attempt"], "attempt", 1)
    if attempt != int(attempt_h):
        raise _BadRequest("attempt differs from the Reckon-Attempt header")
    if not isinstance(data["correlation_id"], str):
        raise _BadRequest("correlation_id must be a string")
    original = None
    if "original" in data:
        o = data["original"]
        if not isinstance(o, dict) or set(o) != {"effect_id", "result"} or not isinstance(o["effect_id"], str) \
                or not _UUID.match(o["effect_id"]):
            raise _BadRequest("original must be {effect_id, result}")
        original = Original(o["effect_id"], o["result"])
    if kind == "compensate" and original is None:
        raise _BadRequest("a compensation without original")
    return Call(kind=kind, effect_id=effect_id, idempotency_key=key, business_key=data["business_key"],
                args=data["args"], attempt=attempt, correlation_id=data["correlation_id"], callback_secret=secret,
                original=original, traceparent=headers.get("traceparent"), tracestate=headers.get("tracestate"))


def _retry_after(seconds: float) -> str:
    return str(max(0, int(seconds + 0.999)))


class Connector(_App):
    """A connector's endpoints as one WSGI (``.wsgi``) and ASGI (``.asgi``) app.

    ``dispatch`` and ``compensate`` return the effect's result (any JSON; ``200``), or raise
    :class:`Rejected` (FAILED), :class:`Retryable` (tried again later) or :class:`Accepted`
    (``202``: a callback follows).  Any other exception answers ``500``: the outcome is UNKNOWN
    and Reckon asks ``status``, which returns :class:`Present`, :class:`Absent`,
    :class:`Duplicate` or :class:`Inconclusive`.  ``cancel`` returns True when the accepted
    operation will certainly not take effect, False when it is too late.

    A call that breaks the protocol (a missing header, a body that is not the documented
    object, headers and body that disagree) is answered ``400`` and reaches no handler: a
    refusal for a dispatch, inconclusive for a status check, not cancelled for a cancel.
    """

    def __init__(
        self,
        *,
        dispatch: Callable[[Call], Any],
        status: Optional[Callable[[Call], Status]] = None,
        compensate: Optional[Callable[[Call], Any]] = None,
        cancel: Optional[Callable[[Call], bool]] = None,
        paths: Optional[Mapping[str, str]] = None,
    ) -> None:
        self.paths = {"dispatch": "/dispatch", "status": "/status", "compensate": "/compensate", "cancel": "/cancel"}
        if paths:
            unknown = set(paths) - set(self.paths)
            if unknown:
                raise ValueError(f"unknown paths {sorted(unknown)}")
            self.paths.update(paths)
        handlers: dict[str, Optional[Callable[..., Any]]] = {
            "dispatch": dispatch, "status": status, "compensate": compensate, "cancel": cancel}
        self._by_path = {self.paths[k]: (k, h) for k, h in handlers.items() if h is not None}

    def _route(self, path: str) -> Optional[Callable[..., Any]]:
        entry = self._by_path.get(path)
        return entry[1] if entry else None

    def _prepare(self, path: str, headers: Mapping[str, str], body: bytes) -> Any:
        return _parse_call(self._by_path[path][0], headers, body)

    def _answer(self, path: str, headers: Mapping[str, str], body: bytes, result: Any,
                exc: Optional[BaseException]) -> Answer:
        kind = self._by_path[path][0]
        if kind == "status":
            if exc is not None:
                return _error(500, f"status check failed: {exc!r}")
            if isinstance(result, Present):
                return _json(200, {"status": "present", "result": result.result})
            if isinstance(result, Duplicate):
                return _json(200, {"status": "duplicate", "count": result.count, "result": result.result})
            if isinstance(result, Absent):
                return _json(200, {"status": "absent"})
            if isinstance(result, Inconclusive):
                return _json(200, {"status": "inconclusive"})
            return _error(500, f"status handler returned {type(result).__name__}, not a Status")
        if kind == "cancel":
            if exc is None and result is True:
                return _json(200, {"cancelled": True})
            if isinstance(exc, Retryable):
                return _error(503, exc.message)
            return _error(409, "not cancelled" if exc is None else str(exc))
        # dispatch and compensate
        if exc is None:
            try:
                return _json(200, result)
            except (TypeError, ValueError) as e:
                return _error(500, f"the result is not JSON: {e}")
        if isinstance(exc, Rejected):
            return _error(exc.status, exc.message)
        if isinstance(exc, Retryable):
            extra = [("Retry-After", _retry_after(exc.after))] if exc.after is not None else []
            return _error(429, exc.message, extra)
        if isinstance(exc, Accepted):
            return _json(202, {"correlation_id": exc.correlation_id} if exc.correlation_id else {})
        return _error(500, f"{kind} failed: {exc!r}")


# -- the HTTP turn handler ----------------------------------------------------------------

@dataclass(frozen=True)
class Turn:
    """A logical turn POSTed by a reactor: the messages it aggregates and the stored artifacts."""

    session_key: str
    tenant: str
    channel: str
    turn_id: str
    turn_group: str
    seq: int
    attempt: int
    messages: list[dict[str, Any]]
    artifacts: list[dict[str, Any]]


@dataclass(frozen=True)
class TurnEffect:
    """An effect the turn decides, at journal position (``decision``, ``call_index``)."""

    connector: str
    decision: int
    call_index: int
    args: Optional[Mapping[str, Any]] = None
    business_key: Optional[str] = None

    def to_json(self) -> dict[str, Any]:
        if not self.connector:
            raise ValueError("TurnEffect.connector is empty")
        if self.decision < 0 or self.call_index < 0:
            raise ValueError("TurnEffect decision and call_index must not be negative")
        out: dict[str, Any] = {"connector": self.connector, "decision": self.decision, "call_index": self.call_index}
        if self.args is not None:
            out["args"] = dict(self.args)
        if self.business_key is not None:
            out["business_key"] = self.business_key
        return out


@dataclass(frozen=True)
class TurnArtifact:
    """An artifact the turn saves for its group (``policy``: ALWAYS_SAFE, CONDITIONAL or NEVER)."""

    name: str
    data: Any
    input_fingerprint: str
    dependency_fingerprint: Optional[str] = None
    policy: Optional[str] = None

    def to_json(self) -> dict[str, Any]:
        if self.policy not in (None, "ALWAYS_SAFE", "CONDITIONAL", "NEVER"):
            raise ValueError(f"TurnArtifact.policy {self.policy!r}")
        out = {"name": self.name, "data": self.data, "input_fingerprint": self.input_fingerprint}
        if self.dependency_fingerprint is not None:
            out["dependency_fingerprint"] = self.dependency_fingerprint
        if self.policy is not None:
            out["policy"] = self.policy
        return out


@dataclass(frozen=True)
class TurnAnswer:
    """The handler's answer: effects committed with the turn, artifacts saved, stored ones reused."""

    effects: Sequence[TurnEffect] = ()
    artifacts: Sequence[TurnArtifact] = ()
    reused: Sequence[str] = ()

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"effects": [e.to_json() for e in self.effects]}
        if self.artifacts:
            out["artifacts"] = [a.to_json() for a in self.artifacts]
        if self.reused:
            out["reused"] = list(self.reused)
        return out


_TURN_FIELDS = {"session_key", "tenant", "channel", "turn_id", "turn_group", "seq", "attempt", "messages", "artifacts"}


def _parse_turn(headers: Mapping[str, str], body: bytes) -> Turn:
    turn_id, group, attempt_h = (headers.get(h, "") for h in ("reckon-turn-id", "reckon-turn-group", "reckon-attempt"))
    if not _UUID.match(turn_id) or not _UUID.match(group):
        raise _BadRequest("the Reckon-Turn-Id or Reckon-Turn-Group header is missing or not a UUID")
    if not attempt_h.isdigit() or int(attempt_h) < 1:
        raise _BadRequest("the Reckon-Attempt header is missing or not a positive integer")
    data = _object(body)
    if set(data) != _TURN_FIELDS:
        raise _BadRequest(f"want fields {sorted(_TURN_FIELDS)}, got {sorted(data)}")
    for name in ("session_key", "tenant", "channel", "turn_id", "turn_group"):
        if not isinstance(data[name], str):
            raise _BadRequest(f"{name} must be a string")
    if data["turn_id"].lower() != turn_id.lower() or data["turn_group"].lower() != group.lower():
        raise _BadRequest("turn_id or turn_group differs from its header")
    seq = _int(data["seq"], "seq", 0)
    attempt = _int(data["attempt"], "attempt", 1)
    if attempt != int(attempt_h):
        raise _BadRequest("attempt differs from the Reckon-Attempt header")
    for name in ("messages", "artifacts"):
        if not isinstance(data[name], list) or not all(isinstance(m, dict) for m in data[name]):
            raise _BadRequest(f"{name} must be an array of objects")
    return Turn(session_key=data["session_key"], tenant=data["tenant"], channel=data["channel"], turn_id=turn_id,
                turn_group=group, seq=seq, attempt=attempt, messages=data["messages"], artifacts=data["artifacts"])


class TurnHandler(_App):
    """A tenant's HTTP turn handler as a WSGI (``.wsgi``) and ASGI (``.asgi``) app, at ``path``.

    ``handle`` receives the :class:`Turn` and returns a :class:`TurnAnswer`, a sequence of
    :class:`TurnEffect`, or None (no effects).  Raise :class:`Rejected` to fail the turn for
    good, :class:`Retryable` to have it attempted again; any other exception answers ``500``
    (attempted again, at most 5 attempts).  Be deterministic per journal position: the same
    decision at the same (``decision``, ``call_index``) is the same effect in every attempt.
    """

    def __init__(self, handle: Callable[[Turn], Union[TurnAnswer, Sequence[TurnEffect], None]], *,
                 path: str = "/turns") -> None:
        self._handle = handle
        self.path = path

    def _route(self, path: str) -> Optional[Callable[..., Any]]:
        return self._handle if path == self.path else None

    def _prepare(self, path: str, headers: Mapping[str, str], body: bytes) -> Any:
        return _parse_turn(headers, body)

    def _answer(self, path: str, headers: Mapping[str, str], body: bytes, result: Any,
                exc: Optional[BaseException]) -> Answer:
        if isinstance(exc, Rejected):
            return _error(exc.status, exc.message)
        if isinstance(exc, Retryable):
            extra = [("Retry-After", _retry_after(exc.after))] if exc.after is not None else []
            return _error(429, exc.message, extra)
        if exc is not None:
            return _error(500, f"turn handler failed: {exc!r}")
        if result is None:
            result = TurnAnswer()
        elif not isinstance(result, TurnAnswer):
            result = TurnAnswer(effects=list(result))
        try:
            return _json(200, result.to_json())
        except (TypeError, ValueError, AttributeError) as e:
            return _error(500, f"the turn handler's answer is invalid: {e}")


def new_correlation_id() -> str:
    """A fresh id for :class:`Accepted`, for upstreams that name their own operations."""
    return str(uuid.uuid4())
