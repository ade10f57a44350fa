// The service as a new user runs it: `npm start` with no DATABASE_URL (embedded PostgreSQL),
// the admin CLI against the same data directory, a first request, and a clean SIGTERM.
import { spawn, spawnSync } from "node:child_process";
import { chmodSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import t from "tap";
import { call, idemKey, natsUrl, sampleIntent } from "../helpers/harness.ts";

const root = path.resolve(import.meta.dirname, "../..");
const dataDir = mkdtempSync(path.join(tmpdir(), "payments-start-"));
// The embedded PostgreSQL runs as the "postgres" user, which must be able to enter the directory.
chmodSync(dataDir, 0o755);
t.teardown(() => rmSync(dataDir, { recursive: true, force: true }));
const env: Record<string, string> = {
  ...(process.env as Record<string, string>),
  DATA_DIR: dataDir,
  PORT: "0",
  RPC_PORT: "0",
  OPS_PORT: "0",
  NATS_URL: natsUrl,
  LOG_LEVEL: "warn",
};
delete env.DATABASE_URL;

function admin(...args: string[]) {
  const r = spawnSync(process.execPath, [path.join(root, "services/app/admin.ts"), ...args], { cwd: root, env, encoding: "utf8" });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

t.test("admin CLI refuses bad input with one line and a non-zero exit", async (t) => {
  const cases = [
    ["merchant", "create"],
    ["api-key", "create", "--merchant", "mer_x", "--environment", "prod", "--scopes", "webhooks:read"],
    ["api-key", "create", "--merchant", "mer_x", "--environment", "test", "--scopes", "everything"],
    ["api-key", "revoke"],
    ["nonsense"],
  ];
  for (const args of cases) {
    const r = admin(...args);
    t.not(r.status, 0, args.join(" "));
    t.equal(r.stdout, "", "nothing on stdout");
    t.match(r.stderr, /^admin: /, "a message on stderr");
  }
});

t.test("npm start answers within 30 s without DATABASE_URL, and stops cleanly on SIGTERM", async (t) => {
  const started = Date.now();
  const child = spawn(process.execPath, [path.join(root, "services/app/main.ts")], { cwd: root, env, stdio: ["ignore", "pipe", "pipe"] });
  let out = "";
  child.stdout.on("data", (d: Buffer) => (out += d.toString()));
  child.stderr.on("data", (d: Buffer) => (out += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  t.teardown(() => {
    if (child.exitCode === null) child.kill("SIGKILL");
  });
  let base = "";
  while (!base && Date.now() - started < 30_000 && child.exitCode === null) {
    const m = /REST API\s+(http:\/\/\S+?)\/api\/v1/.exec(out);
    if (m) base = m[1] as string;
    else await new Promise((r) => setTimeout(r, 100));
  }
  t.ok(base, `the REST API is announced (output: ${out.slice(-500)})`);
  t.match(out, /npm run -s admin -- merchant create/, "it prints how to get a key");
  const ready = await call(base, "GET", "/api/v1/merchants/mer_x/payment-intents");
  t.equal(ready.status, 401, "the gateway answers");
  t.ok(Date.now() - started < 30_000, `answered in ${Date.now() - started} ms`);

  const merchant = admin("merchant", "create", "--name", "Start Test Shop");
  t.equal(merchant.status, 0, merchant.stderr);
  const merchantId = JSON.parse(merchant.stdout).id;
  const key = admin("api-key", "create", "--merchant", merchantId, "--environment", "test", "--scopes", "payment_intents:read,payment_intents:write");
  t.equal(key.status, 0, key.stderr);
  const apiKey = JSON.parse(key.stdout).api_key;
  t.match(apiKey, /^sk_test_/);
  const created = await call(base, "POST", `/api/v1/merchants/${merchantId}/payment-intents`, { key: apiKey, idempotencyKey: idemKey(), body: sampleIntent });
  t.equal(created.status, 200, JSON.stringify(created.body));
  t.notMatch(out, apiKey, "the API key is never logged");

  child.kill("SIGTERM");
  t.equal(await exited, 0, "exits 0 on SIGTERM");

  const revoke = admin("api-key", "revoke", "--id", JSON.parse(key.stdout).id);
  t.equal(revoke.status, 0, "the admin CLI starts the embedded database itself when the server is down");
  t.match(JSON.parse(revoke.stdout), { revoked_at: String });
});
