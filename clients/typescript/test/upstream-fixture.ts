/** A fake upstream: a real HTTP server serving a connector with the package's helpers, with a ledger of what it performed and faults to inject. */
import type { IncomingMessage, ServerResponse } from "node:http";
import {
  absent, connectorHandler, present, toNodeListener, type ConnectorCall, type ConnectorHandlers, type Json,
} from "@reckon/client";
import type { Stack } from "./harness.js";

export interface Ledger {
  /** Every call received, in order. */
  calls: ConnectorCall[];
  /** What was performed, by idempotency key: how many times, and the result. */
  performed: Map<string, { count: number; result: Json }>;
}

/**
 * Serves handlers on a free port. `dropNext(path)` makes the next answer on that path a dropped
 * connection after the handler ran (it performed, the reactor never hears it).
 */
export async function serveConnector(stack: Stack, handlers: ConnectorHandlers) {
  const drops = new Map<string, number>();
  const cutsBefore = new Map<string, number>();
  const listener = toNodeListener(connectorHandler(handlers, { onError: () => {} }));
  const url = await stack.serve((req: IncomingMessage, res: ServerResponse) => {
    const path = (req.url ?? "").split("?")[0] ?? "";
    const early = cutsBefore.get(path) ?? 0;
    if (early > 0) {
      // Cut the connection before the handler runs: nothing was performed, the reactor cannot tell.
      cutsBefore.set(path, early - 1);
      req.socket.destroy();
      return;
    }
    const n = drops.get(path) ?? 0;
    if (n > 0) {
      drops.set(path, n - 1);
      // Let the handler run, then cut the connection instead of answering.
      res.writeHead = (() => res) as unknown as typeof res.writeHead;
      res.end = (() => { req.socket.destroy(); return res; }) as unknown as typeof res.end;
    }
    listener(req, res);
  });
  return {
    url,
    dropNext: (path: string, times = 1) => drops.set(path, times),
    cutBeforeNext: (path: string, times = 1) => cutsBefore.set(path, times),
  };
}

/** A ledger-backed upstream that performs once per idempotency key and answers status checks from its ledger. */
export function ledgerHandlers(perform: (call: ConnectorCall) => Json | Promise<Json>, extra: Partial<ConnectorHandlers> = {}) {
  const ledger: Ledger = { calls: [], performed: new Map() };
  const handlers: ConnectorHandlers = {
    dispatch: async (call) => {
      ledger.calls.push(call);
      const done = ledger.performed.get(call.idempotencyKey);
      if (done) return done.result; // honour the key: never act twice
      const result = await perform(call);
      ledger.performed.set(call.idempotencyKey, { count: 1, result });
      return result;
    },
    statusCheck: (call) => {
      ledger.calls.push(call);
      const done = ledger.performed.get(call.idempotencyKey);
      return done ? present(done.result) : absent();
    },
    ...extra,
  };
  return { ledger, handlers };
}
