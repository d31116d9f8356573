"""The asyncio client: the surface of :class:`reckon.Client`, every call awaited.

Requests run on the client's own thread pool (the standard library has no asyncio HTTP
client), so a call never blocks the event loop; the event stream is an async iterator.
"""

from __future__ import annotations

import asyncio
import functools
from concurrent.futures import ThreadPoolExecutor
from typing import Any, AsyncIterator, Callable, Concatenate, Coroutine, Optional, ParamSpec, Sequence, TypeVar

from ._transport import RequestInfo
from .client import Client, JSONObject
from .events import Event, EventStream

P = ParamSpec("P")
T = TypeVar("T")

__all__ = ["AsyncClient", "AsyncEventStream"]


def _async(fn: Callable[Concatenate[Client, P], T]) -> Callable[Concatenate["AsyncClient", P], Coroutine[Any, Any, T]]:
    @functools.wraps(fn)
    async def method(self: "AsyncClient", /, *args: P.args, **kwargs: P.kwargs) -> T:
        return await self._run(functools.partial(fn, self.sync, *args, **kwargs))
    return method


class AsyncEventStream:
    """The event log as an async iterator that resumes with ``Last-Event-ID`` (see :class:`EventStream`)."""

    def __init__(self, client: "AsyncClient", stream: EventStream) -> None:
        self._client = client
        self._stream = stream

    @property
    def last_event_id(self) -> Optional[str]:
        return self._stream.last_event_id

    def __aiter__(self) -> "AsyncEventStream":
        return self

    async def __anext__(self) -> Event:
        try:
            return await self._client._run(self._stream.__next__)
        except StopIteration:
            raise StopAsyncIteration from None

    async def __aenter__(self) -> "AsyncEventStream":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Stop the stream; a pending ``__anext__`` ends."""
        self._stream.close()


class AsyncClient:
    """:class:`reckon.Client` for asyncio: the same methods and arguments, each a coroutine.

    Use ``async with AsyncClient(...) as client:``, or call :meth:`aclose`, to release its
    threads.  ``max_concurrency`` bounds the requests (and waits, and event streams) in flight.
    """

    def __init__(
        self,
        base_url: str,
        token: Optional[str] = None,
        *,
        timeout: float = 30.0,
        max_retries: int = 3,
        max_retry_wait: float = 30.0,
        on_request: Optional[Callable[[RequestInfo], None]] = None,
        max_concurrency: int = 32,
    ) -> None:
        if max_concurrency < 1:
            raise ValueError("max_concurrency must be at least 1")
        self.sync = Client(base_url, token, timeout=timeout, max_retries=max_retries,
                           max_retry_wait=max_retry_wait, on_request=on_request)
        self._pool = ThreadPoolExecutor(max_workers=max_concurrency, thread_name_prefix="reckon")

    async def _run(self, fn: Callable[[], T]) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._pool, fn)

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Release the client's threads and connections."""
        self._pool.shutdown(wait=False, cancel_futures=True)
        self.sync.close()

    @property
    def base_url(self) -> str:
        return self.sync.base_url

    def console_url(self, effect_id: str) -> str:
        return self.sync.console_url(effect_id)

    def events(self, *, patterns: Sequence[str] = (), after: Optional[str] = None, tenant: Optional[str] = None,
               last_event_id: Optional[str] = None, read_timeout: float = 45.0,
               reconnect_for: float = 60.0) -> AsyncEventStream:
        """The event log as an async iterator of :class:`Event` (see :meth:`Client.events`)."""
        return AsyncEventStream(self, self.sync.events(
            patterns=patterns, after=after, tenant=tenant, last_event_id=last_event_id,
            read_timeout=read_timeout, reconnect_for=reconnect_for))

    openapi = _async(Client.openapi)
    connector_openapi = _async(Client.connector_openapi)
    enqueue = _async(Client.enqueue)
    get_effect = _async(Client.get_effect)
    history = _async(Client.history)
    list_effects = _async(Client.list_effects)
    resolve_effect = _async(Client.resolve_effect)
    cancel_effect = _async(Client.cancel_effect)
    confirm_effect = _async(Client.confirm_effect)
    decline_effect = _async(Client.decline_effect)
    redrive_effect = _async(Client.redrive_effect)
    wait = _async(Client.wait)
    callback = _async(Client.callback)
    create_run = _async(Client.create_run)
    get_run = _async(Client.get_run)
    cancel_run = _async(Client.cancel_run)
    wait_run = _async(Client.wait_run)
    put_connector = _async(Client.put_connector)
    list_connectors = _async(Client.list_connectors)
    get_connector = _async(Client.get_connector)
    delete_connector = _async(Client.delete_connector)
    list_limits = _async(Client.list_limits)
    get_limit = _async(Client.get_limit)
    put_limit = _async(Client.put_limit)
    delete_limit = _async(Client.delete_limit)
    reset_limit = _async(Client.reset_limit)
    list_pauses = _async(Client.list_pauses)
    pause_connector = _async(Client.pause_connector)
    resume_connector = _async(Client.resume_connector)
    put_saga_definition = _async(Client.put_saga_definition)
    list_saga_definitions = _async(Client.list_saga_definitions)
    get_saga_definition = _async(Client.get_saga_definition)
    start_saga = _async(Client.start_saga)
    get_saga = _async(Client.get_saga)
    list_sagas = _async(Client.list_sagas)
    resolve_saga = _async(Client.resolve_saga)
    wait_saga = _async(Client.wait_saga)
    post_message = _async(Client.post_message)
    list_turns = _async(Client.list_turns)
    put_turn_handler = _async(Client.put_turn_handler)
    get_turn_handler = _async(Client.get_turn_handler)
    delete_turn_handler = _async(Client.delete_turn_handler)
    create_subscription = _async(Client.create_subscription)
    list_subscriptions = _async(Client.list_subscriptions)
    get_subscription = _async(Client.get_subscription)
    delete_subscription = _async(Client.delete_subscription)
    pause_subscription = _async(Client.pause_subscription)
    resume_subscription = _async(Client.resume_subscription)
    list_schedules = _async(Client.list_schedules)
    get_schedule = _async(Client.get_schedule)
    put_schedule = _async(Client.put_schedule)
    delete_schedule = _async(Client.delete_schedule)

    async def iter_effects(self, *, state: Optional[str] = None, connector: Optional[str] = None,
                           run: Optional[str] = None, page_size: Optional[int] = None) -> AsyncIterator[JSONObject]:
        """Every effect matching the filters, newest first, page after page."""
        cursor: Optional[str] = None
        while True:
            page = await self.list_effects(state=state, connector=connector, run=run, limit=page_size, cursor=cursor)
            for effect in page.get("effects", []):
                yield effect
            cursor = page.get("next_cursor")
            if not cursor:
                return

    async def iter_sagas(self, *, state: Optional[str] = None, definition: Optional[str] = None,
                         page_size: Optional[int] = None) -> AsyncIterator[JSONObject]:
        """Every saga matching the filters, newest first, page after page."""
        cursor: Optional[str] = None
        while True:
            page = await self.list_sagas(state=state, definition=definition, limit=page_size, cursor=cursor)
            for saga in page.get("sagas", []):
                yield saga
            cursor = page.get("next_cursor")
            if not cursor:
                return
