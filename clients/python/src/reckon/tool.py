"""Agent tool calls as effects: performed at most once, however often the agent retries.

A tool call's identity is its place in the agent's journal — the run, the step (decision)
that made it, the tool, and the call's index among that step's calls of the tool — not a
hash of its inputs: the same step replayed after a crash makes the same calls with the same
keys, and Reckon answers with the effect it already has instead of calling the upstream again.
An upstream whose answer was lost is asked (its status check) rather than called twice.

::

    client = reckon.Client("http://127.0.0.1:8080", token)

    @reckon.tool("shop.refund")
    def refund(order: str, amount: int) -> None:
        \"\"\"Refund an order (performed by the shop.refund connector's upstream).\"\"\"

    journal = reckon.Journal(client, run_id="run-42")
    with journal.step("d-3"):
        receipt = refund("o-9", 1200)       # the upstream's result, once CONFIRMED
"""

from __future__ import annotations

import contextvars
import functools
import inspect
import threading
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Callable, Generic, Iterator, Mapping, Optional, ParamSpec, Union, overload
from urllib.parse import quote

from .client import SETTLED_STATES, Client, JSONObject
from .errors import APIError, ReckonError, TransportError, WaitTimeout

if TYPE_CHECKING:
    from .aio import AsyncClient

P = ParamSpec("P")

__all__ = ["OutcomeUnknown", "AwaitingConfirmation", "ToolFailed", "Journal", "Step", "Tool", "tool",
           "tool_key", "call_tool", "acall_tool", "outcome"]


class _ToolOutcome(ReckonError):
    def __init__(self, message: str, effect: JSONObject, console_url: str) -> None:
        super().__init__(f"{message}; evidence: {console_url}")
        self.effect = effect
        self.effect_id: str = effect["id"]
        self.state: str = effect.get("state", "")
        self.console_url = console_url


class OutcomeUnknown(_ToolOutcome):
    """Whether the tool call happened is not known (yet): STUCK for an operator, or not settled in time.

    Do not call the tool again under another key: the effect (``effect_id``) is what will be
    settled; ``console_url`` shows its evidence.
    """


class AwaitingConfirmation(_ToolOutcome):
    """The tool call is held until a person confirms it; call it again (same step) once confirmed."""

    @property
    def prompt(self) -> Optional[str]:
        confirmation = self.effect.get("confirmation") or {}
        prompt: Optional[str] = confirmation.get("prompt")
        return prompt


class ToolFailed(_ToolOutcome):
    """The tool call FAILED: refused by the upstream, declined, cancelled or out of attempts."""

    @property
    def error(self) -> str:
        return str(self.effect.get("error", ""))


def _awaiting(effect: JSONObject) -> bool:
    return (effect.get("confirmation") or {}).get("state") == "AWAITING" and effect.get("state") == "PENDING"


def _settled_or_held(effect: JSONObject) -> bool:
    return effect.get("state") in SETTLED_STATES or _awaiting(effect)


def outcome(effect: JSONObject, console_url: str) -> Any:
    """The result of a tool call's effect, or the exception that says why there is none."""
    state = effect.get("state")
    if state == "CONFIRMED":
        return effect.get("result")
    if state == "FAILED":
        raise ToolFailed(f"tool call {effect['id']} FAILED: {effect.get('error', '')}", effect, console_url)
    if _awaiting(effect):
        raise AwaitingConfirmation(f"tool call {effect['id']} awaits a confirmation", effect, console_url)
    raise OutcomeUnknown(f"the outcome of tool call {effect['id']} is not known ({state})", effect, console_url)


def tool_key(run_id: str, step: str, tool: str, call_index: int) -> str:
    """The effect's idempotency key of a tool call at a journal position: ``{run_id}/{step}/{tool}/{call_index}``.

    Each part is percent-encoded (``/`` → ``%2F``, space → ``%20``), as the TypeScript client's
    ``positionKey`` does.
    """
    for what, value in (("run_id", run_id), ("step", step), ("tool", tool)):
        if not isinstance(value, str) or not value:
            raise ValueError(f"{what} must be a non-empty string")
    if isinstance(call_index, bool) or not isinstance(call_index, int) or call_index < 0:
        raise ValueError("call_index must be an integer ≥ 0")
    # Each part percent-encoded as JavaScript's encodeURIComponent does: a "/" inside a part cannot
    # make two positions one key, and the TypeScript client makes the same keys.
    return "/".join(quote(part, safe="!~*'()") for part in (run_id, step, tool, str(call_index)))


