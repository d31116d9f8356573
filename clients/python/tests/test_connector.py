"""reckon.connector behind a real reactor, served by wsgiref (WSGI) and by an asyncio server (ASGI)."""

from __future__ import annotations

import pytest

import reckon
from harness import Bank, eventually, unique

KINDS = ["wsgi", "asgi"]


def states(client: reckon.Client, effect_id: str) -> list[str]:
    return [h["to"] for h in client.history(effect_id)]


@pytest.mark.parametrize("kind", KINDS)
def test_success(client: reckon.Client, connectors: dict[str, str], bank: Bank, kind: str) -> None:
    key = unique("ok")
    e = client.enqueue(connectors[kind], idempotency_key=key, args={"amount": 3}, business_key="b-3")
    done = client.wait(e["id"], timeout=30)
    assert done["state"] == "CONFIRMED" and done["result"] == bank.performed[key]
    assert done["result"]["args"] == {"amount": 3}


@pytest.mark.parametrize("kind", KINDS)
def test_rejection_fails_the_effect(client: reckon.Client, connectors: dict[str, str], bank: Bank, kind: str) -> None:
    e = client.enqueue(connectors[kind], idempotency_key=unique("no"), args={"mode": "reject", "why": "closed"})
    done = client.wait(e["id"], timeout=30)
    assert done["state"] == "FAILED" and "refused: closed" in done["error"]
    assert e["idempotency_key"] not in bank.performed


@pytest.mark.parametrize("kind", KINDS)
def test_retry_after_then_success(client: reckon.Client, connectors: dict[str, str], bank: Bank, kind: str) -> None:
    key = unique("busy")
    e = client.enqueue(connectors[kind], idempotency_key=key, args={"mode": "retry"})
    done = client.wait(e["id"], timeout=30)
    assert done["state"] == "CONFIRMED" and done["attempts"] == 2
    assert [a for (k, key_, a) in bank.calls if key_ == key and k == "dispatch"] == [1, 2]
    assert bank.performs[key] == 1


@pytest.mark.parametrize("kind", KINDS)
def test_dropped_connection_is_reconciled_not_repeated(client: reckon.Client, connectors: dict[str, str], bank: Bank,
                                                       kind: str) -> None:
    key = unique("drop")
    e = client.enqueue(connectors[kind], idempotency_key=key, args={"mode": "drop"})
    done = client.wait(e["id"], timeout=30)
    assert done["state"] == "CONFIRMED"
    assert "UNKNOWN" in states(client, e["id"])
    assert bank.performs[key] == 1  # performed once: the status check said present
    assert ("status", key, 1) in [(k, key_, 1) for (k, key_, _) in bank.calls if key_ == key]
    assert done["result"] == bank.performed[key]


@pytest.mark.parametrize("kind", KINDS)
def test_saga_compensates_through_the_compensate_route(client: reckon.Client, system: reckon.Client,
                                                       connectors: dict[str, str], bank: Bank, kind: str) -> None:
    name = unique(f"transfer-{kind}")
    conn = connectors[kind]
    definition = system.put_saga_definition(name, [
        {"name": "debit", "connector": conn, "undo": "connector"},
        {"name": "credit", "connector": conn, "undo": "none"},
    ], compensation_attempts=3)
    assert definition["name"] == name
    again = system.put_saga_definition(name, [
        {"name": "debit", "connector": conn, "undo": "connector"},
        {"name": "credit", "connector": conn, "undo": "none"},
    ], compensation_attempts=3)
    assert again["name"] == name
    with pytest.raises(reckon.Conflict) as err:
        system.put_saga_definition(name, [{"name": "x", "connector": conn, "undo": "none"}])
    assert err.value.code == "saga_definition_exists"
    assert system.get_saga_definition(name)["steps"][0]["name"] == "debit"
    assert name in [d["name"] for d in client.list_saga_definitions()]

    start_key = unique("sk")
    saga = client.start_saga(name, input={"amount": 70, "fail_step": 1}, start_key=start_key)
    assert saga["deduplicated"] is False
    assert client.start_saga(name, input={"amount": 70, "fail_step": 1}, start_key=start_key)["id"] == saga["id"]
    with pytest.raises(reckon.Conflict) as err:
        client.start_saga(name, input={"amount": 71}, start_key=start_key)
    assert err.value.code == "start_key_conflict"

    done = client.wait_saga(saga["id"], timeout=40)
    assert done["state"] == "COMPENSATED", done
    debit = done["steps"][0]
    assert debit["state"] == "COMPENSATED"
    assert bank.compensated[debit["effect_id"]] == debit["result"]  # the compensation got the original
    assert done["steps"][1]["state"] == "FAILED"
    assert saga["id"] in [s["id"] for s in client.iter_sagas(definition=name, state="COMPENSATED", page_size=1)]
    assert client.list_sagas(definition=name, limit=5)["sagas"][0]["id"] == saga["id"]
    with pytest.raises(reckon.Conflict) as err:
        client.resolve_saga(saga["id"], "retry_compensation", "nothing is stuck", actor="alice")
    assert err.value.code == "not_stuck"


