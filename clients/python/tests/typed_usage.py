"""Type-checked (not run) by run-tests: the public API keeps its types for the caller's checker."""

from __future__ import annotations

import reckon
from reckon.connector import Absent, Call, Connector, Present, Status


@reckon.tool("shop.refund")
def refund(order: str, amount_cents: int) -> None:
    """Refund an order."""


@reckon.tool
def lookup(order: str) -> None:
    """Look an order up."""


def agent(client: reckon.Client) -> object:
    journal = reckon.Journal(client, run_id="run-1")
    with journal.step(1):
        lookup("o-1")
        refund("o-9", "a lot")  # type: ignore[arg-type]  # the tool keeps the function's signature
        return refund("o-9", 1200)


async def async_agent(client: reckon.AsyncClient) -> None:
    effect: reckon.JSONObject = await client.enqueue("x", idempotency_key="k")
    await client.wait(effect["id"], timeout=5)
    async for event in client.events(patterns=["tool.*"]):
        print(event.id)
    with reckon.Journal(client, run_id="r").step("s"):
        await refund.acall("o-9", 1200)


def status(call: Call) -> Status:
    return Present({"k": call.idempotency_key}) if call.args else Absent()


app = Connector(dispatch=lambda call: call.args, status=status)