def _enqueue_args(connector: str, args: Mapping[str, Any], run_id: str, step: str, tool: Optional[str],
                  call_index: int, require_confirmation: Optional[bool], business_key: Optional[str]) -> JSONObject:
    return dict(connector=connector, args=dict(args),
                idempotency_key=tool_key(run_id, step, tool or connector, call_index), run_id=run_id,
                require_confirmation=require_confirmation, business_key=business_key)


def call_tool(client: Client, connector: str, args: Mapping[str, Any], *, run_id: str, step: str, call_index: int,
              tool: Optional[str] = None, require_confirmation: Optional[bool] = None,
              business_key: Optional[str] = None, timeout: float = 60.0) -> Any:
    """Make one tool call an effect of ``connector`` and return its result (the plain-function form).

    The key is ``{run_id}/{step}/{tool}/{call_index}`` (``tool`` defaults to the connector).
    Raises :class:`ToolFailed`, :class:`AwaitingConfirmation` or :class:`OutcomeUnknown`.
    """
    effect = client.enqueue(**_enqueue_args(connector, args, run_id, step, tool, call_index,
                                            require_confirmation, business_key))
    if not _settled_or_held(effect):
        try:
            effect = client.wait(effect["id"], timeout=timeout, until=_settled_or_held)
        except WaitTimeout as e:
            effect = e.last
        except (TransportError, APIError) as e:  # the effect is recorded; only its outcome is not known here
            raise OutcomeUnknown(f"lost sight of tool call {effect['id']}: {e}", effect,
                                 client.console_url(effect["id"])) from e
    return outcome(effect, client.console_url(effect["id"]))


async def acall_tool(client: "AsyncClient", connector: str, args: Mapping[str, Any], *, run_id: str, step: str,
                     call_index: int, tool: Optional[str] = None, require_confirmation: Optional[bool] = None,
                     business_key: Optional[str] = None, timeout: float = 60.0) -> Any:
    """:func:`call_tool` for the :class:`reckon.AsyncClient`."""
    effect = await client.enqueue(**_enqueue_args(connector, args, run_id, step, tool, call_index,
                                                  require_confirmation, business_key))
    if not _settled_or_held(effect):
        try:
            effect = await client.wait(effect["id"], timeout=timeout, until=_settled_or_held)
        except WaitTimeout as e:
            effect = e.last
        except (TransportError, APIError) as e:
            raise OutcomeUnknown(f"lost sight of tool call {effect['id']}: {e}", effect,
                                 client.console_url(effect["id"])) from e
    return outcome(effect, client.console_url(effect["id"]))


class Journal:
    """An agent run's journal: where each tool call is, so that a replayed step makes the same calls.

    ``client`` is a :class:`reckon.Client` (tools called plainly) or :class:`reckon.AsyncClient`
    (tools awaited with ``.acall``).  ``timeout`` bounds how long a tool call waits for its outcome.
    """

    def __init__(self, client: Union[Client, "AsyncClient"], run_id: str, *, timeout: float = 60.0) -> None:
        if not run_id:
            raise ValueError("run_id must be a non-empty string")
        self.client = client
        self.run_id = run_id
        self.timeout = timeout

    @contextmanager
    def step(self, step_id: Union[str, int]) -> Iterator["Step"]:
        """The scope of one decision: tools called inside it are numbered from 0, per tool.

        A replay of the step must call each tool in the same order, so that each call gets the
        same index: do not race calls of one tool in concurrent tasks or threads within a step
        (give them steps of their own, or explicit indices with :func:`call_tool`).
        """
        step = Step(self, str(step_id))
        token = _current.set(step)
        try:
            yield step
        finally:
            _current.reset(token)


class Step:
    """One decision of a run; counts each tool's calls to give every call its index."""

    def __init__(self, journal: Journal, step_id: str) -> None:
        if not step_id:
            raise ValueError("step_id must be non-empty")
        self.journal = journal
        self.step_id = step_id
        self._counts: dict[str, int] = {}
        self._lock = threading.Lock()

    def next_index(self, tool: str) -> int:
        """The index of the tool's next call in this step: 0, 1, 2, … in the order of the calls."""
        with self._lock:
            index = self._counts.get(tool, 0)
            self._counts[tool] = index + 1
            return index


