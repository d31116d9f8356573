/** Checks the requests recorded during a test file against docs/openapi/api.json. */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { recorded, repoRoot } from "./harness.js";

type Doc = { paths: Record<string, Record<string, { parameters?: Array<{ $ref?: string; name?: string; in?: string }>; requestBody?: { content: Record<string, { schema: { $ref?: string } }> } }>>; components: { parameters: Record<string, { name: string; in: string }>; schemas: Record<string, { properties?: Record<string, unknown> }> } };

export function loadApiDoc(): Doc {
  return JSON.parse(readFileSync(join(repoRoot, "docs", "openapi", "api.json"), "utf8")) as Doc;
}

export const norm = (p: string) => p.replace(/\{[^}]+\}/g, "{}");

export function docOperation(doc: Doc, method: string, path: string) {
  for (const [p, ops] of Object.entries(doc.paths)) {
    if (norm(p) === norm(path)) return ops[method.toLowerCase()];
  }
  return undefined;
}

export function paramsOf(doc: Doc, op: NonNullable<ReturnType<typeof docOperation>>): Array<{ name: string; in: string }> {
  return (op.parameters ?? []).map((p) => (p.$ref ? doc.components.parameters[p.$ref.split("/").pop()!]! : p as { name: string; in: string }));
}

export function bodyFieldsOf(doc: Doc, op: NonNullable<ReturnType<typeof docOperation>>): string[] | null {
  const schema = op.requestBody ? Object.values(op.requestBody.content)[0]?.schema : undefined;
  if (!schema) return null;
  const s = schema.$ref ? doc.components.schemas[schema.$ref.split("/").pop()!]! : schema as { properties?: Record<string, unknown> };
  return Object.keys(s.properties ?? {});
}

const ALWAYS = new Set(["authorization", "accept", "content-type", "x-request-id"]);

/** Every recorded request names a documented route, with documented query parameters, headers and body fields. */
export function checkRecorded(): void {
  const doc = loadApiDoc();
  for (const r of recorded) {
    const u = new URL(r.url);
    const op = docOperation(doc, r.method, r.route);
    assert.ok(op, `${r.method} ${r.route} is not in the document`);
    const params = paramsOf(doc, op);
    for (const k of u.searchParams.keys()) {
      assert.ok(params.some((p) => p.in === "query" && p.name === k), `${r.method} ${r.route}: query parameter ${k} is not documented`);
    }
    for (const h of Object.keys(r.headers)) {
      if (ALWAYS.has(h.toLowerCase())) continue;
      assert.ok(params.some((p) => p.in === "header" && p.name.toLowerCase() === h.toLowerCase()), `${r.method} ${r.route}: header ${h} is not documented`);
    }
    const fields = bodyFieldsOf(doc, op);
    if (r.body === undefined) continue;
    assert.ok(fields !== null, `${r.method} ${r.route}: sent a body, the document describes none`);
    for (const f of Object.keys(JSON.parse(r.body) as object)) {
      assert.ok(fields.includes(f), `${r.method} ${r.route}: body field ${f} is not documented`);
    }
  }
}
