"""The routes of Reckon's HTTP API this client uses, as data.

Every request the clients send goes through :func:`route`, and the transport refuses to
send a query parameter, header or body field that the route's entry does not list.  The
conformance tests hold this table to ``docs/openapi/api.json`` in both directions.
"""

from __future__ import annotations

from dataclasses import dataclass, field

IDEMPOTENCY_KEY = "Idempotency-Key"


@dataclass(frozen=True)
class Route:
    """One operation: its method, path template and what the client may send with it."""

    operation_id: str
    method: str
    path: str
    client_method: str
    query: frozenset[str] = frozenset()
    headers: frozenset[str] = frozenset()
    body: frozenset[str] = frozenset()
    # Body fields of the document the client deliberately never sends, and why.
    not_sent: dict[str, str] = field(default_factory=dict)


def _r(
    op: str,
    method: str,
    path: str,
    client_method: str,
    query: tuple[str, ...] = (),
    headers: tuple[str, ...] = (),
    body: tuple[str, ...] = (),
    not_sent: dict[str, str] | None = None,
) -> Route:
    if method in ("POST", "PUT", "DELETE"):
        headers = headers + (IDEMPOTENCY_KEY,)
    return Route(op, method, path, client_method, frozenset(query), frozenset(headers), frozenset(body),
                 dict(not_sent or {}))


_DECISION = ("reason", "actor")
_PAUSE = ("tenant_id", "reason", "actor")
_LIMIT = ("rate", "per_ms", "burst", "max_in_flight", "per_tenant", "break_after", "break_for_ms", "reason")
_CONNECTOR = (
    "name", "tags", "dispatch_url", "status_url", "compensate_url", "cancel_url", "business_key_fields",
    "ordering_key_fields", "dedup_by_business_key",
    "timeout_ms", "max_attempts", "status_check_limit", "backoff_initial_ms", "backoff_max_ms", "unsafe",
    "async_timeout_ms", "hard_timeout", "requires_confirmation", "confirmation_prompt", "limit",
    "description", "args_schema", "tenants",
)
_READ_ONLY = "set by the server; echoed in answers, never sent"

