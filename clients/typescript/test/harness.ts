/**
 * Test fixtures: a fresh Postgres database, the real `server` and `reactor` binaries as child
 * processes on free ports, tokens, and fake upstreams that are real HTTP servers. Every process is
 * killed on teardown; their logs go to files printed when a test fails.
 */
import { execFile, spawn, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { createWriteStream, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { createServer as createNetServer } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { ReckonClient, type OutgoingRequest } from "@reckon/client";

const run = promisify(execFile);
const here = dirname(fileURLToPath(import.meta.url));
/** clients/typescript (tests run from build/test/). */
export const packageDir = resolve(here, "..", "..");
export const repoRoot = resolve(packageDir, "..", "..");

export const PG_URL = process.env.RECKON_TEST_PG_URL ?? "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable";

/** The directory of the server and reactor binaries: RECKON_BIN_DIR, or built once into build/bin. */
export async function binDir(): Promise<string> {
  const given = process.env.RECKON_BIN_DIR;
  if (given) {
    for (const b of ["server", "reactor"]) if (!existsSync(join(given, b))) throw new Error(`RECKON_BIN_DIR=${given} has no ${b} binary`);
    return given;
  }
  const dir = join(packageDir, "build", "bin");
  if (!existsSync(join(dir, "server")) || !existsSync(join(dir, "reactor"))) {
    mkdirSync(dir, { recursive: true });
    await run("go", ["build", "-o", dir, "./cmd/server", "./cmd/reactor"], { cwd: repoRoot, maxBuffer: 1 << 24 });
  }
  return dir;
}

export async function freePort(): Promise<number> {
  return new Promise((res, rej) => {
    const s = createNetServer();
    s.once("error", rej);
    s.listen(0, "127.0.0.1", () => {
      const a = s.address();
      s.close(() => (typeof a === "object" && a ? res(a.port) : rej(new Error("no port"))));
    });
  });
}

function dbUrl(name: string): string {
  const u = new URL(PG_URL);
  u.pathname = `/${name}`;
  return u.toString();
}

async function waitReady(url: string, proc: ChildProcess, log: string, ms = 30_000): Promise<void> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (proc.exitCode !== null) throw new Error(`${url}: process exited ${proc.exitCode}\n${tail(log)}`);
    try {
      const r = await fetch(url, { signal: AbortSignal.timeout(1000) });
      if (r.ok) return;
    } catch { /* not yet */ }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${url} not ready within ${ms} ms\n${tail(log)}`);
}

function tail(file: string, lines = 60): string {
  try { return readFileSync(file, "utf8").split("\n").slice(-lines).join("\n"); } catch { return ""; }
}

/** Requests recorded by every client of a stack (checked against the document by the conformance test). */
export const recorded: OutgoingRequest[] = [];

/** A running Reckon: Postgres database, server, reactor, tenant and tokens. */
export class Stack {
  readonly dir: string;
  readonly database: string;
  readonly databaseUrl: string;
  bin = "";
  serverPort = 0;
  reactorPort = 0;
  server?: ChildProcess;
  reactor?: ChildProcess;
  tenant = "acme";
  token = "";
  adminToken = "";
  systemToken = "";
  readonly #upstreams: Server[] = [];

  constructor() {
    this.dir = mkdtempSync(join(tmpdir(), "reckon-ts-"));
    this.database = `reckon_ts_${Date.now()}_${randomBytes(3).toString("hex")}`;
    this.databaseUrl = dbUrl(this.database);
  }

  get baseUrl(): string { return `http://127.0.0.1:${this.serverPort}`; }
  get serverLog(): string { return join(this.dir, "server.log"); }
  get reactorLog(): string { return join(this.dir, "reactor.log"); }

  async cli(...args: string[]): Promise<string> {
    const { stdout } = await run(join(this.bin, "server"), args, { env: { ...process.env, DATABASE_URL: this.databaseUrl } });
    return stdout.trim();
  }

  /** Migrates a fresh database, starts server and reactor, creates the tenant and tokens. */
  #serverArgs: string[] = [];

  async start(opts: { reactorArgs?: string[]; serverArgs?: string[] } = {}): Promise<this> {
    this.#serverArgs = opts.serverArgs ?? [];
    this.bin = await binDir();
    await this.cli("migrate", "up", "-create-db").catch((e: Error) => {
      throw new Error(`cannot migrate a fresh database on ${PG_URL} (is Postgres reachable? set RECKON_TEST_PG_URL): ${e.message}`);
    });
    this.serverPort = await freePort();
    this.reactorPort = await freePort();
    await this.cli("tenants", "create", this.tenant, "-name", "ACME");
    await this.cli("tenants", "create", "other", "-name", "Other");
    this.token = await this.cli("tokens", "create", "-tenant", this.tenant, "-name", "ts-tests");
    this.adminToken = await this.cli("tokens", "create", "-tenant", this.tenant, "-name", "ts-admin", "-admin");
    this.systemToken = await this.cli("tokens", "create", "-system", "-name", "ts-system");
    await this.startServer();
    await this.startReactor(opts.reactorArgs ?? []);
    return this;
  }

  #spawn(name: "server" | "reactor", args: string[], log: string): ChildProcess {
    const out = createWriteStream(log, { flags: "a" });
    const p = spawn(join(this.bin, name), args, {
      env: { ...process.env, DATABASE_URL: this.databaseUrl, RECKON_CONNECTOR_SYNC_INTERVAL: "1s", RECKON_LOG_LEVEL: "debug" },
      stdio: ["ignore", "pipe", "pipe"],
    });
    p.stdout?.pipe(out);
    p.stderr?.pipe(out);
    return p;
  }

  async startServer(): Promise<void> {
    this.server = this.#spawn("server", ["-addr", `127.0.0.1:${this.serverPort}`, ...this.#serverArgs], this.serverLog);
    await waitReady(`${this.baseUrl}/readyz`, this.server, this.serverLog);
  }

  async startReactor(extra: string[] = []): Promise<void> {
    this.reactor = this.#spawn("reactor", [
      "-addr", `127.0.0.1:${this.reactorPort}`, "-fetch-poll-interval", "100ms", "-fetch-cooldown", "20ms",
      "-sweep-interval", "1s", ...extra,
    ], this.reactorLog);
    await waitReady(`http://127.0.0.1:${this.reactorPort}/readyz`, this.reactor, this.reactorLog);
  }

  /** Waits until the reactor has loaded the HTTP connector (it reloads every second here), so that its effects are not snoozed. */
  async reactorKnows(connector: string): Promise<void> {
    await eventually(() => readFileSync(this.reactorLog, "utf8").includes(`connector=${connector}\n`) || readFileSync(this.reactorLog, "utf8").includes(`connector=${connector} `), 15_000, `the reactor loading ${connector}`);
  }

  /** Kills the server with SIGKILL (no graceful stop) and starts it again on the same port. */
  async killAndRestartServer(): Promise<void> {
    await kill(this.server, "SIGKILL");
    await this.startServer();
  }

  /** A client with the tenant token (or another), recording its requests. */
  client(token: string | null = this.token, extra: Partial<ConstructorParameters<typeof ReckonClient>[0]> = {}): ReckonClient {
    return new ReckonClient({ baseUrl: this.baseUrl, token: token ?? undefined, timeoutMs: 15_000, onRequest: (r) => recorded.push(r), ...extra });
  }

  /** Serves a request listener on a free 127.0.0.1 port until teardown. */
  async serve(listener: (req: IncomingMessage, res: ServerResponse) => void): Promise<string> {
    const srv = createServer(listener);
    await new Promise<void>((r) => srv.listen(0, "127.0.0.1", r));
    this.#upstreams.push(srv);
    const a = srv.address();
    if (typeof a !== "object" || !a) throw new Error("no address");
    return `http://127.0.0.1:${a.port}`;
  }

  /** Prints the logs (on failure). */
  dumpLogs(): void {
    console.error(`---- server log (${this.serverLog})\n${tail(this.serverLog)}\n---- reactor log (${this.reactorLog})\n${tail(this.reactorLog)}`);
  }

  async stop(): Promise<void> {
    for (const s of this.#upstreams) { s.closeAllConnections(); s.close(); }
    await Promise.all([kill(this.reactor, "SIGTERM"), kill(this.server, "SIGTERM")]);
    try {
      await run("psql", [PG_URL, "-q", "-c", `DROP DATABASE IF EXISTS "${this.database}" WITH (FORCE)`]);
    } catch (e) {
      console.error(`could not drop ${this.database}: ${(e as Error).message}`);
    }
    rmSync(this.dir, { recursive: true, force: true });
  }
}

async function kill(p: ChildProcess | undefined, signal: NodeJS.Signals): Promise<void> {
  if (!p || p.exitCode !== null || p.signalCode !== null) return;
  const exited = new Promise<void>((r) => p.once("exit", () => r()));
  p.kill(signal);
  const t = setTimeout(() => p.kill("SIGKILL"), 10_000);
  await exited;
  clearTimeout(t);
}

/** Polls until fn returns a truthy value (for conditions no API call waits for). */
export async function eventually<T>(fn: () => Promise<T | undefined | false> | T | undefined | false, ms = 30_000, what = "condition"): Promise<T> {
  const end = Date.now() + ms;
  let lastErr: unknown;
  while (Date.now() < end) {
    try {
      const v = await fn();
      if (v) return v;
    } catch (e) { lastErr = e; }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${what} did not hold within ${ms} ms${lastErr ? `: ${String(lastErr)}` : ""}`);
}

/** A unique name for this test process. */
export function unique(prefix: string): string {
  return `${prefix}-${Date.now().toString(36)}-${randomBytes(3).toString("hex")}`;
}
