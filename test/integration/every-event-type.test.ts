// "*" takes every event type (issue 65): an endpoint made the default way hears of a payment in the
// wrong asset (payment.exception), where before "*" left our extensions out and the merchant saw
// its intent expire while the shopper had paid. An endpoint made with "*" before the upgrade
// (Migration20261202150000_EveryEventType) keeps exactly what it received: the list "*" took then,
// shown by the API. Real service, PostgreSQL, NATS and receiver; the payment reported through
// ChainService as a watcher reports it.
import t from "tap";
import { everyTypeBefore } from "../../services/platform/migrations/Migration20261202150000_EveryEventType.ts";
import { call, idemKey, until } from "../helpers/harness.ts";
import { reportEthereumOutput } from "../helpers/lifecycle.ts";
import { eventsOnce, hookHost, webhookSetup } from "../helpers/webhooks.ts";

const s = await webhookSetup(t, { roles: ["rpc", "gateway", "worker"], env: { ETHEREUM_CONFIRMATIONS: "1" } });
const endpointsPath = `/api/v1/merchants/${s.creds.merchant}/webhook-endpoints`;

async function createEndpoint(path: string, body: Record<string, unknown> = {}): Promise<{ id: string; secret: string }> {
  const res = await call(s.base, "POST", endpointsPath, { key: s.creds.key, body: { url: `https://${hookHost}${path}`, ...body } });
  if (res.status !== 200) throw new Error(`create endpoint: ${res.status} ${JSON.stringify(res.body)}`);
  return { id: res.body.data.id, secret: res.body.data.signing_secret };
}
const enabledEvents = async (id: string) => (await call(s.base, "GET", `${endpointsPath}/${id}`, { key: s.creds.key })).body.data.enabled_events as string[];

let before: { id: string; secret: string };
let after: { id: string; secret: string };

t.test("the upgrade gives an endpoint made with \"*\" the list it took then; one made after reads [\"*\"]", async (t) => {
  // Made before the upgrade: the migration is taken back (as it was before it) and run again.
  before = await createEndpoint("/before");
  const named = await createEndpoint("/named", { enabled_events: ["payment.confirmed"] });
  // Down to the one before it (later migrations go back with it, and come again with the upgrade).
  const back = (await s.app.db.migrator.down({ to: "Migration20261202140000_BaseArbitrumTestSequences" })).map((m) => m.name);
  t.equal(back.at(-1), "Migration20261202150000_EveryEventType", "the migration taken back");
  t.same(await enabledEvents(before.id), ["*"], 'before the upgrade, the default endpoint reads ["*"]');
  await s.app.db.migrator.up();
  after = await createEndpoint("/after");
  t.same(await enabledEvents(before.id), everyTypeBefore, "the one made before: the spec's types and webhook_endpoint.disabled, shown as they are");
  t.notOk(everyTypeBefore.includes("payment.exception"), "payment.exception not among them");
  t.same(await enabledEvents(named.id), ["payment.confirmed"], "a list named by hand is left as it was");
  t.same(await enabledEvents(after.id), ["*"], "one made after the upgrade the default way");
});

t.test("a payment in the wrong asset reaches the endpoint made after with \"*\", not the one made before", async (t) => {
  const res = await call(s.base, "POST", `/api/v1/merchants/${s.creds.merchant}/payment-intents`, {
    key: s.creds.key,
    idempotencyKey: idemKey(),
    body: { network: "ethereum", asset: "USDC", requested_amount: "5.00" },
  });
  t.equal(res.status, 200, "a USDC intent");
  const pi = res.body.data as { public_id: string; deposit_address: string };

  // A watcher reports a block holding 5 USDT to the USDC intent's address.
  const txHash = await reportEthereumOutput(s.app, s.rpcUrl, "every-type-watcher", { toAddress: pi.deposit_address, asset: "USDT", amount: "5" });

  const told = await until("payment.exception at the endpoint made after the upgrade", async () =>
    eventsOnce(s.receiver, after.secret, "/after").find((e) => e.type === "payment.exception" && e.data.payment_intent?.public_id === pi.public_id),
  30_000);
  t.match(told.data, { exception: { reason: "wrong_asset", transaction: { tx_hash: txHash, asset: "USDT", amount: "5" } } });

  // Absence, proved by a sentinel recorded after the exception: the intent's cancellation
  // (payment.cancelled), which both endpoints made with "*" take.
  const cancelled = await call(s.base, "POST", `/api/v1/merchants/${s.creds.merchant}/payment-intents/${pi.public_id}/cancel`, { key: s.creds.key, idempotencyKey: idemKey() });
  t.equal(cancelled.status, 200, "cancelled");
  const at = async (secret: string, path: string) =>
    until(`payment.cancelled at ${path}`, async () => {
      const events = eventsOnce(s.receiver, secret, path).filter((e) => e.data.payment_intent?.public_id === pi.public_id);
      return events.some((e) => e.type === "payment.cancelled") ? events.map((e) => e.type).sort() : undefined;
    }, 30_000);
  t.same(await at(before.secret, "/before"), ["payment.cancelled", "payment.intent.created"], "the endpoint made before: what \"*\" took then, no payment.exception");
  t.same(await at(after.secret, "/after"), ["payment.cancelled", "payment.exception", "payment.intent.created"], "the endpoint made after: every type");
  const deliveries = await s.app.db.em.fork().execute<{ endpoint_id: string }[]>(
    `select d.endpoint_id from webhook_deliveries d join webhook_events e on e.id = d.event_id where e.payment_intent_id = ? and e.type = 'payment.exception'`,
    [pi.public_id],
  );
  t.same(deliveries.map((d) => d.endpoint_id), [after.id], "payment.exception got one delivery: to the endpoint made after");
});
