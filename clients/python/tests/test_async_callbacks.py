"""Accepted (202) effects settled by callbacks: signed with the callback secret, or with a token."""

from __future__ import annotations

import http.client
import json
import time
from urllib.parse import quote, urlsplit

import pytest

import reckon
from harness import Bank, eventually, unique


def accepted(client: reckon.Client, bank: Bank, connector: str) -> tuple[dict, reckon.connector.Call]:
    e = client.enqueue(connector, idempotency_key=unique("acc"), args={"mode": "accept"}, run_id=unique("run"),
                       async_timeout_ms=600000)
    call = eventually(lambda: bank.accepted.get(e["id"]))
    eventually(lambda: any(h["to"] == "PENDING" and h.get("reason", "").startswith("accepted")
                           or "accepted" in (h.get("reason") or "") for h in client.history(e["id"])), timeout=10)
    return e, call


def test_signed_callback_settles_and_forgeries_are_refused(stack, client: reckon.Client, connectors, bank) -> None:
    e, call = accepted(client, bank, connectors["wsgi"])
    assert call.callback_secret and len(call.callback_secret) == 64
    assert call.correlation_id.endswith(e["id"])
    upstream = reckon.Client(stack.url)  # no token: the signature authenticates

    with pytest.raises(reckon.Unauthorized) as err:  # forged: another secret
        upstream.callback(call.correlation_id, result={"pages": 1}, effect_id=e["id"], secret="0" * 64)
    assert err.value.code == "invalid_signature"

    done = upstream.callback(call.correlation_id, result={"pages": 12}, effect_id=e["id"], secret=call.callback_secret)
    assert done["state"] == "CONFIRMED" and done["result"] == {"pages": 12}
    # a repeat of the same outcome, signed afresh, is success (webhooks come more than once)
    again = upstream.callback(call.correlation_id, result={"pages": 12}, effect_id=e["id"],
                              secret=call.callback_secret)
    assert again["state"] == "CONFIRMED"
    with pytest.raises(reckon.Conflict) as err:
        upstream.callback(call.correlation_id, error="it failed", effect_id=e["id"], secret=call.callback_secret)
    assert err.value.code == "callback_conflict"

    # the exact same signed request twice: the second is a replay
    body = json.dumps({"result": {"pages": 12}}).encode()
    sig = reckon.sign(call.callback_secret, body)
    codes = []
    for _ in range(2):
        codes.append(_raw_callback(stack.url, call.correlation_id, body, e["id"], sig))
    assert codes[0][0] == 200 and codes[1] == (409, "callback_replayed")
    # an old signature
    old = reckon.sign(call.callback_secret, body, int(time.time()) - 3600)
    assert _raw_callback(stack.url, call.correlation_id, body, e["id"], old) == (401, "signature_expired")


def _raw_callback(base: str, correlation_id: str, body: bytes, effect_id: str, signature: str) -> tuple[int, str]:
    u = urlsplit(base)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
    conn.request("POST", "/v1/callbacks/" + quote(correlation_id, safe=""), body=body, headers={
        "Content-Type": "application/json", "Reckon-Effect-Id": effect_id, "Reckon-Signature": signature})
    resp = conn.getresponse()
    data = json.loads(resp.read() or b"{}")
    conn.close()
    return resp.status, (data.get("error") or {}).get("code", "")


def test_token_callback_and_the_run_gate(client: reckon.Client, other: reckon.Client, connectors, bank) -> None:
    e, call = accepted(client, bank, connectors["asgi"])
    run = client.get_run(e["run_id"])
    assert run["settled"] is False and run["unresolved"] == 1
    with pytest.raises(reckon.NotFound):
        other.callback(call.correlation_id, error="not yours")
    done = client.callback(call.correlation_id, error="printer on fire")
    assert done["state"] == "FAILED" and done["error"] == "printer on fire"
    gate = client.wait_run(e["run_id"], timeout=10)
    assert gate["settled"] is True and gate["effects"] == {"FAILED": 1}
    with pytest.raises(ValueError):
        client.callback(call.correlation_id)
    with pytest.raises(reckon.NotFound) as err:
        client.callback("no-such-correlation", result=None)
    assert err.value.code == "not_found"


def test_callback_for_an_effect_awaiting_none(client: reckon.Client, connectors) -> None:
    held = client.enqueue(connectors["wsgi"], idempotency_key=unique("plain"), require_confirmation=True)
    with pytest.raises(reckon.Conflict) as err:
        client.callback(held["id"], result={"x": 1})
    assert err.value.code == "not_awaiting_callback"
    assert client.get_effect(held["id"])["state"] == "PENDING"


def test_callback_for_a_stuck_effect(client: reckon.Client, connectors, bank: Bank) -> None:
    # accepted, its deadline passes (UNKNOWN), and the status check cannot tell: STUCK
    e = client.enqueue("bank.unsure", idempotency_key=unique("late"), args={"mode": "accept", "unsure": True},
                       async_timeout_ms=1000)
    call = eventually(lambda: bank.accepted.get(e["id"]))
    assert client.wait(e["id"], timeout=30)["state"] == "STUCK"
    with pytest.raises(reckon.Conflict) as err:
        client.callback(call.correlation_id, result={"late": True})
    assert err.value.code == "effect_stuck"
    assert any("callback" in (h.get("actor") or "") or "callback" in (h.get("reason") or "")
               for h in client.history(e["id"]))
