"""The tool-call wrapper: journal positions as keys, performed once, holds, unknown outcomes."""

from __future__ import annotations

import asyncio

import pytest

import reckon
from harness import Bank, Stack, unique


@reckon.tool("bank.wsgi", name="wire")
def wire(account: str, amount: int, mode: str = "ok") -> None:
    """Send a wire (performed by the bank.wsgi connector's upstream)."""


@reckon.tool("bank.asgi", name="refund", require_confirmation=True)
def refund(order: str, amount: int) -> None:
    """Refund an order, once a person confirmed it."""


@reckon.tool("bank.unsure", timeout=30)
def unsure(mode: str = "unsure") -> None:
    """An upstream that cannot tell what happened."""


def test_dropped_connection_is_performed_once_and_the_agent_sees_the_result(
        client: reckon.Client, connectors: dict[str, str], bank: Bank) -> None:
    journal = reckon.Journal(client, run_id=unique("agent"), timeout=30)
    with journal.step("d-1"):
        receipt = wire("acc-1", 1200, mode="drop")
        second = wire("acc-2", 5)
    key = f"{journal.run_id}/d-1/wire/0"
    assert receipt == bank.performed[key] and bank.performs[key] == 1
    assert receipt["args"] == {"account": "acc-1", "amount": 1200, "mode": "drop"}
    assert second["done"] == f"{journal.run_id}/d-1/wire/1"
    effect = next(e for e in client.iter_effects(run=journal.run_id) if e["idempotency_key"] == key)
    assert [h["to"] for h in client.history(effect["id"])] == ["PENDING", "UNKNOWN", "CONFIRMED"]
    # the agent crashed and replays the step: the same calls, the same effects, no new call upstream
    calls_before = len(bank.calls)
    with journal.step("d-1"):
        assert wire("acc-1", 1200, mode="drop") == receipt
    assert bank.performs[key] == 1 and len(bank.calls) == calls_before


def test_held_tool_awaits_confirmation_then_returns(stack: Stack, client: reckon.Client, client_b: reckon.Client,
                                                    connectors, bank: Bank) -> None:
    journal = reckon.Journal(client, run_id=unique("agent"), timeout=30)
    for _ in range(2):
        with journal.step(7), pytest.raises(reckon.AwaitingConfirmation) as held:
            refund("o-9", 3000)
    e = held.value
    assert e.console_url == f"{stack.url}/console/effects/{e.effect_id}"
    assert e.state == "PENDING" and e.effect["idempotency_key"] == f"{journal.run_id}/7/refund/0"
    assert e.effect["idempotency_key"] not in bank.performed
    client_b.confirm_effect(e.effect_id, "refund approved", actor="bob")
    with journal.step(7):
        result = refund("o-9", 3000)
    assert result == bank.performed[e.effect["idempotency_key"]]


def test_failed_and_unknown_outcomes(stack: Stack, client: reckon.Client, connectors) -> None:
    journal = reckon.Journal(client, run_id=unique("agent"), timeout=30)
    with journal.step("s"), pytest.raises(reckon.ToolFailed) as failed:
        wire("acc-1", 1, mode="reject")
    assert "refused" in failed.value.error
    with journal.step("s"), pytest.raises(reckon.OutcomeUnknown) as unknown:
        unsure()
    assert unknown.value.state == "STUCK"
    assert unknown.value.console_url == f"{stack.url}/console/effects/{unknown.value.effect_id}"
    with pytest.raises(RuntimeError):
        wire("acc-1", 1)  # no journal step
    with journal.step("s"), pytest.raises(TypeError):
        wire("acc-1")  # the signature is the function's


def test_plain_function_and_async(stack: Stack, client: reckon.Client, connectors, bank: Bank) -> None:
    run = unique("agent")
    result = reckon.call_tool(client, "bank.wsgi", {"x": 1}, run_id=run, step="p", call_index=0, tool="lookup")
    assert result["done"] == reckon.tool_key(run, "p", "lookup", 0) == f"{run}/p/lookup/0"
    # A "/" in a part cannot make two positions one key; the keys are the TypeScript client's.
    assert reckon.tool_key("r/1", "step 2", "charge", 3) == "r%2F1/step%202/charge/3"
    assert reckon.tool_key("r", "1/step 2", "charge", 3) != reckon.tool_key("r/1", "step 2", "charge", 3)
    with pytest.raises(ValueError):
        reckon.tool_key(run, "p", "lookup", -1)

    async def main() -> None:
        async with reckon.AsyncClient(stack.url, stack.token) as ac:
            journal = reckon.Journal(ac, run_id=run)
            with journal.step("q"):
                out = await wire.acall("acc-9", 9)
                with pytest.raises(TypeError):
                    wire("acc-9", 9)
            assert out["done"] == f"{run}/q/wire/0"

    asyncio.run(main())


@reckon.tool
def lookup(order: str) -> None:
    """A tool whose connector is named after it."""


def test_bare_decorator(client: reckon.Client) -> None:
    assert (lookup.connector, lookup.name) == ("lookup", "lookup")
    assert lookup.__doc__ == "A tool whose connector is named after it."
    journal = reckon.Journal(client, run_id=unique("agent"))
    with journal.step(1), pytest.raises(reckon.Unprocessable) as err:
        lookup("o-1")
    assert err.value.code == "unknown_connector"
    with pytest.raises(ValueError):
        reckon.tool("")
