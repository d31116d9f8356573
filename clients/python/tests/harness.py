"""Real parts for the tests: Postgres, the server and reactor binaries, and fake upstreams."""

from __future__ import annotations

import asyncio
import os
import secrets
import signal
import socket
import subprocess
import threading
import time
import urllib.request
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from socketserver import ThreadingMixIn
from typing import Any, Callable, Optional
from urllib.parse import urlsplit, urlunsplit
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import reckon
from reckon.connector import Absent, Accepted, Call, Connector, Present, Rejected, Retryable

REPO = Path(__file__).resolve().parents[3]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def binaries(tmp: Path) -> Path:
    """RECKON_BIN_DIR, or server and reactor built from the repository into tmp."""
    given = os.environ.get("RECKON_BIN_DIR")
    if given:
        d = Path(given)
        for b in ("server", "reactor"):
            if not (d / b).exists():
                raise RuntimeError(f"RECKON_BIN_DIR={given} has no {b}")
        return d
    out = tmp / "bin"
    out.mkdir(parents=True, exist_ok=True)
    print(f"building server and reactor into {out}", flush=True)
    subprocess.run(["go", "build", "-o", str(out), "./cmd/server", "./cmd/reactor"], cwd=REPO, check=True)
    return out


def database_url(base: str, name: str) -> str:
    parts = urlsplit(base)
    return urlunsplit(parts._replace(path="/" + name))


@dataclass
class Proc:
    """A child process with its log file."""

    name: str
    args: list[str]
    log: Path
    env: dict[str, str]
    popen: Optional[subprocess.Popen[bytes]] = None

    def start(self) -> None:
        fh = open(self.log, "ab")
        self.popen = subprocess.Popen(self.args, stdout=fh, stderr=subprocess.STDOUT, env=self.env)
        fh.close()

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.popen is None or self.popen.poll() is not None:
            return
        self.popen.send_signal(sig)
        try:
            self.popen.wait(15)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            self.popen.wait(5)

    def tail(self, n: int = 60) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""


def wait_ready(url: str, proc: Proc, timeout: float = 30.0, path: str = "/readyz") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.popen is not None and proc.popen.poll() is not None:
            raise RuntimeError(f"{proc.name} exited ({proc.popen.returncode}):\n{proc.tail()}")
        try:
            with urllib.request.urlopen(url + path, timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"{proc.name} not ready at {url} within {timeout}s:\n{proc.tail()}")


# RECKON_TEST_CITUS=1: RECKON_TEST_PG_URL is a Citus coordinator, and the stack is a Citus cell in
# its database (`server migrate up -schema NAME -citus`) instead of a database of its own.
CITUS = os.environ.get("RECKON_TEST_CITUS") == "1"


class Stack:
    """A database (or a Citus cell), its migrations, a server and a reactor; tenants and tokens made
    with the CLI."""

    def __init__(self, bindir: Path, pg_base: str, workdir: Path) -> None:
        self.bindir = bindir
        self.pg_base = pg_base
        self.dbname = "reckon_pytest_" + secrets.token_hex(4)
        self.db = pg_base if CITUS else database_url(pg_base, self.dbname)
        self.workdir = workdir
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("RECKON_")}
        self.env["DATABASE_URL"] = self.db
        if CITUS:
            self.env["RECKON_SCHEMA"] = self.dbname
        self.procs: list[Proc] = []
        self.url = ""
        self.token = self.token_b = self.admin_token = self.system_token = self.other_token = ""

    def cli(self, *args: str) -> str:
        r = subprocess.run([str(self.bindir / "server"), *args], env=self.env, capture_output=True, text=True,
                           timeout=60)
        if r.returncode != 0:
            raise RuntimeError(f"server {' '.join(args)}: exit {r.returncode}: {r.stderr}")
        return r.stdout.strip()

    def migrate(self) -> None:
        self.cli("migrate", "up", "-citus" if CITUS else "-create-db")

    def server(self, name: str = "server", port: Optional[int] = None, *extra: str, ready: bool = True,
               env: Optional[dict[str, str]] = None) -> tuple[Proc, str]:
        port = port or free_port()
        p = Proc(name, [str(self.bindir / "server"), "-addr", f"127.0.0.1:{port}", "-connector-sync-interval", "1s",
                        *extra], self.workdir / f"{name}.log", env or self.env)
        p.start()
        self.procs.append(p)
        url = f"http://127.0.0.1:{port}"
        wait_ready(url, p, path="/readyz" if ready else "/healthz")
        return p, url

    def reactor(self, name: str = "reactor") -> Proc:
        port = free_port()
        p = Proc(name, [str(self.bindir / "reactor"), "-addr", f"127.0.0.1:{port}", "-connector-sync-interval", "1s",
                        "-fetch-poll-interval", "200ms", "-sweep-interval", "1s", "-turn-not-ready-delay", "1s"],
                 self.workdir / f"{name}.log", self.env)
        p.start()
        self.procs.append(p)
        wait_ready(f"http://127.0.0.1:{port}", p)
        return p

    def stop(self) -> None:
        for p in reversed(self.procs):
            p.stop()

    def drop_database(self) -> None:
        drop = (f'DROP SCHEMA IF EXISTS "{self.dbname}", "{self.dbname}_river" CASCADE' if CITUS
                else f'DROP DATABASE IF EXISTS "{self.dbname}" WITH (FORCE)')
        subprocess.run(["psql", self.pg_base, "-q", "-c", drop], capture_output=True, timeout=60)