ROUTES: tuple[Route, ...] = (
    _r("getOpenAPI", "GET", "/openapi.json", "openapi"),
    _r("getConnectorOpenAPI", "GET", "/openapi/connector.json", "connector_openapi"),
    # Effects
    _r("enqueueEffect", "POST", "/v1/effects", "enqueue", body=(
        "connector", "args", "idempotency_key", "position", "business_key", "run_id", "turn_id", "turn_group",
        "max_attempts", "async_timeout_ms", "async_hard_timeout", "require_confirmation", "confirmation_ttl_ms",
        "ordering_key")),
    _r("listEffects", "GET", "/v1/effects", "list_effects", query=("state", "connector", "run", "limit", "cursor")),
    _r("getEffect", "GET", "/v1/effects/{id}", "get_effect"),
    _r("resolveEffect", "POST", "/v1/effects/{id}/resolve", "resolve_effect", body=("to",) + _DECISION),
    _r("cancelEffect", "POST", "/v1/effects/{id}/cancel", "cancel_effect", body=_DECISION),
    _r("confirmEffect", "POST", "/v1/effects/{id}/confirm", "confirm_effect", body=_DECISION),
    _r("declineEffect", "POST", "/v1/effects/{id}/decline", "decline_effect", body=_DECISION),
    _r("redriveEffect", "POST", "/v1/effects/{id}/redrive", "redrive_effect", body=_DECISION),
    # Callbacks: with a tenant token, or signed with the effect's callback secret.
    _r("callback", "POST", "/v1/callbacks/{correlation_id}", "callback",
       headers=("Reckon-Effect-Id", "Reckon-Signature"), body=("result", "error")),
    # Runs
    _r("startRun", "POST", "/v1/runs", "create_run", body=("id", "max_steps", "max_consecutive_failures")),
    _r("getRun", "GET", "/v1/runs/{id}", "get_run"),
    _r("cancelRun", "POST", "/v1/runs/{id}/cancel", "cancel_run", body=_DECISION),
    # Connectors and their limits
    _r("putConnector", "POST", "/v1/connectors", "put_connector", body=_CONNECTOR,
       not_sent={"created_at": _READ_ONLY, "updated_at": _READ_ONLY}),
    _r("listConnectors", "GET", "/v1/connectors", "list_connectors"),
    _r("getConnector", "GET", "/v1/connectors/{name}", "get_connector"),
    _r("deleteConnector", "DELETE", "/v1/connectors/{name}", "delete_connector"),
    _r("listLimits", "GET", "/v1/limits", "list_limits"),
    _r("getLimit", "GET", "/v1/connectors/{name}/limit", "get_limit"),
    _r("putLimit", "PUT", "/v1/connectors/{name}/limit", "put_limit", body=_LIMIT),
    _r("deleteLimit", "DELETE", "/v1/connectors/{name}/limit", "delete_limit"),
    _r("resetLimit", "POST", "/v1/connectors/{name}/limit/reset", "reset_limit"),
    _r("listPauses", "GET", "/v1/pauses", "list_pauses"),
    _r("pauseConnector", "POST", "/v1/connectors/{name}/pause", "pause_connector", body=_PAUSE),
    _r("resumeConnector", "POST", "/v1/connectors/{name}/resume", "resume_connector", body=_PAUSE),
    # Sagas
    _r("putSagaDefinition", "POST", "/v1/saga-definitions", "put_saga_definition",
       body=("name", "steps", "compensation_attempts"), not_sent={"created_at": _READ_ONLY}),
    _r("listSagaDefinitions", "GET", "/v1/saga-definitions", "list_saga_definitions"),
    _r("getSagaDefinition", "GET", "/v1/saga-definitions/{name}", "get_saga_definition"),
    _r("startSaga", "POST", "/v1/sagas", "start_saga", body=("definition", "input", "start_key")),
    _r("listSagas", "GET", "/v1/sagas", "list_sagas", query=("state", "definition", "limit", "cursor")),
    _r("getSaga", "GET", "/v1/sagas/{id}", "get_saga"),
    _r("resolveSaga", "POST", "/v1/sagas/{id}/resolve", "resolve_saga", body=("action",) + _DECISION),
    # Sessions, turns and turn handlers
    _r("postMessage", "POST", "/v1/sessions/{key}/messages", "post_message", body=("message_id", "content", "at")),
    _r("listTurns", "GET", "/v1/sessions/{key}/turns", "list_turns", query=("limit",)),
    _r("putTurnHandler", "PUT", "/v1/turn-handlers/{tenant}", "put_turn_handler", body=("url", "timeout_ms")),
    _r("getTurnHandler", "GET", "/v1/turn-handlers/{tenant}", "get_turn_handler"),
    _r("deleteTurnHandler", "DELETE", "/v1/turn-handlers/{tenant}", "delete_turn_handler"),
    # Events and webhook subscriptions
    _r("streamEvents", "GET", "/v1/events", "events", query=("pattern", "after", "tenant"),
       headers=("Last-Event-ID",)),
    _r("createSubscription", "POST", "/v1/event-subscriptions", "create_subscription",
       body=("url", "patterns", "tenant", "secret")),
    _r("listSubscriptions", "GET", "/v1/event-subscriptions", "list_subscriptions", query=("limit",)),
    _r("getSubscription", "GET", "/v1/event-subscriptions/{id}", "get_subscription"),
    _r("deleteSubscription", "DELETE", "/v1/event-subscriptions/{id}", "delete_subscription"),
    _r("pauseSubscription", "POST", "/v1/event-subscriptions/{id}/pause", "pause_subscription", body=("reason",)),
    _r("resumeSubscription", "POST", "/v1/event-subscriptions/{id}/resume", "resume_subscription"),
    # Schedules: a tenant's periodic effects
    _r("listSchedules", "GET", "/v1/schedules", "list_schedules", query=("tenant", "limit", "cursor")),
    _r("getSchedule", "GET", "/v1/schedules/{tenant}/{name}", "get_schedule"),
    _r("putSchedule", "PUT", "/v1/schedules/{tenant}/{name}", "put_schedule",
       body=("connector", "args", "cron", "interval_seconds", "missed", "enabled")),
    _r("deleteSchedule", "DELETE", "/v1/schedules/{tenant}/{name}", "delete_schedule"),
)

BY_ID: dict[str, Route] = {r.operation_id: r for r in ROUTES}


def route(operation_id: str) -> Route:
    """The route of an operation id of the API document."""
    return BY_ID[operation_id]
