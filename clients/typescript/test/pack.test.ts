/** `npm pack` makes a tarball that installs into a clean folder (no registry needed) where the README's quickstart runs against the real server. */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { after, before, describe, it } from "node:test";
import { Stack, freePort, packageDir } from "./harness.js";

const run = promisify(execFile);
const stack = new Stack();
const work = mkdtempSync(join(tmpdir(), "reckon-ts-pack-"));
before(async () => { await stack.start(); });
after(async () => { rmSync(work, { recursive: true, force: true }); await stack.stop(); });

describe("npm pack", () => {
  it("the tarball installs offline into a clean folder and the quickstart runs", async () => {
    try {
      const { stdout } = await run("npm", ["pack", "--json", "--pack-destination", work], { cwd: packageDir, maxBuffer: 1 << 24 });
      const info = JSON.parse(stdout) as Array<{ filename: string; files: Array<{ path: string }> }>;
      const files = info[0]!.files.map((f) => f.path);
      assert.ok(files.includes("dist/index.js") && files.includes("dist/index.d.ts") && files.includes("README.md"), files.join(" "));
      assert.ok(!files.some((f) => f.startsWith("test/") || f.startsWith("build/") || f.startsWith("src/")), "only dist and docs are packed");
      const tarball = join(work, readdirSync(work).find((f) => f.endsWith(".tgz"))!);
      const app = join(work, "app");
      await run("mkdir", ["-p", app]);
      writeFileSync(join(app, "package.json"), JSON.stringify({ name: "quickstart", private: true, type: "module" }));
      await run("npm", ["install", "--offline", "--no-audit", "--no-fund", tarball], { cwd: app });
      const readme = readFileSync(join(packageDir, "README.md"), "utf8");
      const block = /<!-- quickstart[^>]*-->\s*```js\n([\s\S]*?)```/.exec(readme)?.[1];
      assert.ok(block, "the README has the quickstart block");
      writeFileSync(join(app, "quickstart.mjs"), block);
      const port = await freePort();
      // The operator registers mail.send first, as the quickstart's comment says, so the reactor knows it before the first call.
      await stack.client(stack.systemToken).putConnector({ name: "mail.send", tags: ["write", "idempotent"], dispatch_url: `http://127.0.0.1:${port}/dispatch` });
      await stack.reactorKnows("mail.send");
      const out = await run("node", ["quickstart.mjs"], {
        cwd: app, timeout: 90_000,
        env: { ...process.env, RECKON_URL: stack.baseUrl, RECKON_TOKEN: stack.token, RECKON_SYSTEM_TOKEN: stack.systemToken, PORT: String(port) },
      });
      assert.match(out.stdout, /sent: 'ada@example\.com'/);
      assert.match(out.stdout, /run-42\/0\/send_email\/0/);
      const e = (await stack.client().listEffects({ run: "run-42" })).effects;
      assert.equal(e.length, 1);
      assert.equal(e[0]!.state, "CONFIRMED");
    } catch (e) { stack.dumpLogs(); throw e; }
  });
});
