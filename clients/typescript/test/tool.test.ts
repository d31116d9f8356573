/** The tool-call wrapper against a real server and reactor. */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import {
  AwaitingConfirmation, OutcomeUnknown, ToolFailed, ToolJournal, Rejected, connectorHandler, positionKey, present, absent,
  reckonTool, toNodeListener, type ReckonClient,
} from "@reckon/client";
import { Stack, unique } from "./harness.js";
import { checkRecorded } from "./conformance-check.js";

const stack = new Stack();
let client: ReckonClient;
let system: ReckonClient;
before(async () => { await stack.start(); client = stack.client(); system = stack.client(stack.systemToken); });
after(async () => { checkRecorded(); await stack.stop(); });
function test(name: string, fn: () => Promise<void>) {
  it(name, async () => { try { await fn(); } catch (e) { stack.dumpLogs(); throw e; } });
}

/** A payments upstream with a ledger; `drop` cuts the next dispatch's answer after performing. */
function payments() {
  const charges = new Map<string, { id: string; amount: number }>();
  let performed = 0;
  let drop = 0;
  return { charges, get performed() { return performed; }, dropNext() { drop++; }, take() { const d = drop > 0; if (d) drop--; return d; },
    perform(key: string, args: { customer: string; amount: number }) {
      if (args.amount <= 0) throw new Rejected(`amount ${args.amount} must be positive`);
      const done = charges.get(key);
      if (done) return done;
      performed++;
      const c = { id: `ch_${performed}`, amount: args.amount };
      charges.set(key, c);
      return c;
    } };
}

async function serveTool(opts: { requireConfirmation?: boolean } = {}) {
  const p = payments();
  const connector = unique("ts.charge");
  const tool = reckonTool<{ customer: string; amount: number }, { id: string; amount: number }>({
    client, name: "charge", connector, timeoutMs: 30_000,
    ...(opts.requireConfirmation ? { requireConfirmation: true } : {}),
    execute: (args, call) => p.perform(call.idempotencyKey, args),
    statusCheck: (call) => { const c = p.charges.get(call.idempotencyKey); return c ? present(c) : absent(); },
  });
  const listener = toNodeListener(connectorHandler(tool.handlers, { onError: () => {} }));
  const url = await stack.serve((req, res) => {
    if (req.url === "/dispatch" && p.take()) {
      res.writeHead = (() => res) as unknown as typeof res.writeHead;
      res.end = (() => { req.socket.destroy(); return res; }) as unknown as typeof res.end;
    }
    listener(req, res);
  });
  await system.putConnector(tool.connectorDefinition(url, {
    tags: ["write", "external"], timeout_ms: 5000, backoff_initial_ms: 100, backoff_max_ms: 500, status_check_limit: 5,
  }));
  await stack.reactorKnows(connector);
  return { p, tool };
}

describe("reckonTool", () => {
  test("the key is the journal position, not the inputs", () => {
    const j = new ToolJournal("run-1");
    const a = j.next(0, "charge"), b = j.next(0, "charge"), c = j.next(1, "charge"), d = j.next(0, "refund");
    assert.deepEqual([a.callIndex, b.callIndex, c.callIndex, d.callIndex], [0, 1, 0, 0]);
    assert.equal(positionKey("charge", a), "run-1/0/charge/0");
    assert.equal(positionKey("charge", { runId: "r/1", decision: "step 2", callIndex: 3 }), "r%2F1/step%202/charge/3");
    assert.throws(() => positionKey("charge", { runId: "", decision: 0, callIndex: 0 }), TypeError);
    assert.throws(() => positionKey("charge", { runId: "r", decision: 0, callIndex: -1 }), TypeError);
    return Promise.resolve();
  });

  test("an upstream that performs then drops the connection: performed once, the agent sees the confirmed result", async () => {
    const { p, tool } = await serveTool();
    p.dropNext();
    const runId = unique("run");
    const journal = new ToolJournal(runId);
    const result = await tool({ customer: "c-1", amount: 40 }, journal.next(0, "charge"));
    assert.deepEqual(result, { id: "ch_1", amount: 40 });
    assert.equal(p.performed, 1);
    // The agent is replayed after a crash: same position, same outcome, nothing performed again.
    const replay = await tool({ customer: "c-1", amount: 40 }, new ToolJournal(runId).next(0, "charge"));
    assert.deepEqual(replay, result);
    assert.equal(p.performed, 1);
    const e = (await client.listEffects({ run: runId })).effects;
    assert.equal(e.length, 1);
    assert.ok((await client.effectHistory(e[0]!.id)).some((h) => h.to === "UNKNOWN"));
    // The same inputs at the next position are a second, deliberate charge.
    const second = await tool({ customer: "c-1", amount: 40 }, journal.next(0, "charge"));
    assert.deepEqual(second, { id: "ch_2", amount: 40 });
    assert.equal((await client.waitForRun(runId)).settled, true);
  });

  test("a held tool throws AwaitingConfirmation until confirmed, then returns the result", async () => {
    const { p, tool } = await serveTool({ requireConfirmation: true });
    const pos = new ToolJournal(unique("run")).next("plan-1", "charge");
    const err = await tool({ customer: "c-2", amount: 99 }, pos).then(() => undefined, (e: unknown) => e);
    assert.ok(err instanceof AwaitingConfirmation, `got ${String(err)}`);
    assert.equal(err.evidenceUrl, `${stack.baseUrl}/console/effects/${err.effectId}`);
    const page = await fetch(err.evidenceUrl, { redirect: "manual" });
    assert.notEqual(page.status, 404, "the console serves the evidence route");
    await assert.rejects(tool({ customer: "c-2", amount: 99 }, pos), AwaitingConfirmation);
    assert.equal(p.performed, 0);
    await client.confirmEffect(err.effectId, { reason: "approved by the customer", actor: "alice" });
    const result = await tool({ customer: "c-2", amount: 99 }, pos);
    assert.deepEqual(result, { id: "ch_1", amount: 99 });
    assert.equal(p.performed, 1);
  });

  test("a refused call throws ToolFailed; an unknown outcome throws OutcomeUnknown with the evidence", async () => {
    const { tool } = await serveTool();
    const j = new ToolJournal(unique("run"));
    const failed = await tool({ customer: "c-3", amount: -1 }, j.next(0, "charge")).then(() => undefined, (e: unknown) => e);
    assert.ok(failed instanceof ToolFailed, `got ${String(failed)}`);
    assert.match(failed.effect.error ?? "", /must be positive/);
    // A connector nobody serves: the call cannot be made, its outcome stays open past the wait.
    const ghost = unique("ts.ghost");
    await system.putConnector({ name: ghost, tags: ["write", "idempotent"], dispatch_url: "http://127.0.0.1:9/none", timeout_ms: 1000, backoff_initial_ms: 5000, backoff_max_ms: 5000 });
    const t = reckonTool({ client, name: "ghost", connector: ghost, timeoutMs: 1500 });
    const unknown = await t({}, j.next(0, "ghost")).then(() => undefined, (e: unknown) => e);
    assert.ok(unknown instanceof OutcomeUnknown, `got ${String(unknown)}`);
    assert.match(unknown.evidenceUrl, /\/console\/effects\/[0-9a-f-]{36}$/);
  });
});
