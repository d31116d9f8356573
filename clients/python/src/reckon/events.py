"""Reckon's event log as a stream of :class:`Event`, resumed with ``Last-Event-ID``."""

from __future__ import annotations

import http.client
import json
import socket
import time
from dataclasses import dataclass
from typing import Any, Iterator, Mapping, Optional, Sequence

from ._routes import route
from ._transport import RequestInfo, Response, Transport
from .errors import APIError, Gone, TransportError

_ROUTE = route("streamEvents")


@dataclass(frozen=True)
class Event:
    """One event of the log: ``id`` is its position (``xid-seq``), ``type`` e.g. ``tool.executed``."""

    id: str
    type: str
    tenant: str
    payload: Any
    at: str
    effect_id: Optional[str] = None
    run_id: Optional[str] = None
    saga_id: Optional[str] = None
    turn_id: Optional[str] = None
    session_key: Optional[str] = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "Event":
        return cls(
            id=str(data["id"]), type=str(data["type"]), tenant=str(data.get("tenant", "")),
            payload=data.get("payload"), at=str(data.get("at", "")),
            effect_id=data.get("effect_id"), run_id=data.get("run_id"), saga_id=data.get("saga_id"),
            turn_id=data.get("turn_id"), session_key=data.get("session_key"),
        )


class SSEConnection:
    """One connection to ``GET /v1/events``: iterate its events until it ends or fails.

    Raises :class:`TransportError` when the connection breaks or stays silent longer than
    ``read_timeout`` (the server sends a keepalive every 15 s), and :class:`APIError` when the
    server refuses the stream.
    """

    def __init__(
        self,
        transport: Transport,
        *,
        patterns: Sequence[str] = (),
        after: Optional[str] = None,
        tenant: Optional[str] = None,
        last_event_id: Optional[str] = None,
        read_timeout: float = 45.0,
    ) -> None:
        headers = {"Last-Event-ID": last_event_id} if last_event_id else {}
        query = {"pattern": list(patterns) or None, "after": after, "tenant": tenant}
        target, hdrs, clean = transport.build(_ROUTE, {}, query, headers, None)
        hdrs["Accept"] = "text/event-stream"
        if transport.on_request is not None:
            transport.on_request(RequestInfo(_ROUTE.operation_id, "GET", _ROUTE.path, clean, dict(hdrs), None))
        self._conn = transport.connection(read_timeout)
        try:
            self._conn.request("GET", target, headers=hdrs)
            self._resp = self._conn.getresponse()
        except (OSError, http.client.HTTPException) as e:
            self._conn.close()
            raise TransportError(f"GET {transport.base_url}{target} failed: {e!r}") from e
        if self._resp.status != 200:
            payload = self._resp.read()
            self._conn.close()
            try:
                data: Any = json.loads(payload) if payload else None
            except ValueError:
                data = payload.decode("utf-8", "replace")
            raise Transport._error(Response(self._resp.status, {k.lower(): v for k, v in self._resp.getheaders()},
                                            data))

    def __iter__(self) -> Iterator[Event]:
        fields: dict[str, str] = {}
        data: list[str] = []
        while True:
            try:
                raw = self._resp.readline()
            except (OSError, http.client.HTTPException, ValueError) as e:
                what = "went silent" if isinstance(e, socket.timeout) else f"broke: {e!r}"
                raise TransportError(f"event stream {what}") from e
            if not raw:
                raise TransportError("event stream ended")
            line = raw.decode("utf-8", "replace").rstrip("\r\n")
            if line == "":
                if data:
                    payload = json.loads("\n".join(data))
                    if "id" in fields:
                        payload.setdefault("id", fields["id"])
                    yield Event.from_json(payload)
                fields, data = {}, []
                continue
            if line.startswith(":"):
                continue
            name, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if name == "data":
                data.append(value)
            elif name in ("id", "event"):
                fields[name] = value

    def close(self) -> None:
        """End the stream (also from another thread: it unblocks a pending read)."""
        try:
            sock = self._conn.sock
            if sock is not None:
                sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._conn.close()


class EventStream:
    """An endless iterator over the event log that reconnects when the stream breaks.

    It resumes with ``Last-Event-ID`` after the last event it yielded, so a broken connection,
    a server restart or a failover to another server neither loses nor repeats an event.  It
    gives up (raising :class:`TransportError`) only after failing to reconnect for
    ``reconnect_for`` seconds; an answer the server refuses (``400``, ``401``, ``403``,
    ``410 events_expired``) is raised at once.  ``last_event_id`` is the position to resume
    from in a later stream.  Use it as a context manager, or call :meth:`close`.

    A stream started "from now" (neither ``after`` nor ``last_event_id``) that breaks before
    its first event can only start from now again; pass ``after`` to be exact from the start.
    """

    def __init__(
        self,
        transport: Transport,
        *,
        patterns: Sequence[str] = (),
        after: Optional[str] = None,
        tenant: Optional[str] = None,
        last_event_id: Optional[str] = None,
        read_timeout: float = 45.0,
        reconnect_for: float = 60.0,
    ) -> None:
        self._transport = transport
        self._patterns = tuple(patterns)
        self._after = after
        self._tenant = tenant
        self.last_event_id = last_event_id
        self._read_timeout = read_timeout
        self._reconnect_for = reconnect_for
        self._conn: Optional[SSEConnection] = None
        self._it: Optional[Iterator[Event]] = None
        self._closed = False
        self.reconnects = 0

    def __iter__(self) -> "EventStream":
        return self

    def __enter__(self) -> "EventStream":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _connect(self) -> None:
        failing_since: Optional[float] = None
        delay = 0.1
        while True:
            if self._closed:
                raise StopIteration
            try:
                self._conn = SSEConnection(
                    self._transport, patterns=self._patterns, tenant=self._tenant,
                    after=None if self.last_event_id else self._after,
                    last_event_id=self.last_event_id, read_timeout=self._read_timeout)
                self._it = iter(self._conn)
                return
            except Gone:
                raise
            except (TransportError, APIError) as e:
                if isinstance(e, APIError) and e.status not in (429, 500, 502, 503, 504):
                    raise
                now = time.monotonic()
                failing_since = failing_since or now
                if now - failing_since > self._reconnect_for:
                    raise TransportError(f"event stream: could not reconnect for {self._reconnect_for}s: {e}") from e
                wait = delay
                if isinstance(e, APIError) and e.retry_after is not None:
                    wait = min(e.retry_after, 5.0)
                time.sleep(wait)
                delay = min(delay * 2, 2.0)

    def __next__(self) -> Event:
        while True:
            if self._closed:
                raise StopIteration
            if self._it is None:
                self._connect()
            assert self._it is not None
            try:
                event = next(self._it)
            except TransportError:
                if self._closed:
                    raise StopIteration
                self._drop()
                self.reconnects += 1
                continue
            self.last_event_id = event.id
            return event

    def _drop(self) -> None:
        if self._conn is not None:
            self._conn.close()
        self._conn, self._it = None, None

    def close(self) -> None:
        """Stop the stream; a blocked ``next`` in another thread returns (StopIteration)."""
        self._closed = True
        self._drop()