# -- fake upstreams -----------------------------------------------------------------------

@dataclass
class Bank:
    """A fake upstream that honours idempotency keys: its state is what the tests assert on.

    The effect's args choose its behaviour: ``mode`` ok | reject | retry | drop | accept |
    fail_then_ok | unsure | reject_once (rejected at its first dispatch, performed at the next: an
    outage, then a redrive).
    """

    performed: dict[str, Any] = field(default_factory=dict)
    performs: dict[str, int] = field(default_factory=dict)
    calls: list[tuple[str, str, int]] = field(default_factory=list)
    compensated: dict[str, Any] = field(default_factory=dict)
    accepted: dict[str, Call] = field(default_factory=dict)
    cancelled: list[str] = field(default_factory=list)
    drop: set[str] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def dispatch(self, call: Call) -> Any:
        saga_input = call.args.get("input")
        mode = call.args.get("mode") or (saga_input.get("mode") if isinstance(saga_input, dict) else None) or "ok"
        if isinstance(saga_input, dict) and call.idempotency_key.endswith(f"/step-{saga_input.get('fail_step')}"):
            mode = "reject"
        with self.lock:
            self.calls.append(("dispatch", call.idempotency_key, call.attempt))
            if call.idempotency_key in self.performed:
                return self.performed[call.idempotency_key]
        if mode == "reject":
            raise Rejected(f"refused: {call.args.get('why', 'no')}")
        if mode == "reject_once":
            with self.lock:
                mine = [k for (k, key, _) in self.calls if k == "dispatch" and key == call.idempotency_key]
                first = mine == ["dispatch"]
            if first:
                raise Rejected("refused: outage")
        if mode == "retry" and call.attempt == 1:
            raise Retryable("busy", after=1)
        if mode == "accept":
            with self.lock:
                self.accepted[call.effect_id] = call
            raise Accepted()
        result = {"done": call.idempotency_key, "args": call.args, "n": len(self.performed) + 1}
        with self.lock:
            self.performed[call.idempotency_key] = result
            self.performs[call.idempotency_key] = self.performs.get(call.idempotency_key, 0) + 1
            if mode == "dup":  # it went through twice upstream (say, a retry of its own)
                self.performs[call.idempotency_key] += 1
            if mode in ("drop", "unsure", "dup") and call.attempt == 1:
                self.drop.add(call.effect_id)
        return result

    def status(self, call: Call) -> Any:
        with self.lock:
            self.calls.append(("status", call.idempotency_key, call.attempt))
            saga_input = call.args.get("input")
            saga_mode = saga_input.get("mode") if isinstance(saga_input, dict) else None
            if call.args.get("unsure") or "unsure" in (call.args.get("mode"), saga_mode):
                from reckon.connector import Inconclusive
                return Inconclusive()
            if call.idempotency_key in self.performed:
                count = self.performs.get(call.idempotency_key, 1)
                if count > 1:
                    from reckon.connector import Duplicate
                    return Duplicate(count, self.performed[call.idempotency_key])
                return Present(self.performed[call.idempotency_key])
        return Absent()

    def compensate(self, call: Call) -> Any:
        assert call.original is not None
        with self.lock:
            self.calls.append(("compensate", call.idempotency_key, call.attempt))
            self.compensated.setdefault(call.original.effect_id, call.original.result)
        return {"undone": call.original.effect_id}

    def cancel(self, call: Call) -> bool:
        with self.lock:
            self.cancelled.append(call.effect_id)
        return True

    def connector(self) -> Connector:
        return Connector(dispatch=self.dispatch, status=self.status, compensate=self.compensate, cancel=self.cancel)

    def should_drop(self, effect_id: Optional[str]) -> bool:
        with self.lock:
            if effect_id and effect_id in self.drop:
                self.drop.discard(effect_id)
                return True
        return False