def test_protocol_violations_answer_400_and_reach_no_handler(upstreams: dict[str, object], bank: Bank) -> None:
    import http.client
    import json
    from urllib.parse import urlsplit

    for kind in KINDS:
        url = urlsplit(getattr(upstreams[kind], "url"))
        before = len(bank.calls)
        good_id = "0193a4c2-7c1e-7d55-9e55-3f1f3b0c2a11"
        body = {"effect_id": good_id, "idempotency_key": "k", "business_key": None, "args": {}, "attempt": 1,
                "correlation_id": good_id}
        headers = {"Idempotency-Key": "k", "Reckon-Effect-Id": good_id, "Reckon-Attempt": "1",
                   "Content-Type": "application/json"}
        cases = [
            ("/dispatch", {**headers, "Idempotency-Key": "other"}, json.dumps(body), 400),
            ("/dispatch", {k: v for k, v in headers.items() if k != "Reckon-Attempt"}, json.dumps(body), 400),
            ("/dispatch", headers, "{not json", 400),
            ("/dispatch", headers, json.dumps({**body, "extra": 1}), 400),
            ("/compensate", headers, json.dumps(body), 400),  # no original
            ("/status", headers, json.dumps({**body, "args": []}), 400),
            ("/nowhere", headers, json.dumps(body), 404),
        ]
        for path, h, b, want in cases:
            conn = http.client.HTTPConnection(url.hostname, url.port, timeout=10)
            conn.request("POST", path, body=b, headers=h)
            resp = conn.getresponse()
            assert resp.status == want, (kind, path, resp.status, resp.read())
            resp.read()
            conn.close()
        conn = http.client.HTTPConnection(url.hostname, url.port, timeout=10)
        conn.request("GET", "/dispatch")
        assert conn.getresponse().status == 405
        conn.close()
        assert len(bank.calls) == before


@pytest.mark.parametrize("kind", KINDS)
def test_duplicate_is_confirmed_and_the_extra_compensated(client: reckon.Client, connectors: dict[str, str],
                                                          bank: Bank, kind: str) -> None:
    key = unique("dup")
    e = client.enqueue(connectors[kind], idempotency_key=key, args={"mode": "dup"})
    done = client.wait(e["id"], timeout=30)
    assert done["state"] == "CONFIRMED" and done["result"] == bank.performed[key]
    eventually(lambda: e["id"] in bank.compensated, 30)  # one compensation for the extra
    comp = eventually(lambda: [x for x in client.iter_effects(connector=connectors[kind])
                               if x.get("compensates_id") == e["id"]])
    assert client.wait(comp[0]["id"])["state"] == "CONFIRMED"


def test_hard_timeout_cancels_upstream(client: reckon.Client, connectors: dict[str, str], bank: Bank) -> None:
    effects = [client.enqueue(connectors[kind], idempotency_key=unique("slow"), args={"mode": "accept"},
                              async_timeout_ms=1000, async_hard_timeout=True) for kind in KINDS]
    for e in effects:  # both at once: the deadline takes a few seconds
        done = client.wait(e["id"], timeout=30)
        assert done["state"] == "FAILED" and "cancel" in done["error"]
        assert e["id"] in bank.cancelled


