"""Sessions, turns and the HTTP turn handler (reckon.connector.TurnHandler) behind a real reactor."""

from __future__ import annotations

from typing import Any, Iterator

import pytest

import reckon
from harness import ASGIUpstream, Bank, WSGIUpstream, eventually, unique
from reckon.connector import Rejected, Turn, TurnAnswer, TurnArtifact, TurnEffect, TurnHandler

seen: list[Turn] = []


def decide(turn: Turn) -> TurnAnswer:
    seen.append(turn)
    texts = [m["content"].get("text", "") for m in turn.messages]
    if any("reject" in t for t in texts):
        raise Rejected("cannot serve this")
    return TurnAnswer(effects=[TurnEffect("bank.wsgi", decision=0, call_index=0, args={"texts": texts})],
                      artifacts=[TurnArtifact("plan", {"texts": texts}, input_fingerprint="fp-1", policy="NEVER")])


@pytest.fixture(scope="module")
def turn_handlers() -> Iterator[dict[str, Any]]:
    app = TurnHandler(decide)
    w, a = WSGIUpstream(app.wsgi), ASGIUpstream(app.asgi)
    yield {"wsgi": w, "asgi": a}
    w.close()
    a.close()


@pytest.mark.parametrize("kind", ["asgi", "wsgi"])
def test_turn_handler_commits_effects(client: reckon.Client, admin: reckon.Client, connectors, bank: Bank,
                                      turn_handlers: dict[str, Any], kind: str) -> None:
    url = turn_handlers[kind].url + "/turns"
    handler = admin.put_turn_handler("acme", url, timeout_ms=5000)
    assert handler["url"] == url and client.get_turn_handler("acme")["url"] == url
    session = f"acme:bot:{unique('user')}:email"
    posted = client.post_message(session, "m-1", content={"text": "refund order 9"}, at="2026-11-22T03:00:00Z")
    assert posted["deduplicated"] is False and posted["turn"]["status"] == "ACCUMULATING"
    again = client.post_message(session, "m-1", content={"text": "refund order 9"})
    assert again["deduplicated"] is True
    turns = eventually(lambda: [t for t in client.list_turns(session, limit=10) if t["status"] == "COMPLETE"], 30)
    group = turns[0]["turn_group"]
    key = f"{group}/d-0/bank.wsgi/0"
    effect = eventually(lambda: [e for e in client.iter_effects(connector="bank.wsgi") if e["idempotency_key"] == key])
    assert client.wait(effect[0]["id"])["result"]["args"] == {"texts": ["refund order 9"]}
    turn = next(t for t in seen if t.session_key == session)
    assert turn.tenant == "acme" and turn.channel == "email" and turn.attempt == 1
    assert turn.messages[0]["message_id"] == "m-1"

    rejected = f"acme:bot:{unique('user')}:email"
    client.post_message(rejected, "m-1", content={"text": "please reject"})
    failed = eventually(lambda: [t for t in client.list_turns(rejected) if t["status"] == "FAILED"], 30)
    assert "422" in failed[0]["status_reason"] and "cannot serve this" in failed[0]["status_reason"]


def test_turn_handler_and_session_refusals(client: reckon.Client, other: reckon.Client, system: reckon.Client,
                                           admin: reckon.Client) -> None:
    with pytest.raises(reckon.Forbidden) as err:
        client.put_turn_handler("acme", "http://127.0.0.1:1/turns")
    assert err.value.code == "forbidden"
    with pytest.raises(reckon.InvalidRequest) as err2:
        admin.put_turn_handler("acme", "ftp://example.com/turns")
    assert err2.value.code == "invalid_turn_handler"
    with pytest.raises(reckon.NotFound):
        other.get_turn_handler("acme")
    with pytest.raises(reckon.Forbidden) as err:
        client.post_message("globex:bot:u:web", "m-1", content={})
    assert err.value.code == "session_tenant_mismatch"
    with pytest.raises(reckon.InvalidRequest) as err2:
        client.post_message("acme:bot:web", "m-1")
    assert err2.value.code == "invalid_session_key"
    system.put_turn_handler("globex", "http://127.0.0.1:9/turns", timeout_ms=1000)
    assert system.delete_turn_handler("globex") == {"deleted": "globex"}
    with pytest.raises(reckon.NotFound):
        system.get_turn_handler("globex")


def test_turn_handler_checks_what_reckon_sends(turn_handlers: dict[str, Any]) -> None:
    import http.client
    import json
    from urllib.parse import urlsplit

    u = urlsplit(turn_handlers["wsgi"].url)
    tid = "0193a4c2-7c1e-7d55-9e55-3f1f3b0c2a11"
    body = {"session_key": "a:b:c:d", "tenant": "a", "channel": "d", "turn_id": tid, "turn_group": tid, "seq": 1,
            "attempt": 1, "messages": [], "artifacts": []}
    for headers, b, want in [
        ({"Reckon-Turn-Id": tid, "Reckon-Turn-Group": tid, "Reckon-Attempt": "1"}, body, 200),
        ({"Reckon-Turn-Id": tid, "Reckon-Turn-Group": tid, "Reckon-Attempt": "2"}, body, 400),
        ({"Reckon-Turn-Group": tid, "Reckon-Attempt": "1"}, body, 400),
        ({"Reckon-Turn-Id": tid, "Reckon-Turn-Group": tid, "Reckon-Attempt": "1"}, {**body, "x": 1}, 400),
    ]:
        conn = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
        conn.request("POST", "/turns", body=json.dumps(b), headers={**headers, "Content-Type": "application/json"})
        resp = conn.getresponse()
        data = json.loads(resp.read())
        assert resp.status == want, data
        if want == 200:
            assert data["effects"][0] == {"connector": "bank.wsgi", "decision": 0, "call_index": 0,
                                          "args": {"texts": []}}
            assert data["artifacts"][0]["policy"] == "NEVER"
        conn.close()
