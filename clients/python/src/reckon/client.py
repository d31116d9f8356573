"""The synchronous client of Reckon's HTTP API."""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Mapping, Optional, Sequence

from . import signing
from ._routes import route
from ._transport import QueryValue, RequestInfo, Transport
from .errors import APIError, RateLimited, ReckonError, TransportError, Unavailable, WaitTimeout
from .events import Event, EventStream, SSEConnection

JSONObject = dict[str, Any]

#: Effect states after which nothing happens without an operator.
SETTLED_STATES = frozenset({"CONFIRMED", "FAILED", "STUCK"})
#: Saga states after which nothing happens without an operator.
SAGA_SETTLED_STATES = frozenset({"COMPLETED", "COMPENSATED", "STUCK"})

_UNSET: Any = object()


@dataclass(frozen=True)
class Position:
    """A journal position: the server derives the key ``{turn_group}/d-{decision}/{connector}/{call_index}``."""

    turn_group: str
    decision: int
    call_index: int

    def to_json(self) -> JSONObject:
        return {"turn_group": self.turn_group, "decision": self.decision, "call_index": self.call_index}


def _body(**fields: Any) -> JSONObject:
    return {k: v for k, v in fields.items() if v is not None}


class Client:
    """A client of one Reckon server (``cmd/server``), with one bearer token.

    Every request has a ``timeout`` (seconds).  Answers ``429`` and ``503`` are retried after
    their ``Retry-After`` (at most ``max_retries`` times, when it is at most ``max_retry_wait``
    seconds), and so is a request whose connection failed when it is safe to send again: a GET,
    or a POST, PUT or DELETE, which always carries an ``Idempotency-Key`` (``request_key``, or
    one the client makes) so that the server replays the first answer instead of acting twice.
    An error answer raises a subclass of :class:`reckon.APIError` carrying ``code``,
    ``message``, ``request_id`` and ``status``.

    ``token`` may be None for a client that only sends signed callbacks.  ``on_request`` is
    called with a :class:`RequestInfo` before each attempt (logging, metrics, tests).
    The client keeps a few keep-alive connections (:meth:`close`, or ``with Client(...) as
    client:``, closes them) and may be shared by threads.
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
    ) -> None:
        self._t = Transport(base_url, token, timeout=timeout, max_retries=max_retries,
                            max_retry_wait=max_retry_wait, on_request=on_request)
        self._signed: OrderedDict[str, int] = OrderedDict()
        self._signed_lock = threading.Lock()

    def _sign_time(self, effect_id: str) -> int:
        # The server refuses a signature it has seen (callback_replayed), and one made in the
        # same second over the same body is the same signature: every callback this client
        # signs for an effect gets a later timestamp than the one before.
        with self._signed_lock:
            t = max(int(time.time()), self._signed.get(effect_id, 0) + 1)
            self._signed[effect_id] = t
            self._signed.move_to_end(effect_id)
            while len(self._signed) > 4096:
                self._signed.popitem(last=False)
            return t

    def close(self) -> None:
        """Close the client's idle keep-alive connections."""
        self._t.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def base_url(self) -> str:
        return self._t.base_url

    def console_url(self, effect_id: str) -> str:
        """The console's page of an effect, with its evidence: ``<base_url>/console/effects/<id>``."""
        return f"{self._t.base_url}/console/effects/{effect_id}"

    def _do(self, op: str, path: Optional[Mapping[str, str]] = None, *,
            query: Optional[Mapping[str, QueryValue]] = None, body: Optional[Mapping[str, Any]] = None,
            request_key: Optional[str] = None) -> Any:
        return self._t.request(route(op), path, query=query, body=body, idempotency_key=request_key).data

    # -- documents -----------------------------------------------------------------------

    def openapi(self) -> JSONObject:
        """The server's OpenAPI document of this API (``GET /openapi.json``)."""
        result: JSONObject = self._do("getOpenAPI")
        return result

    def connector_openapi(self) -> JSONObject:
        """The connector wire protocol's OpenAPI document (``GET /openapi/connector.json``)."""
        result: JSONObject = self._do("getConnectorOpenAPI")
        return result

    # -- effects -------------------------------------------------------------------------

    def enqueue(
        self,
        connector: str,
        *,
        args: Optional[Mapping[str, Any]] = None,
        idempotency_key: Optional[str] = None,
        position: Optional[Position] = None,
        business_key: Optional[str] = None,
        run_id: Optional[str] = None,
        turn_id: Optional[str] = None,
        turn_group: Optional[str] = None,
        max_attempts: Optional[int] = None,
        async_timeout_ms: Optional[int] = None,
        async_hard_timeout: Optional[bool] = None,
        require_confirmation: Optional[bool] = None,
        confirmation_ttl_ms: Optional[int] = None,
        ordering_key: Optional[str] = None,
        request_key: Optional[str] = None,
    ) -> JSONObject:
        """Record an effect (``POST /v1/effects``): the new one, or the existing one of its key.

        Give exactly one of ``idempotency_key`` (the effect's identity) and ``position``.  The
        answer's ``deduplicated`` is True when the key was known already.
        """
        if (idempotency_key is None) == (position is None):
            raise ValueError("give exactly one of idempotency_key and position")
        result: JSONObject = self._do("enqueueEffect", body=_body(
            connector=connector, args=dict(args) if args is not None else None, idempotency_key=idempotency_key,
            position=position.to_json() if position else None, business_key=business_key, run_id=run_id,
            turn_id=turn_id, turn_group=turn_group, max_attempts=max_attempts, async_timeout_ms=async_timeout_ms,
            async_hard_timeout=async_hard_timeout, require_confirmation=require_confirmation,
            confirmation_ttl_ms=confirmation_ttl_ms, ordering_key=ordering_key), request_key=request_key)
        return result

    def get_effect(self, effect_id: str) -> JSONObject:
        """An effect with its ``history`` (``GET /v1/effects/{id}``)."""
        result: JSONObject = self._do("getEffect", {"id": effect_id})
        return result

    def history(self, effect_id: str) -> list[JSONObject]:
        """Every transition of an effect, oldest first."""
        return list(self.get_effect(effect_id).get("history", []))

    def list_effects(self, *, state: Optional[str] = None, connector: Optional[str] = None, run: Optional[str] = None,
                     limit: Optional[int] = None, cursor: Optional[str] = None) -> JSONObject:
        """One page of effects, newest first: ``{"effects": [...], "next_cursor": ...}``."""
        result: JSONObject = self._do("listEffects", query={
            "state": state, "connector": connector, "run": run, "limit": limit, "cursor": cursor})
        return result

    def iter_effects(self, *, state: Optional[str] = None, connector: Optional[str] = None,
                     run: Optional[str] = None, page_size: Optional[int] = None) -> Iterator[JSONObject]:
        """Every effect matching the filters, newest first, page after page."""
        cursor: Optional[str] = None
        while True:
            page = self.list_effects(state=state, connector=connector, run=run, limit=page_size, cursor=cursor)
            yield from page.get("effects", [])
            cursor = page.get("next_cursor")
            if not cursor:
                return

    def resolve_effect(self, effect_id: str, to: str, reason: str, *, actor: Optional[str] = None,
                       request_key: Optional[str] = None) -> JSONObject:
        """An operator's decision on a STUCK (or never attempted PENDING) effect."""
        result: JSONObject = self._do("resolveEffect", {"id": effect_id},
                                      body=_body(to=to, reason=reason, actor=actor), request_key=request_key)
        return result

    def cancel_effect(self, effect_id: str, reason: str, *, actor: Optional[str] = None,
                      request_key: Optional[str] = None) -> JSONObject:
        """Cancel a PENDING effect that was never attempted (FAILED)."""
        result: JSONObject = self._do("cancelEffect", {"id": effect_id}, body=_body(reason=reason, actor=actor),
                                      request_key=request_key)
        return result

    def confirm_effect(self, effect_id: str, reason: str, *, actor: Optional[str] = None,
                       request_key: Optional[str] = None) -> JSONObject:
        """Confirm an effect held for a confirmation: the reactors may dispatch it."""
        result: JSONObject = self._do("confirmEffect", {"id": effect_id}, body=_body(reason=reason, actor=actor),
                                      request_key=request_key)
        return result

    def decline_effect(self, effect_id: str, reason: str, *, actor: Optional[str] = None,
                       request_key: Optional[str] = None) -> JSONObject:
        """Decline an effect held for a confirmation: it is FAILED."""
        result: JSONObject = self._do("declineEffect", {"id": effect_id}, body=_body(reason=reason, actor=actor),
                                      request_key=request_key)
        return result

    def redrive_effect(self, effect_id: str, reason: str, *, actor: Optional[str] = None,
                       request_key: Optional[str] = None) -> JSONObject:
        """Redrive a FAILED effect: PENDING again, same idempotency key, fresh attempt budget.

        Refused with :class:`Conflict` codes ``not_failed``, ``redrive_compensation``,
        ``redrive_declined``, ``redrive_owned``, ``business_key_taken``, ``run_cancelled`` and ``run_halted``.
        """
        result: JSONObject = self._do("redriveEffect", {"id": effect_id}, body=_body(reason=reason, actor=actor),
                                      request_key=request_key)
        return result

    def wait(self, effect_id: str, *, timeout: float = 60.0,
             until: Callable[[JSONObject], bool] = lambda e: bool(e.get("state") in SETTLED_STATES),
             events: bool = True) -> JSONObject:
        """Wait until the effect is CONFIRMED, FAILED or STUCK (or ``until`` holds); return it.

        Follows the event stream (``events``), looking the effect up at each of its events, and
        falls back to polling with backoff when the stream cannot be had.  A server that
        restarts or is busy meanwhile (a broken connection, ``503``, ``429``) does not end the
        wait.  Raises :class:`WaitTimeout` (with the effect last seen) after ``timeout`` seconds.
        """
        return self._wait(lambda: self.get_effect(effect_id), until, ("tool.*", "effect.*"),
                          lambda ev: ev.effect_id == effect_id, timeout, f"effect {effect_id}", events)

    # -- callbacks -----------------------------------------------------------------------

    def callback(self, correlation_id: str, *, result: Any = _UNSET, error: Optional[str] = None,
                 effect_id: Optional[str] = None, secret: Optional[str] = None,
                 request_key: Optional[str] = None) -> JSONObject:
        """Report the outcome of an accepted (``202``) effect: ``result`` (CONFIRMED) or ``error`` (FAILED).

        With ``effect_id`` and ``secret`` (the dispatch's ``Reckon-Effect-Id`` and
        ``Reckon-Callback-Secret``) the callback is signed, as an upstream sends it, and needs no
        token; each attempt is signed afresh.  Otherwise it is sent with the client's token.
        """
        if (result is _UNSET) == (error is None):
            raise ValueError("give exactly one of result and error")
        body = {"error": error} if error is not None else {"result": result}
        if (effect_id is None) != (secret is None):
            raise ValueError("a signed callback needs both effect_id and secret")
        sign = None
        if secret is not None and effect_id is not None:
            sid, sec = effect_id, secret

            def sign(data: bytes) -> Mapping[str, str]:
                return {"Reckon-Effect-Id": sid, "Reckon-Signature": signing.sign(sec, data, self._sign_time(sid))}
        resp = self._t.request(route("callback"), {"correlation_id": correlation_id}, body=body,
                               idempotency_key=request_key, sign=sign)
        data: JSONObject = resp.data
        return data

    # -- runs ----------------------------------------------------------------------------

    def create_run(self, run_id: str, *, max_steps: Optional[int] = None,
                   max_consecutive_failures: Optional[int] = None, request_key: Optional[str] = None) -> JSONObject:
        """Create a run with guardrails, or change those of an existing run (``POST /v1/runs``)."""
        result: JSONObject = self._do("startRun", body=_body(
            id=run_id, max_steps=max_steps, max_consecutive_failures=max_consecutive_failures),
            request_key=request_key)
        return result

    def get_run(self, run_id: str) -> JSONObject:
        """A run's counts and its completion gate, ``settled``."""
        result: JSONObject = self._do("getRun", {"id": run_id})
        return result

    def cancel_run(self, run_id: str, reason: str, *, actor: Optional[str] = None,
                   request_key: Optional[str] = None) -> JSONObject:
        """Cancel a run: ``{"run", "failed", "awaiting", "left"}``."""
        result: JSONObject = self._do("cancelRun", {"id": run_id}, body=_body(reason=reason, actor=actor),
                                      request_key=request_key)
        return result

    def wait_run(self, run_id: str, *, timeout: float = 60.0, events: bool = True) -> JSONObject:
        """Wait for the run's completion gate (``settled``: none of its effects PENDING or UNKNOWN)."""
        return self._wait(lambda: self.get_run(run_id), lambda r: bool(r.get("settled")),
                          ("tool.*", "effect.*", "run.*"), lambda ev: ev.run_id == run_id, timeout, f"run {run_id}",
                          events)

    # -- connectors and limits -----------------------------------------------------------

    def put_connector(
        self,
        name: str,
        dispatch_url: str,
        *,
        tags: Optional[Sequence[str]] = None,
        status_url: Optional[str] = None,
        compensate_url: Optional[str] = None,
        cancel_url: Optional[str] = None,
        business_key_fields: Optional[Sequence[str]] = None,
        timeout_ms: Optional[int] = None,
        max_attempts: Optional[int] = None,
        status_check_limit: Optional[int] = None,
        backoff_initial_ms: Optional[int] = None,
        backoff_max_ms: Optional[int] = None,
        unsafe: Optional[bool] = None,
        async_timeout_ms: Optional[int] = None,
        hard_timeout: Optional[bool] = None,
        requires_confirmation: Optional[bool] = None,
        confirmation_prompt: Optional[str] = None,
        limit: Optional[Mapping[str, Any]] = None,
        description: Optional[str] = None,
        args_schema: Optional[Mapping[str, Any]] = None,
        tenants: Optional[Sequence[str]] = None,
        ordering_key_fields: Optional[Sequence[str]] = None,
        dedup_by_business_key: Optional[bool] = None,
        request_key: Optional[str] = None,
    ) -> JSONObject:
        """Create or replace an HTTP connector (a system token): its URLs, policy and limits.

        ``description`` and ``args_schema`` (a JSON Schema of the args, checked at every enqueue)
        describe it as a tool (the MCP gateway's); ``tenants`` restricts it to those tenants.
        ``dedup_by_business_key`` makes the business key deduplicate: a second enqueue with the key
        while the first effect is not FAILED is its replay, or ``business_key_conflict`` (409).
        """
        result: JSONObject = self._do("putConnector", body=_body(
            name=name, dispatch_url=dispatch_url, tags=list(tags) if tags is not None else None,
            status_url=status_url, compensate_url=compensate_url, cancel_url=cancel_url,
            business_key_fields=list(business_key_fields) if business_key_fields is not None else None,
            timeout_ms=timeout_ms, max_attempts=max_attempts, status_check_limit=status_check_limit,
            backoff_initial_ms=backoff_initial_ms, backoff_max_ms=backoff_max_ms, unsafe=unsafe,
            async_timeout_ms=async_timeout_ms, hard_timeout=hard_timeout, requires_confirmation=requires_confirmation,
            confirmation_prompt=confirmation_prompt, limit=dict(limit) if limit is not None else None,
            description=description, args_schema=dict(args_schema) if args_schema is not None else None,
            tenants=list(tenants) if tenants is not None else None,
            ordering_key_fields=list(ordering_key_fields) if ordering_key_fields is not None else None,
            dedup_by_business_key=dedup_by_business_key),
            request_key=request_key)
        return result

    def list_connectors(self) -> list[JSONObject]:
        """Every HTTP connector, by name."""
        return list(self._do("listConnectors").get("connectors", []))

    def get_connector(self, name: str) -> JSONObject:
        result: JSONObject = self._do("getConnector", {"name": name})
        return result

    def delete_connector(self, name: str, *, request_key: Optional[str] = None) -> JSONObject:
        """Delete a connector (a system token); ``409 connector_in_use`` while it has open effects."""
        result: JSONObject = self._do("deleteConnector", {"name": name}, request_key=request_key)
        return result

    def list_limits(self) -> JSONObject:
        """Every operator's limit and the state of every limit key: ``{"limits", "states"}``."""
        result: JSONObject = self._do("listLimits")
        return result

    def get_limit(self, connector: str) -> JSONObject:
        """A connector's operator's limit and its keys; ``NotFound`` when it has none."""
        result: JSONObject = self._do("getLimit", {"name": connector})
        return result

    def put_limit(self, connector: str, *, rate: Optional[int] = None, per_ms: Optional[int] = None,
                  burst: Optional[int] = None, max_in_flight: Optional[int] = None,
                  per_tenant: Optional[bool] = None, break_after: Optional[int] = None,
                  break_for_ms: Optional[int] = None, reason: Optional[str] = None,
                  request_key: Optional[str] = None) -> JSONObject:
        """Set the operator's limit of a connector (a system token); every field optional."""
        result: JSONObject = self._do("putLimit", {"name": connector}, body=_body(
            rate=rate, per_ms=per_ms, burst=burst, max_in_flight=max_in_flight, per_tenant=per_tenant,
            break_after=break_after, break_for_ms=break_for_ms, reason=reason), request_key=request_key)
        return result

    def delete_limit(self, connector: str, *, request_key: Optional[str] = None) -> JSONObject:
        result: JSONObject = self._do("deleteLimit", {"name": connector}, request_key=request_key)
        return result

    def reset_limit(self, connector: str, *, request_key: Optional[str] = None) -> JSONObject:
        """Close the connector's circuits and end its pauses: ``{"connector", "reset"}``."""
        result: JSONObject = self._do("resetLimit", {"name": connector}, request_key=request_key)
        return result

    def list_pauses(self) -> list[JSONObject]:
        """The operators' pauses of connectors the token sees (every tenant's and its own)."""
        return list(self._do("listPauses").get("pauses", []))

    def pause_connector(self, connector: str, reason: str, *, tenant_id: Optional[str] = None,
                        actor: Optional[str] = None, request_key: Optional[str] = None) -> JSONObject:
        """Stop every reactor starting the connector's calls (one tenant's with ``tenant_id``) until
        it is resumed (a system token): the pause, with ``created`` false when it was paused already."""
        result: JSONObject = self._do("pauseConnector", {"name": connector}, body=_body(
            tenant_id=tenant_id, reason=reason, actor=actor), request_key=request_key)
        return result

    def resume_connector(self, connector: str, reason: str, *, tenant_id: Optional[str] = None,
                         actor: Optional[str] = None, request_key: Optional[str] = None) -> JSONObject:
        """End the connector's pause (of every tenant, or ``tenant_id``'s): ``{"connector",
        "tenant_id", "resumed"}``."""
        result: JSONObject = self._do("resumeConnector", {"name": connector}, body=_body(
            tenant_id=tenant_id, reason=reason, actor=actor), request_key=request_key)
        return result

    # -- sagas ---------------------------------------------------------------------------

    def put_saga_definition(self, name: str, steps: Sequence[Mapping[str, Any]], *,
                            compensation_attempts: Optional[int] = None,
                            request_key: Optional[str] = None) -> JSONObject:
        """Store a saga definition (a system token); definitions never change."""
        result: JSONObject = self._do("putSagaDefinition", body=_body(
            name=name, steps=[dict(s) for s in steps], compensation_attempts=compensation_attempts),
            request_key=request_key)
        return result

    def list_saga_definitions(self) -> list[JSONObject]:
        return list(self._do("listSagaDefinitions").get("definitions", []))

    def get_saga_definition(self, name: str) -> JSONObject:
        result: JSONObject = self._do("getSagaDefinition", {"name": name})
        return result

    def start_saga(self, definition: str, *, input: Optional[Mapping[str, Any]] = None,
                   start_key: Optional[str] = None, request_key: Optional[str] = None) -> JSONObject:
        """Start a saga of a stored definition; ``start_key`` makes the start idempotent."""
        result: JSONObject = self._do("startSaga", body=_body(
            definition=definition, input=dict(input) if input is not None else None, start_key=start_key),
            request_key=request_key)
        return result

    def get_saga(self, saga_id: str) -> JSONObject:
        result: JSONObject = self._do("getSaga", {"id": saga_id})
        return result

    def list_sagas(self, *, state: Optional[str] = None, definition: Optional[str] = None,
                   limit: Optional[int] = None, cursor: Optional[str] = None) -> JSONObject:
        """One page of sagas, newest first: ``{"sagas": [...], "next_cursor": ...}``."""
        result: JSONObject = self._do("listSagas", query={
            "state": state, "definition": definition, "limit": limit, "cursor": cursor})
        return result

    def iter_sagas(self, *, state: Optional[str] = None, definition: Optional[str] = None,
                   page_size: Optional[int] = None) -> Iterator[JSONObject]:
        cursor: Optional[str] = None
        while True:
            page = self.list_sagas(state=state, definition=definition, limit=page_size, cursor=cursor)
            yield from page.get("sagas", [])
            cursor = page.get("next_cursor")
            if not cursor:
                return

    def resolve_saga(self, saga_id: str, action: str, reason: str, *, actor: Optional[str] = None,
                     request_key: Optional[str] = None) -> JSONObject:
        """``retry_compensation`` or ``mark_compensated`` for a STUCK saga."""
        result: JSONObject = self._do("resolveSaga", {"id": saga_id},
                                      body=_body(action=action, reason=reason, actor=actor), request_key=request_key)
        return result

    def wait_saga(self, saga_id: str, *, timeout: float = 60.0, events: bool = True) -> JSONObject:
        """Wait until the saga is COMPLETED, COMPENSATED or STUCK."""
        return self._wait(lambda: self.get_saga(saga_id), lambda s: bool(s.get("state") in SAGA_SETTLED_STATES),
                          ("saga.*",), lambda ev: ev.saga_id == saga_id, timeout, f"saga {saga_id}", events)

    # -- sessions and turns --------------------------------------------------------------

    def post_message(self, session_key: str, message_id: str, *, content: Any = None, at: Optional[str] = None,
                     request_key: Optional[str] = None) -> JSONObject:
        """An inbound message of a session (``tenant:agent:interlocutor:channel``): ``{"message", "turn"}``."""
        result: JSONObject = self._do("postMessage", {"key": session_key},
                                      body=_body(message_id=message_id, content=content, at=at),
                                      request_key=request_key)
        return result

    def list_turns(self, session_key: str, *, limit: Optional[int] = None) -> list[JSONObject]:
        """The session's newest turns, oldest first."""
        return list(self._do("listTurns", {"key": session_key}, query={"limit": limit}).get("turns", []))

    def put_turn_handler(self, tenant: str, url: str, *, timeout_ms: Optional[int] = None,
                         request_key: Optional[str] = None) -> JSONObject:
        """Set where a tenant's turns go (its admin token, or a system token)."""
        result: JSONObject = self._do("putTurnHandler", {"tenant": tenant}, body=_body(url=url, timeout_ms=timeout_ms),
                                      request_key=request_key)
        return result

    def get_turn_handler(self, tenant: str) -> JSONObject:
        result: JSONObject = self._do("getTurnHandler", {"tenant": tenant})
        return result

    def delete_turn_handler(self, tenant: str, *, request_key: Optional[str] = None) -> JSONObject:
        result: JSONObject = self._do("deleteTurnHandler", {"tenant": tenant}, request_key=request_key)
        return result

    # -- schedules -----------------------------------------------------------------------

    def list_schedules(self, *, tenant: Optional[str] = None, limit: Optional[int] = None,
                       cursor: Optional[str] = None) -> JSONObject:
        """One page of schedules by tenant and name: ``{"schedules": [...], "next_cursor": ...}``."""
        result: JSONObject = self._do("listSchedules", query={"tenant": tenant, "limit": limit, "cursor": cursor})
        return result

    def get_schedule(self, tenant: str, name: str) -> JSONObject:
        result: JSONObject = self._do("getSchedule", {"tenant": tenant, "name": name})
        return result

    def put_schedule(self, tenant: str, name: str, connector: str, *, cron: Optional[str] = None,
                     interval_seconds: Optional[int] = None, args: Any = None, missed: Optional[str] = None,
                     enabled: Optional[bool] = None, request_key: Optional[str] = None) -> JSONObject:
        """Create or replace a schedule (its tenant's admin token, or a system token): ``cron`` or
        ``interval_seconds``; ``missed`` is ``skip`` (default) or ``catch_up``."""
        result: JSONObject = self._do("putSchedule", {"tenant": tenant, "name": name}, body=_body(
            connector=connector, args=args, cron=cron, interval_seconds=interval_seconds, missed=missed,
            enabled=enabled), request_key=request_key)
        return result

    def delete_schedule(self, tenant: str, name: str, *, request_key: Optional[str] = None) -> JSONObject:
        result: JSONObject = self._do("deleteSchedule", {"tenant": tenant, "name": name}, request_key=request_key)
        return result

    # -- events and subscriptions --------------------------------------------------------

    def events(self, *, patterns: Sequence[str] = (), after: Optional[str] = None, tenant: Optional[str] = None,
               last_event_id: Optional[str] = None, read_timeout: float = 45.0,
               reconnect_for: float = 60.0) -> EventStream:
        """The event log as an endless iterator of :class:`Event` that resumes across disconnects.

        ``after="0"`` starts at the oldest event kept, ``last_event_id`` resumes after an event
        of an earlier stream; with neither, the stream starts from now.
        """
        if isinstance(patterns, str):
            raise ValueError("patterns is a sequence of patterns, not one string")
        return EventStream(self._t, patterns=patterns, after=after, tenant=tenant, last_event_id=last_event_id,
                           read_timeout=read_timeout, reconnect_for=reconnect_for)

    def create_subscription(self, url: str, *, patterns: Optional[Sequence[str]] = None, tenant: Optional[str] = None,
                            secret: Optional[str] = None, request_key: Optional[str] = None) -> JSONObject:
        """A webhook subscription; the answer is the only place its ``secret`` is shown."""
        result: JSONObject = self._do("createSubscription", body=_body(
            url=url, patterns=list(patterns) if patterns is not None else None, tenant=tenant, secret=secret),
            request_key=request_key)
        return result

    def list_subscriptions(self, *, limit: Optional[int] = None) -> list[JSONObject]:
        return list(self._do("listSubscriptions", query={"limit": limit}).get("subscriptions", []))

    def get_subscription(self, subscription_id: str) -> JSONObject:
        result: JSONObject = self._do("getSubscription", {"id": subscription_id})
        return result

    def delete_subscription(self, subscription_id: str, *, request_key: Optional[str] = None) -> JSONObject:
        result: JSONObject = self._do("deleteSubscription", {"id": subscription_id}, request_key=request_key)
        return result

    def pause_subscription(self, subscription_id: str, *, reason: Optional[str] = None,
                           request_key: Optional[str] = None) -> JSONObject:
        result: JSONObject = self._do("pauseSubscription", {"id": subscription_id}, body=_body(reason=reason),
                                      request_key=request_key)
        return result

    def resume_subscription(self, subscription_id: str, *, request_key: Optional[str] = None) -> JSONObject:
        result: JSONObject = self._do("resumeSubscription", {"id": subscription_id}, request_key=request_key)
        return result

    # -- waiting -------------------------------------------------------------------------

    def _wait(self, fetch: Callable[[], JSONObject], done: Callable[[JSONObject], bool], patterns: Sequence[str],
              concerns: Callable[[Event], bool], timeout: float, what: str, use_stream: bool) -> JSONObject:
        if timeout <= 0:
            raise ValueError("timeout must be positive")
        deadline = time.monotonic() + timeout
        last_id: Optional[str] = None
        delay = 0.1
        seen: Optional[JSONObject] = None
        trouble: Optional[ReckonError] = None

        def look() -> Optional[JSONObject]:
            # A server restarting or busy is passing trouble: keep waiting until the deadline.
            nonlocal seen, trouble
            try:
                seen = fetch()
            except (TransportError, Unavailable, RateLimited) as e:
                trouble = e
                return None
            return seen

        while True:
            current = look()
            if current is not None and done(current):
                return current
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                if seen is None and trouble is not None:
                    raise trouble
                raise WaitTimeout(f"{what} did not settle within {timeout}s", seen)
            if use_stream and current is not None:
                try:
                    conn = SSEConnection(self._t, patterns=patterns, last_event_id=last_id,
                                         read_timeout=max(0.05, min(remaining, 20.0)))
                except (TransportError, Unavailable, RateLimited):
                    time.sleep(min(delay, remaining))
                    delay = min(delay * 2, 2.0)
                    continue
                except APIError:
                    use_stream = False  # the stream is refused: poll instead
                    continue
                try:
                    current = look()  # what changed before the stream started
                    if current is not None and done(current):
                        return current
                    for ev in conn:
                        last_id = ev.id
                        if concerns(ev):
                            break
                    delay = 0.1
                except TransportError:
                    pass  # silent or broken: look again, then resume after last_id
                finally:
                    conn.close()
            else:
                time.sleep(min(delay, remaining))
                delay = min(delay * 2, 2.0)
