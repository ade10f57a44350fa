// The key that seals webhook signing secrets (SECRET_ENCRYPTION_KEY): a process given another key
// refuses to start with one line; the key is rotated with "admin secrets reseal" and deliveries
// keep working; a secret sealed under a key nobody has ends its delivery at once (secret_unreadable).
// Real PostgreSQL, NATS, HTTPS and processes.
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import t, { type Test } from "tap";
import { SecretBox } from "../../services/platform/secrets.ts";
import { createMerchant } from "../../services/auth/admin.ts";
import { openDatabase } from "../../services/app/database.ts";
import { deriveKey } from "../../services/platform/secret-key.ts";
import { call, createTestDatabase, merchantWithKey, natsUrl, startTestApp } from "../helpers/harness.ts";
import { runCli, spawnService } from "../helpers/processes.ts";
import { finished, hookHost, waitForDelivery, webhookSetup, type WebhookSetup } from "../helpers/webhooks.ts";
import { signPayload } from "../../services/delivery/signature.ts";

interface Teardown {
  teardown(fn: () => unknown): void;
}

function dataDir(t: Teardown): string {
  const dir = mkdtempSync(path.join(tmpdir(), "test-key-"));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** Starts a real worker process on the setup's database with `key` (none: DATA_DIR's, generated); resolves with its exit. */
async function startWith(t: Teardown, s: WebhookSetup, key: Buffer | undefined) {
  const service = spawnService(t, ["worker"], {
    DATABASE_URL: s.databaseUrl,
    NATS_URL: natsUrl,
    JETSTREAM_PREFIX: s.prefix,
    SECRET_ENCRYPTION_KEY: key?.toString("hex"),
    SECRET_ENCRYPTION_KEY_PREVIOUS: undefined,
    DATA_DIR: dataDir(t),
    PORT: "0",
    RPC_PORT: "0",
    OPS_PORT: "0",
    LOG_LEVEL: "warn",
  });
  const code = await Promise.race([service.exited, service.started.then(() => "started" as const)]);
  return { code, stderr: service.stderr(), output: service.output() };
}

async function sendTest(s: WebhookSetup, endpointId: string, base = s.base): Promise<{ id: string; event_id: string }> {
  const res = await call(base, "POST", `/api/v1/merchants/${s.creds.merchant}/webhook-endpoints/${endpointId}/test`, { key: s.creds.key });
  if (res.status !== 200) throw new Error(`test webhook: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.data;
}

function refusedClearly(t: Test, run: { code: number | null | "started"; stderr: string; output: string }, keys: Buffer[], what: string) {
  t.not(run.code, "started", `${what}: the process does not start`);
  t.not(run.code, 0, `${what}: exit code ${run.code}`);
  const lines = run.stderr.trim().split("\n");
  t.equal(lines.length, 1, `${what}: one line (${run.stderr.trim()})`);
  t.match(lines[0], /SECRET_ENCRYPTION_KEY.*secrets reseal/, `${what}: names the problem and the fix`);
  t.notOk(/\n\s+at /.test(run.output), `${what}: no stack trace`);
  for (const k of keys) {
    t.notOk(run.output.includes(k.toString("hex")) || run.output.includes(k.toString("base64")), `${what}: no key material`);
  }
}

t.test("a process given another key, or none, refuses to start with one clear line", async (t) => {
  const key = randomBytes(32);
  const s = await webhookSetup(t, { masterKey: key });
  await s.createEndpoint();
  const other = randomBytes(32);
  refusedClearly(t, await startWith(t, s, other), [key, other], "another key");
  refusedClearly(t, await startWith(t, s, undefined), [key], "no key (a new one generated under an empty DATA_DIR)");
  const same = await startWith(t, s, key);
  t.equal(same.code, "started", "the right key starts");
});

t.test("rotating the key with admin secrets reseal keeps deliveries working", async (t) => {
  const oldKey = randomBytes(32);
  const newKey = randomBytes(32);
  const s = await webhookSetup(t, { masterKey: oldKey });
  const ep = await s.createEndpoint();
  t.equal((await waitForDelivery(s, (await sendTest(s, ep.id)).id, finished)).status, "delivered", "delivered under the old key");

  // Step 1 of the rotation: a process given both keys starts, and keeps sealing under the old key
  // (the one the database's check names), so processes not yet given the new key open everything.
  const connectTo = `${hookHost}:443:127.0.0.1:${s.receiver.port}`;
  const both = await startTestApp(
    t,
    { DATABASE_URL: s.databaseUrl, JETSTREAM_PREFIX: s.prefix, WEBHOOK_CONNECT_TO: connectTo, SECRET_ENCRYPTION_KEY_PREVIOUS: oldKey.toString("hex") },
    ["rpc", "gateway"],
    newKey,
  );
  const created = await call(both.base, "POST", `/api/v1/merchants/${s.creds.merchant}/webhook-endpoints`, { key: s.creds.key, body: { url: `https://${hookHost}/hooks/during-rotation` } });
  t.equal(created.status, 200, `an endpoint created by a process given both keys (${created.status === 200 ? "" : JSON.stringify(created.body)})`);
  const [row] = await s.app.db.em.fork().execute<{ secret_ciphertext: Buffer }[]>(`select secret_ciphertext from webhook_endpoints where id = ?`, [created.body.data.id]);
  t.equal(SecretBox.keyIdOf(row!.secret_ciphertext), SecretBox.fromMasterKeys(oldKey).current.keyId, "is sealed under the old key until the reseal");
  await both.app.stop();

  const env = { DATABASE_URL: s.databaseUrl, DATA_DIR: dataDir(t), SECRET_ENCRYPTION_KEY: newKey.toString("hex") };
  const withoutOld = await runCli("services/app/admin.ts", env, "secrets", "reseal");
  t.equal(withoutOld.code, 2, `reseal without the old key is refused (${withoutOld.stderr.trim()})`);
  const reseal = await runCli("services/app/admin.ts", { ...env, SECRET_ENCRYPTION_KEY_PREVIOUS: oldKey.toString("hex") }, "secrets", "reseal");
  t.equal(reseal.code, 0, `reseal exits 0 (${reseal.stderr})`);
  t.match(JSON.parse(reseal.stdout), { resealed: 2, endpoints: 2 }, "both endpoints' secrets resealed");
  const again = await runCli("services/app/admin.ts", { ...env, SECRET_ENCRYPTION_KEY_PREVIOUS: oldKey.toString("hex") }, "secrets", "reseal");
  t.match(JSON.parse(again.stdout), { resealed: 0, endpoints: 2 }, "running it again changes nothing");

  await s.app.stop();
  refusedClearly(t, await startWith(t, s, oldKey), [oldKey, newKey], "the old key after the reseal");
  const next = await startTestApp(
    t,
    { DATABASE_URL: s.databaseUrl, JETSTREAM_PREFIX: s.prefix, WEBHOOK_CONNECT_TO: connectTo, WEBHOOK_RETRY_DELAYS: "0.2,0.2" },
    undefined,
    newKey,
  );
  const sent = await sendTest(s, ep.id, next.base);
  const d = await waitForDelivery({ ...s, base: next.base }, sent.id, finished);
  t.equal(d.status, "delivered", "delivered under the new key");
  const req = s.receiver.requests.find((r) => r.headers["x-service-event-id"] === sent.event_id)!;
  t.equal(req.headers["x-service-signature"], signPayload(ep.secret, Number(req.headers["x-service-timestamp"]), req.body), "signed with the same signing secret");
});

