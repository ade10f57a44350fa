// Every shell block of docs/ is run as written, in document order, in one bash against a started
// app, as a reader pastes them after the README's walk-through (whose variables the prelude below
// sets the same way): each block's commands exit 0 and print what the doc shows. The servers' fixed
// ports are the only substitution. A block that cannot run here is listed with the reason in
// test/helpers/doc-blocks.ts, and test/unit/doc-blocks.test.ts checks every guide is run here.
import { randomBytes } from "node:crypto";
import { writeFileSync } from "node:fs";
import path from "node:path";
import { base58 } from "@scure/base";
import t from "tap";
import { blockId, docsInOrder, notRun } from "../helpers/doc-blocks.ts";
import { jsonObjects, shBlocks, startShell } from "../helpers/doc-shell.ts";
import { startTestApp } from "../helpers/harness.ts";
import { makeTestCa, startReceiver, trustTestCa } from "../helpers/receiver.ts";

const hookName = "hooks.docs.test";
const ca = await makeTestCa(t, [hookName]);
trustTestCa(ca.caPem);
const receiver = await startReceiver(t, { key: ca.key, cert: ca.cert });
// Pages under /checkout, as with the default CHECKOUT_BASE_URL.
const app = await startTestApp(t, { WEBHOOK_CONNECT_TO: `${hookName}:443:127.0.0.1:${receiver.port}`, WEBHOOK_RETRY_DELAYS: "0.2", CHECKOUT_BASE_URL: "http://127.0.0.1:8080/checkout" });
const gateway = app.base;
const rpc = app.rpcUrl;
const sh = startShell(t, {
  DATABASE_URL: app.databaseUrl,
  RPC_URL: rpc,
  JETSTREAM_PREFIX: app.prefix,
  SECRET_ENCRYPTION_KEY: app.masterKey.toString("hex"),
});
// The solana address the payments doc imports, beside it as addresses.txt.
writeFileSync(path.join(sh.dir, "addresses.txt"), `${base58.encode(randomBytes(32))}\n`);

type Tap = { match: (...a: any[]) => void; ok: (...a: any[]) => void };
const local = (line: string) => line.replaceAll("http://127.0.0.1:8080", gateway).replaceAll("http://127.0.0.1:8081", rpc);

t.test("the prelude: the README walk-through's variables", async (t) => {
  const r = await sh.paste([
    `field() { node -pe "JSON.parse(require('fs').readFileSync(0)).$1"; }`,
    `MERCHANT=$(npm run -s admin -- merchant create --name 'My Shop' | field id)`,
    `KEY=$(npm run -s admin -- api-key create --merchant $MERCHANT --environment test --scopes payment_intents:read,payment_intents:write,webhooks:read,webhooks:write | field api_key)`,
    `API=${gateway}/api/v1`,
    `BASE=$API/merchants/$MERCHANT`,
    `INTENT=$(curl -s -X POST $BASE/payment-intents -H "Authorization: Bearer $KEY" -H 'Content-Type: application/json' -H 'Idempotency-Key: docs-intent-1' -d '{"network":"ethereum","asset":"USDC","requested_amount":"12.50"}' | field data.public_id)`,
    `curl -s -X POST $API/sandbox/merchants/$MERCHANT/payment-intents/$INTENT/simulate -H "Authorization: Bearer $KEY" -H 'Content-Type: application/json' -d '{"outcome":"underpaid"}' > /dev/null`,
    `ENDPOINT=$(curl -s -X POST $BASE/webhook-endpoints -H "Authorization: Bearer $KEY" -H 'Content-Type: application/json' -d '{"url":"https://${hookName}/webhooks"}' | field data.id)`,
    `DEPOSIT=$(curl -s -X POST $BASE/payment-intents -H "Authorization: Bearer $KEY" -H 'Content-Type: application/json' -H 'Idempotency-Key: docs-intent-2' -d '{"network":"ethereum","asset":"USDC","requested_amount":"12.50"}' | field data.deposit_address)`,
    `ZPUB=zpub6rFR7y4Q2AijBEqTUquhVz398htDFrtymD9xYYfG1m4wAcvPhXNfE3EfH1r1ADqtfSdVCToUG868RvUUkgDKf31mGDtKsAYz2oz2AGutZYs`,
  ]);
  t.equal(r.status, 0, r.out);
  t.match(await sh.variable("INTENT"), /^pi_/);
  t.match(await sh.variable("ENDPOINT"), /^we_/);
  t.match(await sh.variable("DEPOSIT"), /^0x[0-9a-fA-F]{40}$/);
});

