"""Every error code of the API document that a client can provoke, as typed exceptions.

Codes provoked elsewhere: idempotency_conflict, idempotency_key_reused, not_awaiting_confirmation,
not_cancellable, not_stuck (test_effects); invalid_signature, signature_expired, callback_replayed,
callback_conflict, not_awaiting_callback (test_async_callbacks); saga_definition_exists,
start_key_conflict (test_connector); invalid_connector, connector_in_use, unknown_connector
(test_admin); forbidden, session_tenant_mismatch, invalid_session_key, invalid_turn_handler
(test_turns); run_halted, run_cancelled (test_admin, once POST /v1/runs exists).
"""

from __future__ import annotations

import http.client
import json
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Iterator
from urllib.parse import urlsplit

import pytest

import reckon
from harness import Stack, database_url, eventually, make_client, unique

UUID = "0193a4c2-7c1e-7d55-9e55-3f1f3b0c2a11"


def code_of(fn: Callable[[], Any]) -> tuple[type, int, str, str]:
    with pytest.raises(reckon.APIError) as err:
        fn()
    e = err.value
    assert e.request_id and e.message
    return type(e), e.status, e.code, e.message


def test_client_provokable_codes(stack: Stack, client: reckon.Client, system: reckon.Client, connectors) -> None:
    cases: list[tuple[Callable[[], Any], type, int, str]] = [
        (lambda: client.enqueue(connectors["wsgi"], idempotency_key=unique("k"), max_attempts=5000),
         reckon.InvalidRequest, 400, "invalid_request"),
        (lambda: client.get_effect("not-a-uuid"), reckon.InvalidRequest, 400, "invalid_parameter"),
        (lambda: client.list_effects(state="pending"), reckon.InvalidRequest, 400, "invalid_state"),
        (lambda: client.list_effects(cursor="garbage"), reckon.InvalidRequest, 400, "invalid_cursor"),
        (lambda: client.enqueue(connectors["wsgi"], idempotency_key=unique("k"), request_key="x" * 300),
         reckon.InvalidRequest, 400, "invalid_idempotency_key"),
        (lambda: system.put_saga_definition(unique("bad"), [{"name": "a", "connector": "no.such", "undo": "none"}]),
         reckon.InvalidRequest, 400, "invalid_saga_definition"),
        (lambda: reckon.Client(stack.url).get_effect(UUID), reckon.Unauthorized, 401, "unauthenticated"),
        (lambda: reckon.Client(stack.url, "rk_bogus").get_effect(UUID), reckon.Unauthorized, 401, "invalid_token"),
        (lambda: system.get_effect(UUID), reckon.Forbidden, 403, "forbidden"),
        (lambda: client.get_effect(UUID), reckon.NotFound, 404, "not_found"),
        (lambda: client.enqueue(connectors["wsgi"], idempotency_key=unique("k"), args={"blob": "x" * (2 << 20)}),
         reckon.PayloadTooLarge, 413, "body_too_large"),
        (lambda: client.start_saga(unique("nope")), reckon.Unprocessable, 422, "unknown_saga_definition"),
    ]
    for call, cls, status, code in cases:
        got = code_of(call)
        assert got[:3] == (cls, status, code), (code, got)


