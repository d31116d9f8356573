/** The worked example (examples/agent): an AI SDK agent whose refund tool is a Reckon effect, driven by a scripted model, against a real server and reactor. */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { connectorHandler, present, absent, reckonTool, toNodeListener, type ReckonClient } from "@reckon/client";
import { refundScript, runSupportAgent, scriptedModel, type Refund, type RefundArgs } from "../examples/agent/agent.js";
import { Stack, unique } from "./harness.js";
import { checkRecorded } from "./conformance-check.js";

const stack = new Stack();
let client: ReckonClient;
before(async () => { await stack.start(); client = stack.client(); });
after(async () => { checkRecorded(); await stack.stop(); });

describe("examples/agent", () => {
  it("the provider refunds then drops the connection: refunded once, the agent reports the confirmed refund", async () => {
    try {
      const refunds = new Map<string, Refund>();
      let dropNext = true;
      const refund = reckonTool<RefundArgs, Refund>({
        client, name: "refund", connector: unique("payments.refund"), timeoutMs: 30_000,
        execute: (args, call) => {
          const done = refunds.get(call.idempotencyKey);
          if (done) return done;
          const r = { refund_id: `re_${refunds.size + 1}`, order: args.order, amount: args.amount };
          refunds.set(call.idempotencyKey, r);
          return r;
        },
        statusCheck: (call) => { const r = refunds.get(call.idempotencyKey); return r ? present(r) : absent(); },
      });
      const listener = toNodeListener(connectorHandler(refund.handlers, { onError: () => {} }));
      const url = await stack.serve((req, res) => {
        if (req.url === "/dispatch" && dropNext) {
          dropNext = false;
          res.writeHead = (() => res) as unknown as typeof res.writeHead;
          res.end = (() => { req.socket.destroy(); return res; }) as unknown as typeof res.end;
        }
        listener(req, res);
      });
      await stack.client(stack.systemToken).putConnector(refund.connectorDefinition(url, {
        tags: ["write", "external"], timeout_ms: 5000, backoff_initial_ms: 100, backoff_max_ms: 500,
      }));
      await stack.reactorKnows(refund.connector);

      const runId = unique("agent-run");
      const model = scriptedModel(refundScript("o-9", 30));
      const out = await runSupportAgent({ refund, runId, model, request: "Please refund 30 on order o-9." });
      assert.equal(out.text, "Refunded 30 for order o-9 (refund re_1).");
      assert.equal(out.steps, 2);
      assert.equal(model.prompts.length, 2);
      assert.equal(refunds.size, 1, "refunded once");
      const effects = (await client.listEffects({ run: runId })).effects;
      assert.equal(effects.length, 1);
      assert.equal(effects[0]!.idempotency_key, `${runId}/0/refund/0`);
      assert.ok((await client.effectHistory(effects[0]!.id)).some((h) => h.to === "UNKNOWN"), "the lost answer was reconciled");

      // The agent process crashed and runs the same conversation again: same position, no second refund.
      const again = await runSupportAgent({ refund, runId, model: scriptedModel(refundScript("o-9", 30)), request: "Please refund 30 on order o-9." });
      assert.equal(again.text, out.text);
      assert.equal(refunds.size, 1);
    } catch (e) { stack.dumpLogs(); throw e; }
  });
});
