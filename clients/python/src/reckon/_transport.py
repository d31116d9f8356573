"""The synchronous HTTP transport: timeouts, bounded retries, Idempotency-Key, typed errors."""

from __future__ import annotations

import email.utils
import http.client
import json
import socket
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Optional, Sequence, Union
from urllib.parse import quote, urlencode, urlsplit

from . import __about__
from ._routes import IDEMPOTENCY_KEY, Route
from ._watchdog import Watchdog
from .errors import APIError, TransportError, error_for

QueryValue = Union[str, int, Sequence[str], None]


@dataclass(frozen=True)
class RequestInfo:
    """What the client sent: handed to the ``on_request`` hook before each attempt."""

    operation_id: str
    method: str
    path: str
    query: Mapping[str, Any]
    headers: Mapping[str, str]
    body: Optional[Mapping[str, Any]]


@dataclass
class Response:
    status: int
    headers: Mapping[str, str]
    data: Any = field(default=None)
    replayed: bool = False


def parse_retry_after(value: Optional[str]) -> Optional[float]:
    """Seconds from a ``Retry-After`` header (delta-seconds or an HTTP date); None when absent or bad."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


class _Stale(Exception):
    """A reused keep-alive connection the server had closed."""


class Transport:
    """Sends requests of the route table to one server.

    Thread-safe: a request takes an idle keep-alive connection (or opens one) and gives it back
    when its answer was read whole; at most ``max_idle`` stay open.
    """

    max_idle = 8

    def __init__(
        self,
        base_url: str,
        token: Optional[str],
        *,
        timeout: float,
        max_retries: int,
        max_retry_wait: float,
        on_request: Optional[Callable[[RequestInfo], None]],
    ) -> None:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"base_url {base_url!r}: want http(s)://host[:port][/prefix]")
        if parts.query or parts.fragment:
            raise ValueError(f"base_url {base_url!r}: must not have a query or fragment")
        if timeout <= 0:
            raise ValueError("timeout must be positive")
        if max_retries < 0 or max_retry_wait < 0:
            raise ValueError("max_retries and max_retry_wait must not be negative")
        if token is not None and (not token or any(c in token for c in "\r\n")):
            raise ValueError("token must be a non-empty single-line string")
        self.base_url = base_url.rstrip("/")
        self._https = parts.scheme == "https"
        self._host = parts.hostname
        self._port = parts.port
        self._prefix = parts.path.rstrip("/")
        self.token = token
        self.timeout = timeout
        self.max_retries = max_retries
        self.max_retry_wait = max_retry_wait
        self.on_request = on_request
        self._lock = threading.Lock()
        self._idle: list[http.client.HTTPConnection] = []
        self._closed = False
        self._watchdog = Watchdog()

    # -- connections ---------------------------------------------------------------------

    def connection(self, timeout: float) -> http.client.HTTPConnection:
        if self._https:
            return http.client.HTTPSConnection(self._host, self._port, timeout=timeout)
        return http.client.HTTPConnection(self._host, self._port, timeout=timeout)

    def build(
        self,
        r: Route,
        path_params: Mapping[str, str],
        query: Mapping[str, QueryValue],
        headers: Mapping[str, str],
        body: Optional[Mapping[str, Any]],
    ) -> tuple[str, dict[str, str], dict[str, Any]]:
        """The target and headers of a request, checked against the route table."""
        unknown_q = set(k for k, v in query.items() if v is not None) - r.query
        unknown_h = set(headers) - r.headers
        unknown_b = set(body or {}) - r.body
        if unknown_q or unknown_h or unknown_b:
            raise ValueError(f"{r.operation_id}: not in the API document: "
                             f"query {sorted(unknown_q)}, headers {sorted(unknown_h)}, body {sorted(unknown_b)}")
        path = r.path
        for name, value in path_params.items():
            if not isinstance(value, str) or not value:
                raise ValueError(f"{r.operation_id}: {name} must be a non-empty string, not {value!r}")
            path = path.replace("{" + name + "}", quote(value, safe=""))
        pairs: list[tuple[str, str]] = []
        clean: dict[str, Any] = {}
        for k, v in query.items():
            if v is None:
                continue
            clean[k] = v
            if isinstance(v, (list, tuple)):
                pairs.extend((k, str(x)) for x in v)
            else:
                pairs.append((k, str(v)))
        target = self._prefix + path + ("?" + urlencode(pairs) if pairs else "")
        h = {"Accept": "application/json", "User-Agent": f"reckon-python/{__about__.__version__}"}
        if self.token is not None and "Reckon-Signature" not in headers:
            h["Authorization"] = f"Bearer {self.token}"
        h.update(headers)
        return target, h, clean

    # -- requests ------------------------------------------------------------------------

    def request(
        self,
        r: Route,
        path_params: Optional[Mapping[str, str]] = None,
        *,
        query: Optional[Mapping[str, QueryValue]] = None,
        body: Optional[Mapping[str, Any]] = None,
        headers: Optional[Mapping[str, str]] = None,
        idempotency_key: Optional[str] = None,
        sign: Optional[Callable[[bytes], Mapping[str, str]]] = None,
        timeout: Optional[float] = None,
    ) -> Response:
        """Send one API request, retrying what is safe to retry; raise :class:`APIError` on an error answer.

        A POST, PUT or DELETE carries an ``Idempotency-Key`` (``idempotency_key``, else a new
        UUID), so that resending it after a lost answer is safe: the server replays the first
        answer.  ``sign`` (signed callbacks) makes the headers of each attempt from the body.
        """
        hdrs = dict(headers or {})
        if IDEMPOTENCY_KEY in r.headers and sign is None:
            hdrs[IDEMPOTENCY_KEY] = idempotency_key or str(uuid.uuid4())
        elif idempotency_key is not None:
            hdrs[IDEMPOTENCY_KEY] = idempotency_key
        try:
            data = None if body is None else json.dumps(body, separators=(",", ":"), allow_nan=False).encode()
        except (TypeError, ValueError) as e:
            raise ValueError(f"{r.operation_id}: the body is not JSON: {e}") from None
        if sign is not None:
            hdrs.update(sign(data or b""))
        target, all_headers, clean_query = self.build(r, path_params or {}, query or {}, hdrs, body)
        if data is not None:
            all_headers["Content-Type"] = "application/json"
        idempotent = r.method == "GET" or IDEMPOTENCY_KEY in all_headers or sign is not None
        timeout = timeout or self.timeout
        attempt = 0
        while True:
            attempt += 1
            if sign is not None and attempt > 1:
                all_headers.update(sign(data or b""))
            if self.on_request is not None:
                self.on_request(RequestInfo(r.operation_id, r.method, r.path, clean_query, dict(all_headers), body))
            try:
                resp = self._once(r.method, target, all_headers, data, timeout)
            except TransportError:
                if not idempotent or attempt > self.max_retries:
                    raise
                time.sleep(min(0.25 * 2 ** (attempt - 1), self.max_retry_wait))
                continue
            if resp.status < 400:
                return resp
            err = self._error(resp)
            if resp.status in (429, 503) and attempt <= self.max_retries:
                wait = err.retry_after if err.retry_after is not None else 0.5 * 2 ** (attempt - 1)
                if wait <= self.max_retry_wait:
                    time.sleep(wait)
                    continue
            raise err

    def _checkout(self, timeout: float) -> http.client.HTTPConnection:
        with self._lock:
            conn = self._idle.pop() if self._idle else None
        if conn is None:
            return self.connection(timeout)
        conn.timeout = timeout
        if conn.sock is not None:
            conn.sock.settimeout(timeout)
        return conn

    def _checkin(self, conn: http.client.HTTPConnection) -> None:
        with self._lock:
            if len(self._idle) < self.max_idle and not self._closed:
                self._idle.append(conn)
                return
        conn.close()

    def close(self) -> None:
        """Close the idle keep-alive connections (requests in flight finish on their own)."""
        with self._lock:
            idle, self._idle, self._closed = self._idle, [], True
        for conn in idle:
            conn.close()

    def _once(self, method: str, target: str, headers: Mapping[str, str], data: Optional[bytes],
              timeout: float) -> Response:
        conn = self._checkout(timeout)
        try:
            return self._exchange(conn, method, target, headers, data, timeout)
        except _Stale:
            # The server closed an idle keep-alive connection before reading the request:
            # nothing was sent that it acted on; send it on a new connection.
            return self._exchange(self.connection(timeout), method, target, headers, data, timeout)

    def _exchange(self, conn: http.client.HTTPConnection, method: str, target: str, headers: Mapping[str, str],
                  data: Optional[bytes], timeout: float) -> Response:
        reused = conn.sock is not None
        # The socket's timeout bounds each read; the deadline bounds the whole exchange, so that
        # a server dribbling its answer byte by byte cannot hold the caller past the timeout.
        expired = threading.Event()

        def expire() -> None:
            expired.set()
            sock = conn.sock
            if sock is not None:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

        token = self._watchdog.arm(timeout, expire)
        keep = False
        try:
            conn.request(method, target, body=data, headers=dict(headers))
            raw = conn.getresponse()
            payload = raw.read()
            hdrs = {k.lower(): v for k, v in raw.getheaders()}
            if expired.is_set():
                raise socket.timeout("the request's timeout passed")
            keep = not raw.will_close
        except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError) as e:
            if reused and not expired.is_set():
                raise _Stale() from e
            raise TransportError(f"{method} {self.base_url}{target} failed: {e!r}") from e
        except (OSError, http.client.HTTPException) as e:
            timed_out = expired.is_set() or isinstance(e, socket.timeout)
            what = f"timed out after {timeout}s" if timed_out else f"failed: {e!r}"
            raise TransportError(f"{method} {self.base_url}{target} {what}") from e
        finally:
            self._watchdog.disarm(token)
            if keep and not expired.is_set():
                self._checkin(conn)
            else:
                conn.close()
        value: Any = None
        if payload:
            try:
                value = json.loads(payload)
            except ValueError:
                value = payload.decode("utf-8", "replace")
        return Response(raw.status, hdrs, value, hdrs.get("idempotent-replayed") == "true")

    @staticmethod
    def _error(resp: Response) -> APIError:
        code, message, request_id = "http_" + str(resp.status), "", resp.headers.get("x-request-id")
        detail = resp.data.get("error") if isinstance(resp.data, dict) else None
        if isinstance(detail, dict):
            code = str(detail.get("code", code))
            message = str(detail.get("message", ""))
            request_id = detail.get("request_id") or request_id
        elif resp.data is not None:
            message = str(resp.data)[:500]
        return error_for(resp.status, code, message, request_id,
                         parse_retry_after(resp.headers.get("retry-after")), resp.headers)
