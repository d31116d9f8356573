/**
 * The tool-call wrapper for agents: each call of a tool is a Reckon effect whose idempotency key
 * is its journal position — (run, decision, tool, call index within the decision) — never a hash
 * of its inputs. An agent that is replayed after a crash makes the same calls at the same
 * positions and gets the outcome of the first, instead of a second charge. When an upstream's
 * answer is lost, Reckon asks the upstream (its status check) and keeps the evidence; the wrapper
 * returns the confirmed result, or throws {@link OutcomeUnknown} / {@link AwaitingConfirmation}
 * with a link to that evidence.
 */
import { WaitTimeoutError, isAwaitingConfirmation, isSettled, type ReckonClient } from "./client.js";
import type { ConnectorCall, ConnectorHandlers, StatusAnswer } from "./upstream.js";
import { Retryable, connectorUrls } from "./upstream.js";
import type { ConnectorDefinition, Effect, Json, JsonObject } from "./types.js";

/** Where a tool call sits in the agent's journal. */
export interface ToolPosition {
  /** The agent run (also the effect's `run_id`, so `waitForRun` gates on it). */
  runId: string;
  /** The decision (model step, plan step) that made the call. */
  decision: string | number;
  /** The call's index among this tool's calls within the decision, from 0. */
  callIndex: number;
}

/** The idempotency key of a journal position: `{run}/{decision}/{tool}/{call index}`, each part URI-encoded. */
export function positionKey(tool: string, p: ToolPosition): string {
  if (typeof p.runId !== "string" || p.runId === "") throw new TypeError("position.runId must be a non-empty string");
  if (!(typeof p.decision === "string" ? p.decision !== "" : Number.isInteger(p.decision) && p.decision >= 0)) {
    throw new TypeError("position.decision must be a non-empty string or an integer ≥ 0");
  }
  if (!Number.isInteger(p.callIndex) || p.callIndex < 0) throw new TypeError("position.callIndex must be an integer ≥ 0");
  const key = [p.runId, String(p.decision), tool, String(p.callIndex)].map(encodeURIComponent).join("/");
  if (Buffer.byteLength(key) > 512) throw new RangeError(`the idempotency key of this position is longer than 512 bytes: ${key.slice(0, 80)}…`);
  return key;
}

/**
 * Hands out journal positions: one journal per agent run, one scope per decision, and within it
 * each tool's calls numbered in order. Replaying the run with a new journal gives the same
 * positions for the same calls.
 */
export class ToolJournal {
  readonly runId: string;
  readonly #counters = new Map<string, number>();
  constructor(runId: string) {
    if (typeof runId !== "string" || runId === "") throw new TypeError("runId must be a non-empty string");
    this.runId = runId;
  }
  /** The next position of `tool` within `decision`. */
  next(decision: string | number, tool: string): ToolPosition {
    const k = `${String(decision)}\u0000${tool}`;
    const callIndex = this.#counters.get(k) ?? 0;
    this.#counters.set(k, callIndex + 1);
    return { runId: this.runId, decision, callIndex };
  }
}

/** A tool call ended without a result; carries the effect and the console page with its evidence. */
export class ToolOutcomeError extends Error {
  /** The effect of the call. */
  readonly effectId: string;
  /** The console page of the effect: its history, attempts and status checks. */
  readonly evidenceUrl: string;
  /** The effect as last seen. */
  readonly effect: Effect;
  constructor(message: string, effect: Effect, evidenceUrl: string) {
    super(message);
    this.name = new.target.name;
    this.effectId = effect.id;
    this.effect = effect;
    this.evidenceUrl = evidenceUrl;
  }
}

/** Whether the call happened is not known (yet): the effect is UNKNOWN or STUCK, or still PENDING when the wait ended. Do not call again with a new position; look at the evidence. */
export class OutcomeUnknown extends ToolOutcomeError {}
/** The call is held until a person confirms it (`POST /v1/effects/{id}/confirm`); calling again at the same position returns its result once confirmed. */
export class AwaitingConfirmation extends ToolOutcomeError {}
/** The call definitely did not happen: refused by the upstream, declined, or cancelled (`effect.error` says why). */
export class ToolFailed extends ToolOutcomeError {}

/** Options of {@link reckonTool}. */
export interface ReckonToolOptions<A extends JsonObject, R> {
  /** The client that enqueues and waits. */
  client: ReckonClient;
  /** The tool's name: part of every call's idempotency key. */
  name: string;
  /** The Reckon connector that performs the call (an HTTP connector whose dispatch_url serves {@link ReckonTool.handlers}, or any registered connector). */
  connector: string;
  /**
   * The function performed, served as the connector's dispatch by {@link ReckonTool.handlers}.
   * It gets the args and the call (idempotency key, attempt, …); it may throw Rejected,
   * Retryable or Accepted. Optional when another service performs the connector's calls.
   */
  execute?: (args: A, call: ConnectorCall) => Promise<R> | R;
  /** The status check, served as the connector's status URL: did the call of `call.idempotencyKey` happen? */
  statusCheck?: (call: ConnectorCall) => Promise<StatusAnswer> | StatusAnswer;
  /** Hold every call until a person confirms it. */
  requireConfirmation?: boolean;
  /** How long a call waits for its outcome, in milliseconds (default 60000), before {@link OutcomeUnknown}. */
  timeoutMs?: number;
  /** The business key of a call (how the upstream knows it). */
  businessKey?: (args: A) => string;
}

