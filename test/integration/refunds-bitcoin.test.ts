// A bitcoin refund (issue 63): an overpaid BTC intent's overpaid part refunded to a testnet address
// the customer gives (a mainnet one refused), watched on a regtest chain (bcoin) followed by the
// app's in-process watcher like a deposit address: a short transfer recorded with what is still
// due, the rest sending it, its confirmations completing it.
import t from "tap";
import { p2wpkh, TEST_NETWORK } from "@scure/btc-signer";
import { secp256k1 } from "@noble/curves/secp256k1.js";
import { startRegtest } from "../helpers/bitcoin-regtest.ts";
import { call, idemKey, until } from "../helpers/harness.ts";
import { webhookSetup } from "../helpers/webhooks.ts";

const chain = await startRegtest();
t.teardown(() => chain.stop());
const s = await webhookSetup(t, { env: { BITCOIN_TEST_RPC_URL: chain.url, WATCHER_POLL_MS: "100" } });
const { base, creds: a } = s;
const merchantPath = `/api/v1/merchants/${a.merchant}`;

t.test("an overpaid BTC intent refunded: the customer's testnet address, a short transfer, the rest, completed at two confirmations", async (t) => {
  const created = await call(base, "POST", `${merchantPath}/payment-intents`, { key: a.key, idempotencyKey: idemKey(), body: { network: "bitcoin", asset: "BTC", requested_amount: "0.001" } });
  t.equal(created.status, 200, JSON.stringify(created.body));
  const pi = created.body.data;
  await chain.pay([{ address: pi.deposit_address, btc: "0.0013" }]);
  await chain.mine(2);
  await until("overpaid", async () => ((await call(base, "GET", `${merchantPath}/payment-intents/${pi.public_id}`, { key: a.key })).body.data.status === "overpaid" ? true : undefined), 30_000);

  const made = await call(base, "POST", `${merchantPath}/payment-intents/${pi.public_id}/refunds`, { key: a.key, idempotencyKey: idemKey(), body: { address: "bc1qw508d6qejxtdg4y5r3zarvary0c5xw7kv8f3t4" } });
  t.equal(made.status, 400, "a mainnet address for a Test refund");
  t.equal(made.body.error.param, "address");
  t.match(made.body.error.message, /bitcoin address; test mode needs a bitcoin testnet address/);

  const customer = p2wpkh(secp256k1.getPublicKey(secp256k1.utils.randomSecretKey(), true), TEST_NETWORK).address as string;
  const r = (await call(base, "POST", `${merchantPath}/payment-intents/${pi.public_id}/refunds`, { key: a.key, idempotencyKey: idemKey(), body: { address: customer } })).body.data;
  t.match(r, { status: "awaiting_payment", asset: "BTC", amount: "0.0003", address: customer });
  t.match(r.payment_uri, new RegExp(`^bitcoin:${customer}\\?amount=0\\.0003$`, "i"), "BIP 21 of the refund");
  const refundOf = async () => (await call(base, "GET", `${merchantPath}/refunds/${r.id}`, { key: a.key })).body.data;

  const short = await chain.pay([{ address: customer, btc: "0.0001" }]);
  await chain.mine(1);
  const open = await until("the short transfer recorded", async () => {
    const now = await refundOf();
    return now.transactions.length > 0 ? now : undefined;
  }, 30_000);
  t.match(open, { status: "awaiting_payment", amount_due: "0.0002", transactions: [{ tx_hash: short.txid, amount: "0.0001" }] });

  const rest = await chain.pay([{ address: customer, btc: "0.0002" }]);
  await chain.mine(1);
  await until("sent: seen, one confirmation of two", async () => ((await refundOf()).status === "sent" ? true : undefined), 30_000);
  await chain.mine(1);
  const done = await until("completed", async () => {
    const now = await refundOf();
    return now.status === "completed" ? now : undefined;
  }, 30_000);
  t.same(done.transactions.map((x: { tx_hash: string }) => x.tx_hash), [short.txid, rest.txid]);
  t.equal((await call(base, "GET", `${merchantPath}/payment-intents/${pi.public_id}`, { key: a.key })).body.data.amount_refunded, "0.0003");
});