_current: contextvars.ContextVar[Optional[Step]] = contextvars.ContextVar("reckon_step", default=None)


class Tool(Generic[P]):
    """A function whose calls are effects of a connector (made by :func:`tool`).

    Calling it inside ``with journal.step(...)`` enqueues the call's arguments (bound to the
    function's signature, defaults applied) as the effect's ``args``, waits for the outcome and
    returns the upstream's result.  The function's body is not run by the call: it runs where
    the connector's upstream serves it (``func`` is the original, e.g. for
    :class:`reckon.connector.Connector`).
    """

    def __init__(self, func: Callable[P, Any], connector: str, name: str, require_confirmation: Optional[bool],
                 timeout: Optional[float]) -> None:
        self.func = func
        self.connector = connector
        self.name = name
        self.require_confirmation = require_confirmation
        self.timeout = timeout
        self._signature = inspect.signature(func)
        functools.update_wrapper(self, func)

    def _prepare(self, args: Any, kwargs: Any) -> tuple[Step, JSONObject]:
        step = _current.get()
        if step is None:
            raise RuntimeError(f"tool {self.name} called outside `with journal.step(...)`: its journal position "
                               "is unknown (or use reckon.call_tool with an explicit position)")
        bound = self._signature.bind(*args, **kwargs)
        bound.apply_defaults()
        call = dict(bound.arguments)
        for p in self._signature.parameters.values():
            if p.kind is inspect.Parameter.VAR_KEYWORD:
                call.update(call.pop(p.name, {}))
            elif p.kind is inspect.Parameter.VAR_POSITIONAL:
                raise TypeError(f"tool {self.name}: *{p.name} arguments have no names to send")
        return step, call

    def _options(self, step: Step) -> dict[str, Any]:
        return dict(run_id=step.journal.run_id, step=step.step_id, call_index=step.next_index(self.name),
                    tool=self.name, require_confirmation=self.require_confirmation,
                    timeout=self.timeout if self.timeout is not None else step.journal.timeout)

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> Any:
        step, call = self._prepare(args, kwargs)
        client = step.journal.client
        if not isinstance(client, Client):
            raise TypeError(f"tool {self.name}: the journal has an AsyncClient; use `await {self.name}.acall(...)`")
        return call_tool(client, self.connector, call, **self._options(step))

    async def acall(self, *args: P.args, **kwargs: P.kwargs) -> Any:
        """The call, awaited: for a journal with a :class:`reckon.AsyncClient`."""
        from .aio import AsyncClient

        step, call = self._prepare(args, kwargs)
        client = step.journal.client
        if not isinstance(client, AsyncClient):
            raise TypeError(f"tool {self.name}: the journal has a Client; call it without await")
        return await acall_tool(client, self.connector, call, **self._options(step))


@overload
def tool(connector: Callable[P, Any]) -> Tool[P]:
    ...


@overload
def tool(connector: Optional[str] = None, *, name: Optional[str] = None, require_confirmation: Optional[bool] = None,
         timeout: Optional[float] = None) -> Callable[[Callable[P, Any]], Tool[P]]:
    ...


def tool(connector: Union[str, Callable[P, Any], None] = None, *, name: Optional[str] = None,
         require_confirmation: Optional[bool] = None,
         timeout: Optional[float] = None) -> Union[Tool[P], Callable[[Callable[P, Any]], Tool[P]]]:
    """Decorate an agent tool so that each call is an effect of ``connector`` (default: the function's name).

    ``name`` (default: the function's name) is the tool's part of the key; ``require_confirmation``
    holds each call for a person's confirmation; ``timeout`` bounds the wait for the outcome
    (default: the journal's).  ``@reckon.tool`` without arguments uses the function's name for both.
    """
    if callable(connector):
        return tool()(connector)
    if connector is not None and (not isinstance(connector, str) or not connector):
        raise ValueError("connector must be a non-empty string")
    connector_name = connector

    def wrap(func: Callable[P, Any]) -> Tool[P]:
        tool_name = name or func.__name__
        return Tool(func, connector_name or tool_name, tool_name, require_confirmation, timeout)
    return wrap
