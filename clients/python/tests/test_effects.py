"""Effects against the real server and reactor: enqueue, dedup, history, pages, wait, decisions."""

from __future__ import annotations

from typing import Any

import pytest

import reckon
from harness import Bank, eventually, unique


def test_enqueue_dedup_get_history(client: reckon.Client, connectors: dict[str, str], bank: Bank) -> None:
    key = unique("order")
    e = client.enqueue(connectors["wsgi"], idempotency_key=key, args={"amount": 5}, business_key="acc:5",
                       run_id=unique("run"), max_attempts=3)
    assert e["state"] == "PENDING" and e["deduplicated"] is False and e["idempotency_key"] == key
    again = client.enqueue(connectors["wsgi"], idempotency_key=key, args={"amount": 5}, business_key="acc:5",
                           run_id=e["run_id"], max_attempts=3)
    assert again["id"] == e["id"] and again["deduplicated"] is True
    done = client.wait(e["id"], timeout=30)
    assert done["state"] == "CONFIRMED"
    assert done["result"]["done"] == key and bank.performs[key] == 1
    states = [h["to"] for h in client.history(e["id"])]
    assert states[0] == "PENDING" and states[-1] == "CONFIRMED"
    with pytest.raises(reckon.Conflict) as err:
        client.enqueue(connectors["wsgi"], idempotency_key=key, args={"amount": 6})
    assert err.value.code == "idempotency_conflict" and err.value.status == 409 and err.value.request_id


def test_request_key_replays_the_first_answer(client: reckon.Client, connectors: dict[str, str]) -> None:
    rk, key = unique("req"), unique("k")
    first = client.enqueue(connectors["wsgi"], idempotency_key=key, request_key=rk)
    replay = client._t.request(reckon.client.route("enqueueEffect"), body={"connector": connectors["wsgi"],
                               "idempotency_key": key}, idempotency_key=rk)
    assert replay.replayed and replay.data["id"] == first["id"] and replay.status == 201
    with pytest.raises(reckon.Unprocessable) as err:
        client.enqueue(connectors["wsgi"], idempotency_key=unique("k"), request_key=rk)
    assert err.value.code == "idempotency_key_reused"


def test_position_key(client: reckon.Client, connectors: dict[str, str]) -> None:
    group = unique("g")
    e = client.enqueue(connectors["wsgi"], position=reckon.Position(group, 2, 1), turn_group=group)
    assert e["idempotency_key"] == f"{group}/d-2/{connectors['wsgi']}/1"
    with pytest.raises(ValueError):
        client.enqueue(connectors["wsgi"])


def test_list_pages_walk_every_effect_once(client: reckon.Client, connectors: dict[str, str]) -> None:
    run = unique("run")
    ids = {client.enqueue(connectors["wsgi"], idempotency_key=unique("p"), run_id=run)["id"] for _ in range(7)}
    page = client.list_effects(run=run, limit=3)
    assert len(page["effects"]) == 3 and page["next_cursor"]
    walked = [e["id"] for e in client.iter_effects(run=run, page_size=3)]
    assert len(walked) == 7 and set(walked) == ids
    assert [e["id"] for e in client.iter_effects(run=run, page_size=1000)] == walked  # newest first, stable
    eventually(lambda: client.get_run(run)["settled"])
    confirmed = client.list_effects(run=run, state="CONFIRMED", connector=connectors["wsgi"])
    assert {e["id"] for e in confirmed["effects"]} == ids


def test_wait_by_polling(client: reckon.Client, connectors: dict[str, str]) -> None:
    e = client.enqueue(connectors["asgi"], idempotency_key=unique("poll"))
    done = client.wait(e["id"], timeout=30, events=False)
    assert done["state"] == "CONFIRMED"
    with pytest.raises(ValueError):
        client.wait(e["id"], timeout=0)


def test_wait_times_out_on_a_held_effect(client: reckon.Client, connectors: dict[str, str]) -> None:
    e = client.enqueue(connectors["wsgi"], idempotency_key=unique("held"), require_confirmation=True)
    with pytest.raises(reckon.WaitTimeout) as err:
        client.wait(e["id"], timeout=1)
    assert err.value.last["id"] == e["id"] and err.value.last["state"] == "PENDING"


def test_confirm_and_decline(client: reckon.Client, client_b: reckon.Client, connectors: dict[str, str],
                             bank: Bank) -> None:
    held = client.enqueue(connectors["wsgi"], idempotency_key=unique("held"), require_confirmation=True,
                          confirmation_ttl_ms=600000)
    assert held["confirmation"]["state"] == "AWAITING"
    confirmed = client_b.confirm_effect(held["id"], "looked right", actor="bob")
    assert confirmed["confirmation"]["state"] == "CONFIRMED" and confirmed["confirmation"]["reason"] == "looked right"
    assert client.wait(held["id"])["state"] == "CONFIRMED"
    with pytest.raises(reckon.Conflict) as err:
        client.confirm_effect(held["id"], "again")
    assert err.value.code == "not_awaiting_confirmation"

    other = client.enqueue(connectors["wsgi"], idempotency_key=unique("held"), require_confirmation=True)
    declined = client.decline_effect(other["id"], "not today", actor="bob")
    assert declined["state"] == "FAILED" and "not today" in declined["error"]
    assert other["idempotency_key"] not in bank.performed