t.test("a secret sealed under a key id this process lacks ends its delivery at once: secret_unreadable, no retries", async (t) => {
  const s = await webhookSetup(t);
  const ep = await s.createEndpoint();
  const foreign = new SecretBox(randomBytes(32)).seal(ep.id, "whsec_sealed_elsewhere");
  await s.app.db.em.fork().execute(`update webhook_endpoints set secret_ciphertext = ? where id = ?`, [foreign, ep.id]);
  const sent = await sendTest(s, ep.id);
  const d = await waitForDelivery(s, sent.id, finished);
  t.match(d, { status: "failed", attempt_count: 1, last_error: /^secret_unreadable: sealed under encryption key [0-9a-f]{16}, which this process was not given$/ });
  t.match(d.attempts, [{ number: 1, error: "secret_unreadable", outcome: "terminal", status_code: null }], "one terminal attempt, named");
  t.notOk(s.receiver.requests.some((r) => r.headers["x-service-event-id"] === sent.event_id), "nothing was sent unsigned");
});

t.test("secrets sealed before key ids still sign after the migration, and the key is checked from then on", async (t) => {
  const key = randomBytes(32);
  const databaseUrl = await createTestDatabase(t);
  const db = await openDatabase(databaseUrl, 2);
  let legacy: { id: string; secret: string; merchant: string };
  try {
    await db.migrator.up({ to: "Migration20261123170137_CredentialChangedNotify" });
    const merchant = await createMerchant(db.em.fork(), "Before key ids");
    // The layout before key ids: iv | tag | ciphertext, under the derived key.
    legacy = { id: "we_legacy", secret: "whsec_sealed_before_key_ids", merchant: merchant.id };
    const sealed = new SecretBox(deriveKey(key, "webhook-signing-secrets")).seal(legacy.id, legacy.secret).subarray(9);
    await db.em.fork().execute(
      `insert into webhook_endpoints (id, merchant_id, environment, url, status, secret_ciphertext, created_at) values (?, ?, 'test', ?, 'enabled', ?, now())`,
      [legacy.id, merchant.id, `https://${hookHost}/legacy`, sealed],
    );
  } finally {
    await db.close();
  }
  const s = await webhookSetup(t, { masterKey: key, env: { DATABASE_URL: databaseUrl } });
  const box = SecretBox.fromMasterKeys(key);
  const [row] = await s.app.db.em.fork().execute<{ secret_ciphertext: Buffer }[]>(`select secret_ciphertext from webhook_endpoints where id = ?`, [legacy.id]);
  t.equal(box.open(legacy.id, row!.secret_ciphertext), legacy.secret, "the migrated secret opens with the same key");
  const creds = await merchantWithKey(s.app, "test", undefined, legacy.merchant);
  const sent = await sendTest({ ...s, creds }, legacy.id);
  t.equal((await waitForDelivery(s, sent.id, finished, 15_000, creds)).status, "delivered", "and signs its webhooks");
  const req = s.receiver.requests.find((r) => r.headers["x-service-event-id"] === sent.event_id)!;
  t.equal(req.headers["x-service-signature"], signPayload(legacy.secret, Number(req.headers["x-service-timestamp"]), req.body));
  refusedClearly(t, await startWith(t, s, randomBytes(32)), [key], "another key on a migrated database");
});
