/**
 * A worked example: the tool-call wrapper inside a real agent framework, the Vercel AI SDK (`ai`).
 *
 * The agent's `refund` tool is a Reckon effect at its journal position (run, model step, tool,
 * call index). If the payment provider performs the refund and the answer is lost, Reckon asks the
 * provider's status check instead of refunding twice, and the agent sees the confirmed refund.
 *
 * The model here is a script implementing the AI SDK's model interface (`LanguageModelV3`), so the
 * example runs with no network and no model: its first turn calls the tool, its second answers
 * with the tool's result. Swap in any real model (`openai("gpt-…")`) and nothing else changes.
 */
import { generateText, stepCountIs, tool } from "ai";
import type {
  LanguageModelV3, LanguageModelV3CallOptions, LanguageModelV3Content, LanguageModelV3GenerateResult, LanguageModelV3Prompt,
} from "@ai-sdk/provider";
import { z } from "zod";
import {
  AwaitingConfirmation, OutcomeUnknown, ToolJournal, type ReckonTool,
} from "@reckon/client";

/** The refund tool's input and result. */
export type RefundArgs = { order: string; amount: number };
export type Refund = { refund_id: string; order: string; amount: number };

/** One scripted model turn: what the model "says", given the prompt so far. */
export type ScriptStep = (prompt: LanguageModelV3Prompt) => LanguageModelV3Content[];

/** A model that plays a script, one step per call, and records the prompts it was given. */
export function scriptedModel(script: ScriptStep[]): LanguageModelV3 & { prompts: LanguageModelV3Prompt[] } {
  const prompts: LanguageModelV3Prompt[] = [];
  return {
    specificationVersion: "v3",
    provider: "script",
    modelId: "scripted-agent",
    supportedUrls: {},
    prompts,
    async doGenerate(options: LanguageModelV3CallOptions): Promise<LanguageModelV3GenerateResult> {
      const step = script[prompts.length];
      prompts.push(options.prompt);
      if (!step) throw new Error(`the script has ${script.length} steps; the model was called ${prompts.length} times`);
      const content = step(options.prompt);
      const calls = content.some((c) => c.type === "tool-call");
      return {
        content,
        finishReason: { unified: calls ? "tool-calls" : "stop", raw: undefined },
        usage: {
          inputTokens: { total: 0, noCache: 0, cacheRead: 0, cacheWrite: 0 },
          outputTokens: { total: 0, text: 0, reasoning: 0 },
        },
        warnings: [],
      };
    },
    async doStream(): Promise<never> {
      throw new Error("the scripted model does not stream");
    },
  };
}

/** The last tool result in a prompt, as JSON. */
export function lastToolResult(prompt: LanguageModelV3Prompt): unknown {
  for (const m of [...prompt].reverse()) {
    if (m.role !== "tool") continue;
    for (const part of m.content) if (part.type === "tool-result" && part.output.type === "json") return part.output.value;
  }
  return undefined;
}

/** The script of a support agent: refund the order, then tell the customer what happened. */
export function refundScript(order: string, amount: number): ScriptStep[] {
  return [
    () => [{ type: "tool-call", toolCallId: "call-1", toolName: "refund", input: JSON.stringify({ order, amount }) }],
    (prompt) => {
      const r = lastToolResult(prompt) as Partial<Refund> & { status?: string; evidence?: string };
      const text = r.refund_id
        ? `Refunded ${r.amount} for order ${r.order} (refund ${r.refund_id}).`
        : `The refund is ${r.status}; see ${r.evidence}.`;
      return [{ type: "text", text }];
    },
  ];
}

/**
 * Runs the agent once for `runId`. The refund tool is `reckonTool(...)`; its journal position is
 * (runId, model step, "refund", call index), so running the same conversation again — after a
 * crash, a retry — reaches the same effect instead of refunding again.
 */
export async function runSupportAgent(opts: {
  refund: ReckonTool<RefundArgs, Refund>;
  runId: string;
  model: LanguageModelV3;
  request: string;
}): Promise<{ text: string; steps: number }> {
  const journal = new ToolJournal(opts.runId);
  const tools = {
    refund: tool({
      description: "Refund (part of) an order to the customer's card.",
      inputSchema: z.object({ order: z.string().min(1), amount: z.number().int().positive() }),
      execute: async (input, { messages, abortSignal }) => {
        // The decision is the model step that asked for the call: the assistant turns before it.
        const step = messages.filter((m) => m.role === "assistant").length;
        try {
          return await opts.refund(input, journal.next(step, "refund"), abortSignal ? { signal: abortSignal } : {});
        } catch (err) {
          // Tell the model the truth instead of letting it retry blindly: the outcome is open.
          if (err instanceof AwaitingConfirmation) return { status: "awaiting confirmation", effect: err.effectId, evidence: err.evidenceUrl };
          if (err instanceof OutcomeUnknown) return { status: "unknown", effect: err.effectId, evidence: err.evidenceUrl };
          throw err;
        }
      },
    }),
  };
  const result = await generateText({ model: opts.model, tools, prompt: opts.request, stopWhen: stepCountIs(4) });
  return { text: result.text, steps: result.steps.length };
}
