"""The client held to docs/openapi/api.json, both ways (runs last: it checks every request the tests sent)."""

from __future__ import annotations

import inspect
import json
from pathlib import Path
from typing import Any

import pytest

import reckon
from reckon._routes import ROUTES

DOC = json.loads((Path(__file__).resolve().parents[3] / "docs" / "openapi" / "api.json").read_text())
# Where a document name differs from the client's parameter name.
ALIASES = {"pattern": "patterns", "Last-Event-ID": "last_event_id", "Idempotency-Key": "request_key",
           "Reckon-Effect-Id": "effect_id", "Reckon-Signature": "secret"}
OP_ALIASES = {("startRun", "id"): "run_id"}
STANDARD_HEADERS = {"Authorization", "Accept", "User-Agent", "Content-Type"}


def resolve(node: Any) -> Any:
    while isinstance(node, dict) and "$ref" in node:
        ref = node["$ref"].lstrip("#/").split("/")
        node = DOC
        for part in ref:
            node = node[part]
    return node


def doc_operations() -> dict[str, dict[str, Any]]:
    ops = {}
    for path, item in DOC["paths"].items():
        for method, op in item.items():
            if method == "parameters":
                continue
            params = [resolve(p) for p in item.get("parameters", []) + op.get("parameters", [])]
            schema = resolve(((op.get("requestBody") or {}).get("content") or {}).get("application/json", {})
                             .get("schema", {}))
            ops[op["operationId"]] = {
                "method": method.upper(), "path": path,
                "query": {p["name"] for p in params if p["in"] == "query"},
                "headers": {p["name"] for p in params if p["in"] == "header"},
                "path_params": {p["name"] for p in params if p["in"] == "path"},
                "body": set(resolve(schema).get("properties", {})) if schema else set(),
                "schema": schema,
            }
    return ops


OPS = doc_operations()


def test_every_documented_route_has_a_client_counterpart() -> None:
    table = {r.operation_id: r for r in ROUTES}
    missing = set(OPS) - set(table)
    assert not missing, f"routes of the document the client lacks: {sorted(missing)}"
    for op_id, r in table.items():
        assert op_id in OPS, f"{op_id}: the client has a route the document does not describe"
        d = OPS[op_id]
        assert (r.method, r.path) == (d["method"], d["path"]), op_id
        assert set(r.query) == d["query"], f"{op_id}: query {sorted(r.query)} vs document {sorted(d['query'])}"
        assert set(r.headers) == d["headers"], f"{op_id}: headers {sorted(r.headers)} vs {sorted(d['headers'])}"
        assert set(r.body) | set(r.not_sent) == d["body"], f"{op_id}: body {sorted(r.body)} vs {sorted(d['body'])}"
        assert not set(r.body) & set(r.not_sent)


@pytest.mark.parametrize("cls", [reckon.Client, reckon.AsyncClient])
def test_every_field_is_a_parameter_of_the_client_method(cls: type) -> None:
    for r in ROUTES:
        method = getattr(cls, r.client_method, None)
        assert method is not None, f"{cls.__name__}.{r.client_method} ({r.operation_id}) is missing"
        params = set(inspect.signature(method).parameters)
        for name in set(r.query) | set(r.headers) | set(r.body):
            want = OP_ALIASES.get((r.operation_id, name), ALIASES.get(name, name))
            assert want in params, f"{cls.__name__}.{r.client_method} has no parameter for {name!r} ({want})"
        if r.operation_id in OPS:
            assert len(OPS[r.operation_id]["path_params"]) <= len(params) - 1


def _nested_ok(value: Any, schema: Any, where: str) -> list[str]:
    schema = resolve(schema)
    problems: list[str] = []
    for alt in ("oneOf", "anyOf"):
        if alt in schema and isinstance(value, dict) and "properties" not in schema:
            return problems
    if isinstance(value, dict) and isinstance(schema, dict) and "properties" in schema:
        props = schema["properties"]
        for k, v in value.items():
            if k not in props:
                if schema.get("additionalProperties", True) is False:
                    problems.append(f"{where}.{k}")
                continue
            problems += _nested_ok(v, props[k], f"{where}.{k}")
    elif isinstance(value, list) and isinstance(schema, dict) and "items" in schema:
        for i, item in enumerate(value):
            problems += _nested_ok(item, schema["items"], f"{where}[{i}]")
    return problems


def test_every_request_sent_during_the_tests_is_documented(
        requests_log: list[reckon.RequestInfo], request: pytest.FixtureRequest) -> None:
    if len(request.session.items) > 10:
        assert len(requests_log) > 100, "the integration tests recorded too few requests"
    used = set()
    for info in requests_log:
        used.add(info.operation_id)
        d = OPS[info.operation_id]
        assert info.method == d["method"]
        assert set(info.query) <= d["query"], (info.operation_id, info.query)
        assert set(info.headers) - STANDARD_HEADERS <= d["headers"], (info.operation_id, info.headers)
        if info.body is not None:
            assert set(info.body) <= d["body"], (info.operation_id, info.body)
            assert not _nested_ok(info.body, d["schema"], "body"), (info.operation_id, info.body)
    if len(request.session.items) > 10:
        untested = {r.operation_id for r in ROUTES} - used - {"getOpenAPI", "getConnectorOpenAPI"}
        assert not untested, f"routes no integration test called: {sorted(untested)}"


def test_served_documents_match_the_repository(client: reckon.Client) -> None:
    assert client.openapi()["paths"].keys() == DOC["paths"].keys()
    assert "webhooks" in client.connector_openapi()


def test_async_client_has_the_surface_of_the_client() -> None:
    public = {n for n in dir(reckon.Client) if not n.startswith("_")} - {"close"}  # AsyncClient: aclose
    assert inspect.iscoroutinefunction(reckon.AsyncClient.aclose)
    missing = public - {n for n in dir(reckon.AsyncClient) if not n.startswith("_")}
    assert not missing, f"AsyncClient lacks {sorted(missing)}"
    for name in public - {"base_url", "console_url", "events", "iter_effects", "iter_sagas"}:
        sync_params = list(inspect.signature(getattr(reckon.Client, name)).parameters)
        async_params = list(inspect.signature(getattr(reckon.AsyncClient, name)).parameters)
        assert sync_params == async_params, name
        assert inspect.iscoroutinefunction(getattr(reckon.AsyncClient, name)), name