def test_answers_of_each_handler_outcome() -> None:
    """Every handler outcome, over HTTP, from the WSGI and the ASGI app (sync and async handlers)."""
    import http.client
    import json
    from urllib.parse import urlsplit

    from harness import ASGIUpstream, WSGIUpstream
    from reckon.connector import Accepted, Connector, Duplicate, Inconclusive, Rejected, Retryable

    def dispatch(call: reckon.connector.Call) -> object:
        mode = call.args["mode"]
        if mode == "accept":
            raise Accepted("their-job-7")
        if mode == "retry":
            raise Retryable("slow down", after=4.2)
        if mode == "reject":
            raise Rejected("gone", status=410)
        if mode == "boom":
            raise KeyError("bug")
        if mode == "unjson":
            return {"when": object()}
        return {"ok": call.attempt, "secret_seen": call.callback_secret is not None}

    async def status(call: reckon.connector.Call) -> reckon.connector.Status:
        return Duplicate(3, {"first": 1}) if call.args["mode"] == "dup" else Inconclusive()

    def cancel(call: reckon.connector.Call) -> bool:
        return call.args["mode"] == "stoppable"

    app = Connector(dispatch=dispatch, status=status, cancel=cancel)  # type: ignore[arg-type]
    eid = "0193a4c2-7c1e-7d55-9e55-3f1f3b0c2a11"

    def post(url: str, path: str, mode: str, body_extra: bytes = b"") -> tuple[int, dict[str, str], object]:
        body = {"effect_id": eid, "idempotency_key": "k", "business_key": None, "args": {"mode": mode},
                "attempt": 2, "correlation_id": "run-1:" + eid}
        u = urlsplit(url)
        conn = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
        conn.request("POST", path, body=json.dumps(body).encode() + body_extra, headers={
            "Idempotency-Key": "k", "Reckon-Effect-Id": eid, "Reckon-Attempt": "2",
            "Reckon-Callback-Secret": "a" * 64, "Content-Type": "application/json"})
        r = conn.getresponse()
        raw = r.read()
        conn.close()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, json.loads(raw) if raw else None

    def oversize(url: str) -> int:
        import socket as sk

        u = urlsplit(url)
        with sk.create_connection((u.hostname, u.port), timeout=10) as c:
            c.sendall(f"POST /dispatch HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                      f"Content-Length: {reckon.connector.MAX_BODY_BYTES + 1}\r\n\r\n{{".encode())
            return int(c.recv(4096).split(b" ", 2)[1])

    asgi = ASGIUpstream(app.asgi)
    wsgi = WSGIUpstream(app.wsgi)
    try:
        for up, async_ok in ((asgi, True), (wsgi, False)):
            assert post(up.url, "/dispatch", "ok")[::2] == (200, {"ok": 2, "secret_seen": True})
            assert post(up.url, "/dispatch", "accept")[::2] == (202, {"correlation_id": "their-job-7"})
            status, headers, _ = post(up.url, "/dispatch", "retry")
            assert status == 429 and headers["retry-after"] == "5"
            assert post(up.url, "/dispatch", "reject")[::2] == (410, {"error": "gone"})
            assert post(up.url, "/dispatch", "boom")[0] == 500
            assert post(up.url, "/dispatch", "unjson")[0] == 500
            assert post(up.url, "/cancel", "stoppable")[0] == 200
            assert post(up.url, "/cancel", "too-late")[0] == 409
            assert post(up.url, "/compensate", "ok")[0] == 404  # no compensate handler
            assert oversize(up.url) == 413  # refused on its Content-Length, before reading it
            if async_ok:
                want = {"status": "duplicate", "count": 3, "result": {"first": 1}}
                assert post(up.url, "/status", "dup")[::2] == (200, want)
                assert post(up.url, "/status", "x")[::2] == (200, {"status": "inconclusive"})
            else:  # an async handler needs the ASGI app: inconclusive (500)
                assert post(up.url, "/status", "dup")[0] == 500
    finally:
        asgi.close()
        wsgi.close()
    with pytest.raises(ValueError):
        Rejected("x", status=429)
    with pytest.raises(ValueError):
        Duplicate(1)