/** A wrapped tool: call it with the args and its journal position. */
export interface ReckonTool<A extends JsonObject, R> {
  (args: A, position: ToolPosition, opts?: { signal?: AbortSignal }): Promise<R>;
  readonly toolName: string;
  readonly connector: string;
  /** The upstream side: the connector functions to serve with `connectorHandler` / `connectorNodeListener`. */
  readonly handlers: ConnectorHandlers;
  /** The idempotency key of a position. */
  key(position: ToolPosition): string;
  /** A connector definition whose URLs point at {@link handlers} served at `baseUrl`. */
  connectorDefinition(baseUrl: string, extra?: Omit<ConnectorDefinition, "name" | "dispatch_url">): ConnectorDefinition;
}

/**
 * Wraps a tool so that each call is an effect at its journal position.
 *
 * ```ts
 * const refund = reckonTool({ client, name: "refund", connector: "shop.refund",
 *   execute: async (args, call) => shop.refund(args.order, { idempotencyKey: call.idempotencyKey }) });
 * const journal = new ToolJournal("run-42");
 * const receipt = await refund({ order: "o-9" }, journal.next(step, "refund"));
 * ```
 */
export function reckonTool<A extends JsonObject, R = Json>(opts: ReckonToolOptions<A, R>): ReckonTool<A, R> {
  const { client, name, connector } = opts;
  if (typeof name !== "string" || name === "") throw new TypeError("reckonTool: name is required");
  if (typeof connector !== "string" || connector === "") throw new TypeError("reckonTool: connector is required");
  const waitMs = opts.timeoutMs ?? 60_000;

  const outcome = (e: Effect): R => {
    const url = client.consoleEffectUrl(e.id);
    if (isAwaitingConfirmation(e)) {
      throw new AwaitingConfirmation(`${name}: awaiting a person's confirmation (effect ${e.id}; ${url})`, e, url);
    }
    switch (e.state) {
      case "CONFIRMED": return (e.result ?? null) as R;
      case "FAILED": throw new ToolFailed(`${name}: failed: ${e.error ?? "no reason recorded"} (effect ${e.id})`, e, url);
      default: throw new OutcomeUnknown(`${name}: outcome ${e.state === "STUCK" ? "unknown, STUCK for an operator" : `not known yet (${e.state})`} (effect ${e.id}; evidence: ${url})`, e, url);
    }
  };

  const call = async (args: A, position: ToolPosition, callOpts: { signal?: AbortSignal } = {}): Promise<R> => {
    const key = positionKey(name, position);
    const enqueued = await client.enqueue({
      connector, idempotency_key: key, args, run_id: position.runId,
      ...(opts.requireConfirmation ? { require_confirmation: true } : {}),
      ...(opts.businessKey ? { business_key: opts.businessKey(args) } : {}),
    }, callOpts.signal ? { signal: callOpts.signal } : {});
    if (isSettled(enqueued) || isAwaitingConfirmation(enqueued)) return outcome(enqueued);
    let e: Effect;
    try {
      e = await client.waitForEffect(enqueued.id, {
        timeoutMs: waitMs, until: (x) => isSettled(x) || isAwaitingConfirmation(x),
        ...(callOpts.signal ? { signal: callOpts.signal } : {}),
      });
    } catch (err) {
      if (err instanceof WaitTimeoutError) return outcome((err.last as Effect | undefined) ?? enqueued);
      throw err;
    }
    return outcome(e);
  };

  const handlers: ConnectorHandlers = {
    dispatch: async (c) => {
      // Nothing was performed: a retryable refusal, never an unknown outcome.
      if (!opts.execute) throw new Retryable({ message: `${name}: no execute function: this process does not perform ${connector}` });
      return (await opts.execute(c.args as A, c)) as Json;
    },
    ...(opts.statusCheck ? { statusCheck: opts.statusCheck } : {}),
  };

  return Object.assign(call, {
    toolName: name,
    connector,
    handlers,
    key: (p: ToolPosition) => positionKey(name, p),
    connectorDefinition: (baseUrl: string, extra: Omit<ConnectorDefinition, "name" | "dispatch_url"> = {}): ConnectorDefinition =>
      ({ ...extra, name: connector, ...connectorUrls(baseUrl, handlers) }),
  });
}
