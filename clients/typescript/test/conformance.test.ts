/**
 * The client held to docs/openapi/api.json and connector.json: every operation of the document has
 * a route in the client's table with the same parameters, headers and body fields, and the table
 * describes nothing the document does not; every route of the table is called by ReckonClient; the
 * connector and turn-handler helpers accept exactly the requests connector.json describes and answer
 * with its statuses. (Requests recorded during the integration tests are checked in each file too.)
 */
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { Accepted, Rejected, Retryable, connectorHandler, routes, turnHandler, absent, type Json } from "@reckon/client";
import { bodyFieldsOf, docOperation, loadApiDoc, norm, paramsOf } from "./conformance-check.js";
import { packageDir, repoRoot } from "./harness.js";

const doc = loadApiDoc();
const METHODS = ["get", "post", "put", "delete", "patch"];

describe("api.json ↔ the route table", () => {
  it("every operation of the document has a route in the client", () => {
    const table = new Set(Object.values(routes).map((r) => `${r.method} ${norm(r.path)}`));
    const missing: string[] = [];
    for (const [p, ops] of Object.entries(doc.paths)) {
      for (const m of Object.keys(ops)) if (METHODS.includes(m) && !table.has(`${m.toUpperCase()} ${norm(p)}`)) missing.push(`${m.toUpperCase()} ${p}`);
    }
    assert.deepEqual(missing, []);
  });

  for (const [id, r] of Object.entries(routes)) {
    it(`${id}: ${r.method} ${r.path} matches the document both ways`, () => {
      const op = docOperation(doc, r.method, r.path);
      assert.ok(op, `${r.method} ${r.path} is not in the document`);
      assert.equal((op as { operationId?: string }).operationId, id, "the table's key is the document's operationId");
      const params = paramsOf(doc, op);
      const docQuery = params.filter((p) => p.in === "query").map((p) => p.name).sort();
      assert.deepEqual([...r.query].sort(), docQuery, "query parameters");
      const docHeaders = params.filter((p) => p.in === "header").map((p) => p.name.toLowerCase()).sort();
      assert.deepEqual(r.headers.map((h) => h.toLowerCase()).sort(), docHeaders, "headers");
      const docPath = params.filter((p) => p.in === "path").map((p) => p.name).sort();
      const tablePath = [...r.path.matchAll(/\{([^}]+)\}/g)].map((m) => m[1]).sort();
      assert.deepEqual(tablePath, docPath, "path parameters");
      const fields = bodyFieldsOf(doc, op);
      assert.deepEqual(r.body === null ? null : [...r.body].sort(), fields === null ? null : [...fields].sort(), "body fields");
    });
  }

  it("the README targets this repository's schema (its newest migration)", () => {
    const ups = readdirSync(join(repoRoot, "db", "migrations")).filter((f) => f.endsWith(".up.sql"));
    const newest = String(Math.max(...ups.map((f) => Number(f.slice(0, 4))))).padStart(4, "0");
    assert.match(readFileSync(join(packageDir, "README.md"), "utf8"), new RegExp(`migrations 0001 to ${newest}`));
  });

  it("ReckonClient calls every route of the table", () => {
    const src = readFileSync(join(packageDir, "dist", "client.js"), "utf8") + readFileSync(join(packageDir, "dist", "events.js"), "utf8");
    const unused = Object.keys(routes).filter((id) => !src.includes(`"${id}"`));
    assert.deepEqual(unused, []);
  });
});

// ---- connector.json ↔ the upstream helpers

type Schema = { required?: string[]; properties?: Record<string, unknown> };
const cdoc = JSON.parse(readFileSync(join(repoRoot, "docs", "openapi", "connector.json"), "utf8")) as {
  webhooks: Record<string, { post: { parameters: Array<{ name: string; required?: boolean }>; responses: Record<string, unknown> } }>;
  components: { schemas: Record<string, Schema & { oneOf?: Array<{ properties: { status: { const: string } } }> }> };
};

function connectorCall(path: string, body: Record<string, unknown>, headers: Record<string, string>) {
  return new Request(`http://upstream${path}`, { method: "POST", body: JSON.stringify(body), headers: { "content-type": "application/json", ...headers } });
}