/** What each block must show, beyond exiting 0: checks on the JSON it printed. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
const expectations: Record<string, (t: Tap, json: any[], out: string) => void> = {
  "Site Gateway": (t, json) => {
    t.match(json[0], { id: /^sc_/, credential: /^site_test_/ }, "the site credential");
    t.match(json[1]?.data, { status: "pending", requested_amount: "12.50", asset: "USDC" }, "the shop's intent, read back");
    t.match(json[2], { id: /^sc_/, revoked_at: String }, "revoked");
  },
  "Export Payment Intents": (t, json, out) => {
    t.match(out, /^intent_id,created_at,merchant_reference,status,network,asset,contract,/m, "the CSV's header line");
    t.match(out, /^pi_\w+,[^,]+,,underpaid,ethereum,USDC,0x1c7D4B196Cb0C7B01d743Fbc6116a902379C7238,12\.50,/m, "the walk-through's underpaid intent");
  },
  "API keys": (t, json) => {
    t.match(json[0]?.data, { id: /^key_/, scopes: ["payment_intents:read"], api_key: /^sk_test_/ }, "a key made with the API, its secret in the create's answer");
    t.ok(json[1]?.data?.length >= 2 && json[1].data.every((k: { api_key?: string }) => k.api_key === undefined), "the list: the keys, no secret");
  },
  "Hosted checkout page": (t, json) => t.match(json[0], { status: "underpaid", amount_received: "6.25", amount_due: "6.25" }),
  "Point-of-sale terminal": (t, json) => {
    t.match(json[0], { id: /^cs_/, session: /^pos_test_/ }, "the cashier session");
    t.ok(json.some((j) => j.data?.source === "pos" && j.data?.cashier === "Ana" && j.data?.terminal === "Till 2"), "the POS payment");
    t.match(json.at(-1), { id: /^cs_/, revoked_at: String }, "revoked");
  },
  "Go-live readiness": (t, json) => t.match(json[0]?.data, { ready: Boolean, environment: "test", checks: Array }),
  "Public QR configurations": (t, json) => t.match(json[0]?.data, { label: "Counter 1", environment: "live", accepted: [{ network: "ethereum", asset: "USDC" }], amount: "12.50" }),
  "A Connect client": (t, json) => t.match(json[0], { public_id: /^pi_/, status: "pending", requested_amount: "12.50" }, "the example created an intent"),
  gRPC: (t, json, out) => t.ok(json.some((j) => j.data?.status === "underpaid") || /payments\.v1\.IntentService/.test(out), "the intent, or the service list"),
  "Delivery pipeline and operations": (t, json, out) => t.match(out, /webhook-worker|"id"/),
  "Rotating a signing secret": (t, json) => {
    t.match(json[0], { endpoint_id: /^we_/, signing_secret: /^whsec_/, previous_secret_expires_at: String }, "rotated, the old secret kept for the overlap");
    t.match(json[1], { endpoint_id: /^we_/, recovered: Number }, "recovery ran");
    t.match(json[2], { id: /^we_/, status: "enabled", recovered: Number, enqueued: Number }, "enabled, with what it missed recovered");
  },
  "Payments: deposit addresses": (t, json, out) => t.ok(json.length > 0 || out.trim() === "", "address sources and imports, or the watcher's credential and the example watcher"),
};

t.test("every shell block of docs/ runs as written", async (t) => {
  const seen = new Set<string>();
  for (const file of docsInOrder) {
    for (const b of shBlocks(file)) {
      const key = blockId(file, b);
      seen.add(key);
      if (notRun[key]) {
        t.pass(`${key}: not run (${notRun[key]})`);
        continue;
      }
      const commands = b.body.split("\n").map(local);
      const r = await sh.paste(commands);
      t.equal(r.status, 0, `${key}: exit 0\n${r.out}`);
      t.notMatch(r.out, /command not found|Unknown option|usage:/i, `${key}: no shell or CLI complaint`);
      const check = Object.entries(expectations).find(([h]) => b.heading.includes(h))?.[1];
      check?.(t, jsonObjects(r.out), r.out);
    }
  }
  for (const key of Object.keys(notRun).filter((k) => k.startsWith("docs/"))) t.ok(seen.has(key), `the not-run list names a block that exists: ${key}`);
});
