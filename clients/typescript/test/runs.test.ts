/** Runs with guardrails and their cancel (POST /v1/runs, POST /v1/runs/{id}/cancel), and the completion gate. */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { ConflictError, NotFoundError, BadRequestError, type ReckonClient } from "@reckon/client";
import { Stack, unique } from "./harness.js";
import { checkRecorded } from "./conformance-check.js";

const stack = new Stack();
let client: ReckonClient;
let connector: string;
before(async () => {
  await stack.start();
  client = stack.client();
  connector = unique("ts.held");
  await stack.client(stack.systemToken).putConnector({ name: connector, tags: ["write", "idempotent"], dispatch_url: "http://127.0.0.1:9/none" });
});
after(async () => { checkRecorded(); await stack.stop(); });

describe("runs", () => {
  it("create with guardrails, halt at max_steps, change the guardrails", async () => {
    const id = unique("run");
    const run = await client.createRun({ id, max_steps: 1, max_consecutive_failures: 3 });
    assert.equal(run.id, id);
    assert.equal(run.max_steps, 1);
    await client.enqueue({ connector, idempotency_key: unique("k"), args: {}, run_id: id, require_confirmation: true });
    await assert.rejects(client.enqueue({ connector, idempotency_key: unique("k"), args: {}, run_id: id }),
      (e: unknown) => e instanceof ConflictError && e.code === "run_halted");
    const changed = await client.createRun({ id, max_steps: 10 });
    assert.equal(changed.max_steps, 10);
    await assert.rejects(client.createRun({ id: "", max_steps: -1 }), (e: unknown) => e instanceof BadRequestError && e.code === "invalid_request");
  });

  it("cancel: held effects fail, further enqueues are run_cancelled, the gate settles", async () => {
    const id = unique("run");
    await client.createRun({ id });
    const e = await client.enqueue({ connector, idempotency_key: unique("k"), args: {}, run_id: id, require_confirmation: true });
    const c = await client.cancelRun(id, { reason: "user asked to stop", actor: "dana" });
    assert.equal(c.run.cancel_reason, "user asked to stop");
    assert.ok([...c.failed, ...c.awaiting, ...c.left].includes(e.id));
    await assert.rejects(client.enqueue({ connector, idempotency_key: unique("k"), args: {}, run_id: id }),
      (x: unknown) => x instanceof ConflictError && x.code === "run_cancelled");
    assert.equal((await client.waitForRun(id, { timeoutMs: 20_000 })).settled, true);
    await assert.rejects(client.cancelRun(unique("nobody"), { reason: "x" }), (x: unknown) => x instanceof NotFoundError && x.code === "not_found");
  });
});
