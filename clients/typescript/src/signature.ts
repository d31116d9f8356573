/** Signatures of callbacks and webhook deliveries: `t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<raw body>")>`. */
import { createHmac, timingSafeEqual } from "node:crypto";

/** Signs a body with a secret (a callback secret, or a subscription's secret) at time t (unix seconds, default now). */
export function sign(secret: string, body: string, t: number = Math.floor(Date.now() / 1000)): string {
  if (typeof secret !== "string" || secret === "") throw new TypeError("secret must be a non-empty string");
  if (!Number.isSafeInteger(t) || t < 0) throw new RangeError(`t must be unix seconds, got ${t}`);
  const v1 = createHmac("sha256", secret).update(`${t}.`).update(body).digest("hex");
  return `t=${t},v1=${v1}`;
}

/**
 * Checks a `Reckon-Signature` over a raw body, in constant time, and that its timestamp is within
 * toleranceSec of now (default 300). For receivers of webhook deliveries (docs/api.md, "Webhook
 * subscriptions"). Returns false rather than throwing for any malformed header.
 */
export function verify(secret: string, header: string | null | undefined, body: string | Uint8Array, toleranceSec = 300, now: number = Date.now() / 1000): boolean {
  if (!header) return false;
  const m = /^t=(\d{1,12}),v1=([0-9a-f]{64})$/.exec(header);
  if (!m) return false;
  const t = Number(m[1]);
  if (Math.abs(now - t) > toleranceSec) return false;
  const want = createHmac("sha256", secret).update(`${t}.`).update(body).digest();
  const got = Buffer.from(m[2]!, "hex");
  return got.length === want.length && timingSafeEqual(got, want);
}
