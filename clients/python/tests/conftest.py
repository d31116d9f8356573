"""Session fixtures: a fresh database, the real server and reactor, fake upstreams, clients.

Postgres is ``RECKON_TEST_PG_URL`` (default the local one); the binaries come from
``RECKON_BIN_DIR`` or are built from the repository.  Nothing is skipped: without Postgres
or binaries every test errors.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

import reckon
from harness import ASGIUpstream, Bank, Stack, WSGIUpstream, binaries, make_client

PG = os.environ.get("RECKON_TEST_PG_URL", "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable")

_stacks: list[Stack] = []


@pytest.fixture(scope="session")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("reckon")


@pytest.fixture(scope="session")
def bindir(workdir: Path) -> Path:
    return binaries(workdir)


@pytest.fixture(scope="session")
def stack(bindir: Path, workdir: Path) -> Iterator[Stack]:
    s = Stack(bindir, PG, workdir)
    _stacks.append(s)
    try:
        s.migrate()
        _, s.url = s.server()
        s.reactor()
        s.cli("tenants", "create", "acme")
        s.cli("tenants", "create", "globex")
        s.token = s.cli("tokens", "create", "-tenant", "acme", "-name", "py")
        s.token_b = s.cli("tokens", "create", "-tenant", "acme", "-name", "py-b")
        s.admin_token = s.cli("tokens", "create", "-tenant", "acme", "-name", "py-admin", "-admin")
        s.system_token = s.cli("tokens", "create", "-system", "-name", "py-system")
        s.other_token = s.cli("tokens", "create", "-tenant", "globex", "-name", "py-other")
        yield s
    finally:
        s.stop()
        s.drop_database()


@pytest.fixture(scope="session")
def requests_log() -> list[reckon.RequestInfo]:
    """Every request the clients of the tests sent: the conformance test checks them."""
    return []


@pytest.fixture(scope="session")
def client(stack: Stack, requests_log: list[reckon.RequestInfo]) -> reckon.Client:
    return make_client(stack.url, stack.token, requests_log)


@pytest.fixture(scope="session")
def system(stack: Stack, requests_log: list[reckon.RequestInfo]) -> reckon.Client:
    return make_client(stack.url, stack.system_token, requests_log)


@pytest.fixture(scope="session")
def admin(stack: Stack, requests_log: list[reckon.RequestInfo]) -> reckon.Client:
    return make_client(stack.url, stack.admin_token, requests_log)


@pytest.fixture(scope="session")
def other(stack: Stack, requests_log: list[reckon.RequestInfo]) -> reckon.Client:
    return make_client(stack.url, stack.other_token, requests_log)


@pytest.fixture(scope="session")
def bank() -> Bank:
    return Bank()


@pytest.fixture(scope="session")
def upstreams(bank: Bank) -> Iterator[dict[str, Any]]:
    app = bank.connector()
    w = WSGIUpstream(app.wsgi, bank.should_drop)
    a = ASGIUpstream(app.asgi, bank.should_drop)
    yield {"wsgi": w, "asgi": a}
    w.close()
    a.close()


def register(system: reckon.Client, name: str, url: str, **kw: Any) -> None:
    opts: dict[str, Any] = dict(tags=["write", "external", "network"], status_url=url + "/status",
                                compensate_url=url + "/compensate", cancel_url=url + "/cancel", timeout_ms=5000,
                                max_attempts=5, status_check_limit=5, backoff_initial_ms=100, backoff_max_ms=1000)
    opts.update(kw)
    system.put_connector(name, url + "/dispatch", **opts)


@pytest.fixture(scope="session")
def connectors(system: reckon.Client, upstreams: dict[str, Any]) -> dict[str, str]:
    """Connector names by server kind: ``wsgi`` and ``asgi``, in front of the same bank."""
    names = {}
    for kind, up in upstreams.items():
        name = f"bank.{kind}"
        register(system, name, up.url)
        names[kind] = name
    register(system, "bank.unsure", upstreams["wsgi"].url, status_check_limit=1)
    # Reactors reload connectors every second (-connector-sync-interval 1s); one enqueued for a
    # connector a reactor has not loaded yet waits for a later dispatch (about 30 s).
    time.sleep(2.5)
    return names


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    if report.failed:
        for s in _stacks:
            for p in s.procs:
                report.sections.append((f"{p.name} log ({p.log})", p.tail(40)))


@pytest.fixture(scope="session")
def client_b(stack: Stack, requests_log: list[reckon.RequestInfo]) -> reckon.Client:
    """Another token of the client's tenant (a second person)."""
    return make_client(stack.url, stack.token_b, requests_log)