class _Handler(WSGIRequestHandler):
    def get_environ(self) -> dict[str, Any]:
        env = dict(super().get_environ())
        env["test.socket"] = self.connection
        return env

    def log_message(self, format: str, *args: Any) -> None:
        pass


class _ThreadingWSGIServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass


class WSGIUpstream:
    """A WSGI app served by wsgiref on 127.0.0.1 in a thread; ``drop`` cuts a connection after the app ran."""

    def __init__(self, app: Callable[..., Any], drop: Callable[[Optional[str]], bool] = lambda _: False) -> None:
        def wrapped(environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
            out = app(environ, start_response)
            if drop(environ.get("HTTP_RECKON_EFFECT_ID")):
                sock = environ["test.socket"]
                sock.shutdown(socket.SHUT_RDWR)
                return []
            return out

        self.httpd = make_server("127.0.0.1", 0, wrapped, server_class=_ThreadingWSGIServer, handler_class=_Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_port}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


class _Drop(Exception):
    pass


class ASGIUpstream:
    """A minimal HTTP/1.1 server for an ASGI app (one request per connection), on its own loop and thread."""

    def __init__(self, app: Callable[..., Any], drop: Callable[[Optional[str]], bool] = lambda _: False) -> None:
        self.app = app
        self.drop = drop
        self.loop = asyncio.new_event_loop()
        started = threading.Event()
        self.port = 0

        async def main() -> None:
            self.server = await asyncio.start_server(self._conn, "127.0.0.1", 0)
            self.port = self.server.sockets[0].getsockname()[1]
            started.set()

        self.thread = threading.Thread(target=lambda: (self.loop.run_until_complete(main()), self.loop.run_forever()),
                                       daemon=True)
        self.thread.start()
        started.wait(10)
        self.url = f"http://127.0.0.1:{self.port}"

    async def _conn(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            method, target, _ = lines[0].split(" ", 2)
            headers = [(k.strip().lower().encode(), v.strip().encode())
                       for k, _, v in (ln.partition(":") for ln in lines[1:] if ln)]
            hmap = {k.decode(): v.decode() for k, v in headers}
            left = int(hmap.get("content-length", "0"))
            path, _, query = target.partition("?")
            scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method,
                     "path": path, "raw_path": path.encode(), "query_string": query.encode(), "headers": headers}
            sent: list[dict[str, Any]] = []
            done = False

            async def receive() -> dict[str, Any]:  # the body in chunks, read when asked for
                nonlocal left, done
                if done:
                    return {"type": "http.disconnect"}
                chunk = await reader.readexactly(min(left, 65536)) if left else b""
                left -= len(chunk)
                done = left == 0
                return {"type": "http.request", "body": chunk, "more_body": not done}

            async def send(message: dict[str, Any]) -> None:
                sent.append(message)

            await self.app(scope, receive, send)
            if self.drop(hmap.get("reckon-effect-id")):
                writer.transport.abort()
                return
            start = next(m for m in sent if m["type"] == "http.response.start")
            out = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
            resp = [f"HTTP/1.1 {start['status']} X".encode()]
            resp += [k + b": " + v for k, v in start["headers"] if k.lower() != b"connection"]
            resp += [b"Connection: close", b"", b""]
            writer.write(b"\r\n".join(resp) + out)
            await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    def close(self) -> None:
        async def stop() -> None:
            self.server.close()

        asyncio.run_coroutine_threadsafe(stop(), self.loop).result(5)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def eventually(fn: Callable[[], Any], timeout: float = 30.0, interval: float = 0.1) -> Any:
    """fn()'s first truthy value, polling; AssertionError after timeout."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = fn()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"not true within {timeout}s; last: {last!r}")


def make_client(url: str, token: Optional[str], log: Optional[list[reckon.RequestInfo]] = None,
                **kw: Any) -> reckon.Client:
    return reckon.Client(url, token, on_request=log.append if log is not None else None, **kw)
