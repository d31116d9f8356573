"""The event stream: order, filters, and resuming with Last-Event-ID across a server SIGKILL."""

from __future__ import annotations

import asyncio
import signal
import threading
import time
from urllib.parse import urlsplit

import pytest

import reckon
from harness import Stack, make_client, unique


def pos(event_id: str) -> tuple[int, int]:
    xid, seq = event_id.split("-")
    return int(xid), int(seq)


def test_stream_resumes_across_a_server_sigkill(stack: Stack, client: reckon.Client, connectors, requests_log) -> None:
    proc, url = stack.server("server-killed")
    port = urlsplit(url).port
    watcher = make_client(url, stack.token, requests_log)
    a = client.enqueue(connectors["wsgi"], idempotency_key=unique("ev-a"))
    seen: list[reckon.Event] = []
    with watcher.events(patterns=["tool.*", "effect.dispatched"], after="0", reconnect_for=30) as stream:
        for ev in stream:
            seen.append(ev)
            if ev.effect_id == a["id"] and ev.type == "tool.executed":
                break
        proc.stop(signal.SIGKILL)
        b = client.enqueue(connectors["wsgi"], idempotency_key=unique("ev-b"))
        assert client.wait(b["id"])["state"] == "CONFIRMED"

        def restart() -> None:
            time.sleep(1.0)
            stack.server("server-killed", port)

        t = threading.Thread(target=restart)
        t.start()
        for ev in stream:
            seen.append(ev)
            if ev.effect_id == b["id"] and ev.type == "tool.executed":
                break
        t.join()
        assert stream.reconnects >= 1
    ids = [ev.id for ev in seen]
    assert len(ids) == len(set(ids)), "an event came twice"
    assert [pos(i) for i in ids] == sorted(pos(i) for i in ids), "events out of order"
    types_b = [ev.type for ev in seen if ev.effect_id == b["id"]]
    assert "tool.authorized" in types_b and "tool.executed" in types_b  # written while the server was dead
    assert all(ev.tenant == "acme" for ev in seen)
    # a later stream resumes from the last id without repeating it
    with watcher.events(last_event_id=ids[-1], patterns=["tool.*"], read_timeout=3, reconnect_for=1) as later:
        c = client.enqueue(connectors["wsgi"], idempotency_key=unique("ev-c"))
        first = next(ev for ev in later if ev.effect_id == c["id"])
        assert pos(first.id) > pos(ids[-1])


def test_stream_refusals(client: reckon.Client, system: reckon.Client) -> None:
    with pytest.raises(reckon.Forbidden) as err:
        next(client.events(tenant="globex"))
    assert err.value.code == "forbidden"
    with pytest.raises(reckon.InvalidRequest) as err2:
        next(client.events(patterns=["NOT A PATTERN"]))
    assert err2.value.code == "invalid_parameter"
    with pytest.raises(ValueError):
        client.events(patterns="tool.*")
    # a system token reads one tenant's events
    stream = system.events(tenant="acme", after="0", patterns=["tool.*"])
    assert next(stream).tenant == "acme"
    stream.close()


def test_async_client(stack: Stack, connectors, requests_log) -> None:
    async def main() -> None:
        async with reckon.AsyncClient(stack.url, stack.token, on_request=requests_log.append) as ac:
            run = unique("arun")
            stream = ac.events(patterns=["tool.executed"])
            first = asyncio.ensure_future(stream.__anext__())
            await asyncio.sleep(0.3)
            effects = await asyncio.gather(*(ac.enqueue(connectors["asgi"], idempotency_key=unique("a"), run_id=run)
                                             for _ in range(3)))
            done = await asyncio.gather(*(ac.wait(e["id"], timeout=30) for e in effects))
            assert {d["state"] for d in done} == {"CONFIRMED"}
            ev = await asyncio.wait_for(first, 30)
            assert ev.type == "tool.executed"
            await stream.aclose()
            listed = [e["id"] async for e in ac.iter_effects(run=run, page_size=2)]
            assert sorted(listed) == sorted(e["id"] for e in effects)
            assert (await ac.wait_run(run, timeout=10))["settled"] is True
            with pytest.raises(reckon.NotFound):
                await ac.get_effect("0193a4c2-7c1e-7d55-9e55-3f1f3b0c2a11")
            assert ac.console_url(effects[0]["id"]).endswith("/console/effects/" + effects[0]["id"])

    asyncio.run(main())


def test_wait_rides_over_a_server_sigkill(stack: Stack, client: reckon.Client, client_b: reckon.Client,
                                          connectors, requests_log) -> None:
    proc, url = stack.server("server-killed-wait")
    port = urlsplit(url).port
    waiter = make_client(url, stack.token, requests_log)
    held = client.enqueue(connectors["wsgi"], idempotency_key=unique("w"), require_confirmation=True)
    result: dict[str, object] = {}

    def wait() -> None:
        try:
            result["effect"] = waiter.wait(held["id"], timeout=40)
        except Exception as e:  # reported below
            result["error"] = e

    t = threading.Thread(target=wait)
    t.start()
    time.sleep(0.5)
    proc.stop(signal.SIGKILL)
    client_b.confirm_effect(held["id"], "go ahead")
    assert client.wait(held["id"])["state"] == "CONFIRMED"
    time.sleep(1.0)
    stack.server("server-killed-wait", port)
    t.join(45)
    assert "error" not in result, result
    assert result["effect"]["state"] == "CONFIRMED"  # type: ignore[index]