def test_cancel_and_resolve(client: reckon.Client, connectors: dict[str, str], bank: Bank) -> None:
    held = client.enqueue(connectors["wsgi"], idempotency_key=unique("c"), require_confirmation=True)
    cancelled = client.cancel_effect(held["id"], "changed my mind", actor="alice")
    assert cancelled["state"] == "FAILED"
    with pytest.raises(reckon.Conflict) as err:
        client.cancel_effect(held["id"], "again")
    assert err.value.code == "not_cancellable"
    with pytest.raises(reckon.Conflict) as err:
        client.resolve_effect(held["id"], "CONFIRMED", "no")
    assert err.value.code == "not_stuck"

    # performed, then the answer is lost, and the status check cannot tell: STUCK for an operator
    e = client.enqueue("bank.unsure", idempotency_key=unique("u"), args={"mode": "unsure"})
    stuck = client.wait(e["id"], timeout=30)
    assert stuck["state"] == "STUCK"
    resolved = client.resolve_effect(e["id"], "CONFIRMED", "the bank statement shows it", actor="alice")
    assert resolved["state"] == "CONFIRMED"
    assert bank.performs[e["idempotency_key"]] == 1
    assert any(h.get("reason") == "the bank statement shows it" for h in client.history(e["id"]))


def test_wrong_tenant_sees_nothing(client: reckon.Client, other: reckon.Client, connectors: dict[str, str]) -> None:
    e = client.enqueue(connectors["wsgi"], idempotency_key=unique("t"))
    with pytest.raises(reckon.NotFound) as err:
        other.get_effect(e["id"])
    assert err.value.code == "not_found"


def _ids(page: dict[str, Any]) -> list[str]:
    return [e["id"] for e in page["effects"]]


def test_one_client_shared_by_threads(client: reckon.Client, connectors: dict[str, str]) -> None:
    from concurrent.futures import ThreadPoolExecutor

    run = unique("load")
    keys = [unique("l") for _ in range(200)]
    with ThreadPoolExecutor(16) as pool:
        first = list(pool.map(lambda k: client.enqueue(connectors["wsgi"], idempotency_key=k, run_id=run), keys))
        again = list(pool.map(lambda k: client.enqueue(connectors["wsgi"], idempotency_key=k, run_id=run), keys))
    assert len({e["id"] for e in first}) == 200 and not any(e["deduplicated"] for e in first)
    assert [e["id"] for e in again] == [e["id"] for e in first] and all(e["deduplicated"] for e in again)
    assert client.wait_run(run, timeout=60)["effects"] == {"CONFIRMED": 200}


def test_redrive(client: reckon.Client, connectors: dict[str, str], bank: Bank) -> None:
    key = unique("rd")
    e = client.enqueue(connectors["wsgi"], idempotency_key=key, args={"mode": "reject_once"})
    failed = client.wait(e["id"], timeout=30)
    assert failed["state"] == "FAILED" and "outage" in failed["error"]
    redriven = client.redrive_effect(e["id"], "outage over", actor="alice")
    assert redriven["state"] == "PENDING" and redriven["attempts"] == 0 and redriven["idempotency_key"] == key
    done = client.wait(e["id"], timeout=30)
    assert done["state"] == "CONFIRMED" and bank.performs[key] == 1
    with pytest.raises(reckon.Conflict) as err:
        client.redrive_effect(e["id"], "again")
    assert err.value.code == "not_failed"

    held = client.enqueue(connectors["wsgi"], idempotency_key=unique("rd"), require_confirmation=True)
    client.decline_effect(held["id"], "no")
    with pytest.raises(reckon.Conflict) as err:
        client.redrive_effect(held["id"], "again")
    assert err.value.code == "redrive_declined"


def test_ordering_key_holds_the_next_effect(client: reckon.Client, connectors: dict[str, str], bank: Bank) -> None:
    key = unique("order")
    first = client.enqueue(connectors["wsgi"], idempotency_key=unique("o"), ordering_key=key, require_confirmation=True)
    second = client.enqueue(connectors["wsgi"], idempotency_key=unique("o"), ordering_key=key)
    assert first["ordering_key"] == key and second["ordering_key"] == key
    assert client.get_effect(second["id"])["held_by"] == first["id"]
    assert "held_by" not in client.get_effect(first["id"])
    client.decline_effect(first["id"], "not this one")
    assert client.wait(second["id"], timeout=30)["state"] == "CONFIRMED"
    assert "held_by" not in client.get_effect(second["id"])
