// The example receiver, examples/receiver.mjs (the file itself, which docs/webhooks.md shows), run
// from the directory holding hook.key and hook.crt as the README's walk-through runs it: it takes the service's real deliveries, refuses a bad signature, and refuses a
// correctly signed request whose timestamp is more than 5 minutes from its clock (a captured request
// sent again), either way.
import { createHmac } from "node:crypto";
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import https from "node:https";
import os from "node:os";
import path from "node:path";
import t from "tap";
import { freePort } from "../../services/platform/listen.ts";
import { call, merchantWithKey, startTestApp, until } from "../helpers/harness.ts";
import { makeTestCa, trustTestCa } from "../helpers/receiver.ts";

const root = path.resolve(import.meta.dirname, "../..");
const example = path.join(root, "examples/receiver.mjs");

const hookName = "hooks.receiver-doc.test";
const ca = await makeTestCa(t, [hookName]);
trustTestCa(ca.caPem);
const port = await freePort();
const s = await startTestApp(t, { WEBHOOK_CONNECT_TO: `${hookName}:443:127.0.0.1:${port}`, WEBHOOK_RETRY_DELAYS: "0.2" }, ["rpc", "gateway", "worker"]);
const owner = await merchantWithKey(s.app);
const endpoint = await call(s.base, "POST", `/api/v1/merchants/${owner.merchant}/webhook-endpoints`, { key: owner.key, body: { url: `https://${hookName}/webhooks` } });
const secret: string = endpoint.body.data.signing_secret;

// The reader's directory: the certificate, as the README's walk-through makes it.
const dir = mkdtempSync(path.join(os.tmpdir(), "receiver-doc-"));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));
writeFileSync(path.join(dir, "hook.key"), ca.key);
writeFileSync(path.join(dir, "hook.crt"), ca.cert);
const child = spawn(process.execPath, [example], { cwd: dir, env: { PATH: process.env.PATH ?? "", WEBHOOK_SECRET: secret, HOOK_PORT: String(port) } });
let printed = "";
child.stdout.on("data", (c: Buffer) => (printed += c.toString("utf8")));
child.stderr.on("data", (c: Buffer) => (printed += c.toString("utf8")));
t.teardown(() => {
  child.kill();
});

/** A POST to the receiver, signed with `key` at `timestamp`. */
function post(body: string, timestamp: number, key = secret): Promise<{ status: number; text: string }> {
  const ts = String(timestamp);
  const signature = createHmac("sha256", key).update(`${ts}.${body}`).digest("hex");
  return new Promise((resolve, reject) => {
    const req = https.request(
      { host: "127.0.0.1", port, servername: hookName, method: "POST", path: "/webhooks", agent: false, headers: { host: hookName, "content-type": "application/json", "x-service-timestamp": ts, "x-service-signature": signature } },
      (res) => {
        let text = "";
        res.on("data", (c: Buffer) => (text += c.toString("utf8")));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, text }));
        res.on("error", reject);
      },
    );
    req.on("error", reject);
    req.end(body);
  });
}

const now = () => Math.floor(Date.now() / 1000);
const event = (id: string) => JSON.stringify({ id, type: "webhook.test", created_at: new Date().toISOString(), data: { test: { synthetic: true } } });
await until("the documented receiver listening", async () => post(event("evt_probe"), now()).then(() => true, () => false), 15_000, () => printed);

t.test("the service's real delivery is accepted and printed", async (t) => {
  const sent = await call(s.base, "POST", `/api/v1/merchants/${owner.merchant}/webhook-endpoints/${endpoint.body.data.id}/test`, { key: owner.key });
  t.equal(sent.status, 200);
  await until("the receiver prints the event", async () => printed.includes(`webhook.test ${sent.body.data.event_id}`), 15_000, () => printed);
  const deliveries = await until("the delivery recorded as delivered", async () => {
    const list = await call(s.base, "GET", `/api/v1/merchants/${owner.merchant}/webhook-deliveries?event_id=${sent.body.data.event_id}`, { key: owner.key });
    return list.body.data?.[0]?.status === "delivered" && list.body.data;
  }, 15_000);
  t.equal(deliveries[0].last_status_code, 200, "answered 200");
});

t.test("a timestamp outside the 5-minute tolerance is refused, with the reason; inside it is accepted", async (t) => {
  t.same(await post(event("evt_fresh"), now()), { status: 200, text: "ok" }, "signed now");
  t.same(await post(event("evt_late_but_fine"), now() - 240), { status: 200, text: "ok" }, "4 minutes old: within the tolerance");
  t.same(await post(event("evt_stale"), now() - 360), { status: 400, text: "timestamp outside the tolerance" }, "6 minutes old: a captured request sent again");
  t.same(await post(event("evt_future"), now() + 360), { status: 400, text: "timestamp outside the tolerance" }, "6 minutes ahead");
  t.same(await post(event("evt_forged"), now(), "whsec_someone_elses"), { status: 400, text: "bad signature" }, "a bad signature is refused first");
  t.notOk(/evt_stale|evt_future|evt_forged/.test(printed), "nothing refused was handled");
});