def _raw(stack: Stack, method: str, path: str, body: bytes, ctype: str = "application/json") -> reckon.APIError:
    """A request no client method sends, read with the client's error mapping."""
    from reckon._transport import Response, Transport

    u = urlsplit(stack.url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
    conn.request(method, path, body=body, headers={"Authorization": f"Bearer {stack.token}", "Content-Type": ctype})
    r = conn.getresponse()
    resp = Response(r.status, {k.lower(): v for k, v in r.getheaders()}, json.loads(r.read() or b"null"))
    conn.close()
    return Transport._error(resp)


def test_codes_only_raw_requests_provoke(stack: Stack) -> None:
    e = _raw(stack, "POST", "/v1/effects", b"{not json")
    assert (type(e), e.code) == (reckon.InvalidRequest, "invalid_json")
    e = _raw(stack, "POST", "/v1/effects", b"connector=x", "text/plain")
    assert (type(e), e.code) == (reckon.UnsupportedMediaType, "unsupported_media_type")
    e = _raw(stack, "PATCH", "/v1/effects", b"{}")
    assert (type(e), e.code) == (reckon.MethodNotAllowed, "method_not_allowed")
    assert "GET" in e.headers.get("allow", "")


def test_resolve_effect_of_a_saga_held_by_a_stuck_effect(
        client: reckon.Client, system: reckon.Client, connectors: dict[str, str]) -> None:
    name = unique("stuck-saga")
    system.put_saga_definition(name, [{"name": "a", "connector": "bank.unsure", "undo": "none"}])
    saga = client.start_saga(name, input={"mode": "unsure"})
    stuck = eventually(lambda: (s := client.get_saga(saga["id"]))["state"] == "STUCK" and s, 30)
    with pytest.raises(reckon.Conflict) as err:
        client.resolve_saga(stuck["id"], "mark_compensated", "done by hand")
    assert err.value.code == "resolve_effect"
    client.resolve_effect(stuck["steps"][0]["effect_id"], "CONFIRMED", "it happened")
    assert client.wait_saga(saga["id"], timeout=30)["state"] == "COMPLETED"


def test_four_eyes(stack: Stack, client_b: reckon.Client, connectors, requests_log) -> None:
    _, url = stack.server("server-four-eyes", None, "-four-eyes")
    enqueuer = make_client(url, stack.token, requests_log)
    held = enqueuer.enqueue(connectors["wsgi"], idempotency_key=unique("4e"), require_confirmation=True)
    with pytest.raises(reckon.Conflict) as err:
        enqueuer.confirm_effect(held["id"], "my own")
    assert err.value.code == "four_eyes"
    assert client_b.confirm_effect(held["id"], "a second person")["confirmation"]["state"] == "CONFIRMED"


def test_schema_not_current_is_retried_after_retry_after(stack: Stack) -> None:
    name = "reckon_pytest_empty_" + unique("db").split("-")[1]
    subprocess.run(["psql", stack.pg_base, "-q", "-c", f'CREATE DATABASE "{name}"'], check=True, capture_output=True)
    try:
        env = dict(stack.env, DATABASE_URL=database_url(stack.pg_base, name))
        proc, url = stack.server("server-unmigrated", None, ready=False, env=env)
        seen: list[reckon.RequestInfo] = []
        c = reckon.Client(url, "rk_whatever", max_retries=1, max_retry_wait=5, on_request=seen.append)
        with pytest.raises(reckon.Unavailable) as err:
            c.get_effect(UUID)
        assert err.value.code == "schema_not_current" and err.value.retry_after is not None
        assert len(seen) == 2  # retried once, after Retry-After
        proc.stop()
    finally:
        subprocess.run(["psql", stack.pg_base, "-q", "-c", f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'],
                       capture_output=True)


class _Flaky(BaseHTTPRequestHandler):
    """Answers from a script: 'drop', 'sleep', or a status with Retry-After."""

    script: list[str] = []
    keys: list[str] = []
    protocol_version = "HTTP/1.1"  # keep-alive

    def _answer(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        type(self).keys.append(self.headers.get("Idempotency-Key", ""))
        step = type(self).script.pop(0) if type(self).script else "200"
        if step == "drop":
            self.connection.shutdown(2)
            return
        if step == "sleep":
            threading.Event().wait(2)
            return
        if step == "drip":  # a byte at a time: no read waits long, the whole answer does
            self.send_response(200)
            self.send_header("Content-Length", "50")
            self.end_headers()
            try:
                for _ in range(50):
                    self.wfile.write(b" ")
                    self.wfile.flush()
                    threading.Event().wait(0.1)
            except OSError:
                pass
            return
        status, _, retry = step.removesuffix("+close").partition("+")
        body = b'{"id":"x"}' if status == "200" else json.dumps(
            {"error": {"code": "busy", "message": "later", "request_id": "r-1"}}).encode()
        self.send_response(int(status))
        if retry:
            self.send_header("Retry-After", retry)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        if step.endswith("+close"):  # drop the kept-alive connection once idle, as servers do
            self.close_connection = True

    do_GET = do_POST = _answer

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture()
def flaky() -> Iterator[str]:
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Flaky)
    srv.daemon_threads = True
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    _Flaky.script, _Flaky.keys = [], []
    yield f"http://127.0.0.1:{srv.server_port}"
    srv.shutdown()
    srv.server_close()


def test_retry_after_and_safe_retries(flaky: str) -> None:
    c = reckon.Client(flaky, "t", max_retries=3, max_retry_wait=5, timeout=1)
    _Flaky.script = ["503+1", "429+0", "200"]
    assert c.get_effect(UUID) == {"id": "x"}
    assert len(_Flaky.keys) == 3

    _Flaky.script, _Flaky.keys = ["drop", "503+0", "200"], []
    c.enqueue("x", idempotency_key="k")
    assert len(_Flaky.keys) == 3 and len(set(_Flaky.keys)) == 1 and _Flaky.keys[0]  # one key: safe to resend

    _Flaky.script = ["429+60"]  # longer than max_retry_wait: not waited for
    with pytest.raises(reckon.RateLimited) as err:
        c.get_effect(UUID)
    assert err.value.retry_after == 60 and err.value.code == "busy" and err.value.request_id == "r-1"

    _Flaky.script, _Flaky.keys = ["503+0"] * 5, []
    with pytest.raises(reckon.Unavailable):
        c.get_effect(UUID)
    assert len(_Flaky.keys) == 4  # bounded: 1 + max_retries

    _Flaky.script, _Flaky.keys = ["sleep"] * 5, []
    with pytest.raises(reckon.TransportError):
        reckon.Client(flaky, "t", max_retries=1, timeout=0.3).get_effect(UUID)
    assert len(_Flaky.keys) == 2

    _Flaky.script, _Flaky.keys = ["410"], []  # events_expired: raised at once, not reconnected
    with pytest.raises(reckon.Gone):
        next(c.events(after="1-1"))
    assert len(_Flaky.keys) == 1

    _Flaky.script, _Flaky.keys = ["drip"] * 5, []
    with pytest.raises(reckon.TransportError) as terr:
        reckon.Client(flaky, "t", max_retries=0, timeout=1).get_effect(UUID)
    assert "timed out" in str(terr.value) and len(_Flaky.keys) == 1


def test_bad_arguments_are_refused_before_sending() -> None:
    with pytest.raises(ValueError):
        reckon.Client("ftp://x")
    with pytest.raises(ValueError):
        reckon.Client("http://x", "a\nb")
    with pytest.raises(ValueError):
        reckon.Client("http://x", timeout=0)
    c = reckon.Client("http://127.0.0.1:9", "t")
    with pytest.raises(ValueError):
        c.get_effect("")
    with pytest.raises(ValueError):
        c.callback("c", result=1, error="both")
    with pytest.raises(ValueError):
        c.callback("c", result=1, effect_id=UUID)
    with pytest.raises(ValueError, match="not JSON"):
        c.enqueue("x", idempotency_key="k", args={"when": object()})
    with pytest.raises(ValueError, match="not JSON"):
        c.enqueue("x", idempotency_key="k", args={"n": float("nan")})


def test_keep_alive_and_stale_connections(flaky: str) -> None:
    with reckon.Client(flaky, "t", max_retries=0) as c:
        _Flaky.script = ["200", "200+close", "200", "200"]
        for _ in range(4):  # the third finds its kept-alive connection closed and opens another
            assert c.get_effect(UUID) == {"id": "x"}
        assert len(_Flaky.keys) == 4
        assert len(c._t._idle) == 1
    assert c._t._idle == []