function sample(kind: "dispatch" | "status" | "compensate" | "cancel") {
  const id = randomUUID();
  const body: Record<string, unknown> = { effect_id: id, idempotency_key: "k-1", business_key: null, args: { a: 1 }, attempt: 1, correlation_id: `run:${id}` };
  if (kind === "compensate") body.original = { effect_id: randomUUID(), result: { ok: true } };
  const headers: Record<string, string> = { "Idempotency-Key": "k-1", "Reckon-Effect-Id": id, "Reckon-Attempt": "1", "Reckon-Correlation-Id": `run:${id}`, traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", tracestate: "x=1" };
  if (kind !== "status") headers["Reckon-Callback-Secret"] = "ab".repeat(32);
  return { body, headers };
}

describe("connector.json ↔ the connector helper", () => {
  const seen: Array<Record<string, unknown>> = [];
  const handler = connectorHandler({
    dispatch: (c) => { seen.push({ ...c }); const a = c.args as { mode?: string }; if (a.mode === "reject") throw new Rejected("no"); if (a.mode === "retry") throw new Retryable({ after: 7 }); if (a.mode === "accept") throw new Accepted("corr-1"); if (a.mode === "boom") throw new Error("?"); return { ok: true }; },
    statusCheck: () => absent(),
    compensate: (c) => ({ undone: c.original?.result ?? null } as Json),
    cancel: () => true,
  }, { onError: () => {} });
  const ops: Record<string, "dispatch" | "status" | "compensate" | "cancel"> = {
    connectorDispatch: "dispatch", connectorStatusCheck: "status", connectorCompensate: "compensate", connectorCancel: "cancel",
  };

  it("the call carries every header and body field the document describes", async () => {
    const req = cdoc.components.schemas.ConnectorRequest!;
    for (const [op, kind] of Object.entries(ops)) {
      const { body, headers } = sample(kind);
      for (const f of req.required ?? []) assert.ok(f in body, `${op}: sample lacks ${f}`);
      for (const p of cdoc.webhooks[op]!.post.parameters) assert.ok(Object.keys(headers).some((h) => h.toLowerCase() === p.name.toLowerCase()), `${op}: sample lacks header ${p.name}`);
      const res = await handler(connectorCall(`/${kind}`, body, headers));
      assert.ok(Object.keys(cdoc.webhooks[op]!.post.responses).includes(String(res.status)), `${op}: answered ${res.status}`);
    }
    const call = seen.at(-1)!;
    for (const k of ["effectId", "idempotencyKey", "businessKey", "args", "attempt", "correlationId", "callbackSecret", "traceparent", "tracestate"]) {
      assert.notEqual(call[k], undefined, `ConnectorCall.${k}`);
    }
  });

  it("a call missing a required field or header, or with an unknown field, is refused with 400", async () => {
    const req = cdoc.components.schemas.ConnectorRequest!;
    for (const f of req.required ?? []) {
      const { body, headers } = sample("dispatch");
      delete body[f];
      assert.equal((await handler(connectorCall("/dispatch", body, headers))).status, 400, `without ${f}`);
    }
    for (const p of cdoc.webhooks.connectorDispatch!.post.parameters.filter((x) => x.required)) {
      const { body, headers } = sample("dispatch");
      delete headers[p.name];
      assert.equal((await handler(connectorCall("/dispatch", body, headers))).status, 400, `without header ${p.name}`);
    }
    const { body, headers } = sample("dispatch");
    assert.equal((await handler(connectorCall("/dispatch", { ...body, extra: 1 }, headers))).status, 400);
    const c = sample("compensate");
    delete c.body.original;
    assert.equal((await handler(connectorCall("/compensate", c.body, c.headers))).status, 400, "a compensation without original");
  });

  it("each outcome is answered with the status the document gives it", async () => {
    const answer = async (mode: string) => { const { body, headers } = sample("dispatch"); return handler(connectorCall("/dispatch", { ...body, args: { mode } }, headers)); };
    assert.equal((await answer("ok")).status, 200);
    const rej = await answer("reject");
    assert.equal(rej.status, 422);
    const retry = await answer("retry");
    assert.equal(retry.status, 429);
    assert.equal(retry.headers.get("retry-after"), "7");
    const acc = await answer("accept");
    assert.equal(acc.status, 202);
    assert.deepEqual(await acc.json(), { correlation_id: "corr-1" });
    assert.equal((await answer("boom")).status, 500, "an unexpected error is UNKNOWN");
    const s = sample("status");
    const st = await handler(connectorCall("/status", s.body, s.headers));
    const statuses = cdoc.components.schemas.StatusAnswer!.oneOf!.map((o) => o.properties.status.const);
    assert.ok(statuses.includes(((await st.json()) as { status: string }).status));
    assert.throws(() => new Rejected("x", { status: 429 }), RangeError);
  });
});

describe("connector.json ↔ the turn handler helper", () => {
  const turn = () => {
    const id = randomUUID(), group = randomUUID();
    return {
      body: { session_key: "acme:bot:u:web", tenant: "acme", channel: "web", turn_id: id, turn_group: group, seq: 1, attempt: 1,
        messages: [{ id: randomUUID(), message_id: "m-1", content: { text: "hi" }, received_at: "2026-11-22T03:00:00Z", sent_at: "2026-11-22T03:00:00Z" }], artifacts: [] } as Record<string, unknown>,
      headers: { "Reckon-Turn-Id": id, "Reckon-Turn-Group": group, "Reckon-Attempt": "1" } as Record<string, string>,
    };
  };
  const h = turnHandler((t) => (t.channel === "fail" ? { effects: [{ connector: "x", decision: -1, call_index: 0 }] } : { effects: [{ connector: "x", args: {}, decision: 0, call_index: 0 }] }), { onError: () => {} });

  it("accepts the TurnRequest the document describes and refuses one missing a required field", async () => {
    const schema = cdoc.components.schemas.TurnRequest!;
    const ok = turn();
    for (const f of schema.required ?? []) assert.ok(f in ok.body, `sample lacks ${f}`);
    const res = await h(connectorCall("/turns", ok.body, ok.headers));
    assert.equal(res.status, 200);
    const answer = (await res.json()) as Record<string, unknown>;
    for (const k of Object.keys(answer)) assert.ok(Object.keys(cdoc.components.schemas.TurnAnswer!.properties!).includes(k));
    for (const f of schema.required ?? []) {
      const t = turn();
      delete t.body[f];
      assert.equal((await h(connectorCall("/turns", t.body, t.headers))).status, 400, `without ${f}`);
    }
    const bad = turn();
    bad.body.channel = "fail";
    assert.equal((await h(connectorCall("/turns", bad.body, bad.headers))).status, 500, "an answer that breaks the document is not sent");
  });
});
