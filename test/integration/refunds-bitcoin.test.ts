// A bitcoin refund (issue 63): an overpaid BTC intent's overpaid part refunded to a testnet address
// the customer gives (a mainnet one refused), watched on a regtest chain (bcoin) followed by the
// app's in-process watcher like a deposit address: a short transfer recorded with what is still
// due, the rest sending it, its confirmations completing it.
import t from "tap";
import { p2wpkh, RawTx, TEST_NETWORK, Transaction } from "@scure/btc-signer";
import { HDKey } from "@scure/bip32";
import { mnemonicToSeedSync } from "@scure/bip39";
import { base58check } from "../../services/addresses/formats.ts";
import { setAccountKey } from "../../services/addresses/admin.ts";
import { secp256k1 } from "@noble/curves/secp256k1.js";
import { startRegtest } from "../helpers/bitcoin-regtest.ts";
import { call, idemKey, merchantWithKey, until } from "../helpers/harness.ts";
import { reportChainOutput } from "../helpers/lifecycle.ts";
import { dashboardClient } from "../helpers/dashboard.ts";
import { axeViolations, executablePath, noBrowser, screenshotsDir } from "../helpers/browser.ts";
import { readFileSync } from "node:fs";
import path from "node:path";
import { chromium } from "playwright-core";
import { webhookSetup } from "../helpers/webhooks.ts";

/** An xpub's key under other SLIP-132 version bytes (vpub: BIP 84 testnet; zpub: mainnet), as Sparrow exports it. */
function toVersion(xpub: string, version: readonly number[]): string {
  const payload = base58check.decode(xpub);
  payload.set(version, 0);
  return base58check.encode(payload);
}
const toVpub = (xpub: string) => toVersion(xpub, [0x04, 0x5f, 0x1c, 0xf6]);

/** A master key as btc-signer's signer (its type wants the public key non-null, which a master key's is). */
const wallet = (hd: HDKey) => hd as unknown as Parameters<Transaction["sign"]>[0];

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

t.test("a PSBT of the intent's own outputs: signed with the store's wallet (the Test key's mnemonic, found by the PSBT's derivations), sent, completes the refund", async (t) => {
  // Spending a segwit output needs segwit active: on bcoin's regtest, BIP 9 activates it at block 432.
  const tip = await chain.height();
  if (tip < 432) await chain.mine(432 - tip);
  const created = await call(base, "POST", `${merchantPath}/payment-intents`, { key: a.key, idempotencyKey: idemKey(), body: { network: "bitcoin", asset: "BTC", requested_amount: "0.001" } });
  const pi = created.body.data;
  const paid = await chain.pay([{ address: pi.deposit_address, btc: "0.0015" }]);
  await chain.mine(2);
  await until("overpaid", async () => ((await call(base, "GET", `${merchantPath}/payment-intents/${pi.public_id}`, { key: a.key })).body.data.status === "overpaid" ? true : undefined), 30_000);
  const customer = p2wpkh(secp256k1.getPublicKey(secp256k1.utils.randomSecretKey(), true), TEST_NETWORK).address as string;

  const waiting = (await call(base, "POST", `${merchantPath}/payment-intents/${pi.public_id}/refunds`, { key: a.key, idempotencyKey: idemKey(), body: {} })).body.data;
  const early = await call(base, "GET", `${merchantPath}/refunds/${waiting.id}/psbt?fee_rate=2`, { key: a.key });
  t.equal(early.status, 409, "no address yet: nothing to pay to");
  t.match(early.body.error.message, /no address yet/);
  await call(base, "POST", `${merchantPath}/refunds/${waiting.id}/cancel`, { key: a.key });

  const r = (await call(base, "POST", `${merchantPath}/payment-intents/${pi.public_id}/refunds`, { key: a.key, idempotencyKey: idemKey(), body: { address: customer } })).body.data;
  t.match(r, { status: "awaiting_payment", amount: "0.0005" });
  for (const bad of ["", "?fee_rate=0", "?fee_rate=1001", "?fee_rate=abc"]) {
    const refused = await call(base, "GET", `${merchantPath}/refunds/${r.id}/psbt${bad}`, { key: a.key });
    t.equal(refused.status, 400, `fee_rate ${bad || "missing"}`);
    t.equal(refused.body.error.param, "fee_rate");
  }
  const costly = await call(base, "GET", `${merchantPath}/refunds/${r.id}/psbt?fee_rate=1000`, { key: a.key });
  t.equal(costly.status, 409, "0.0015 BTC cannot pay 0.0005 and a 1000 sat/vB fee");
  t.match(costly.body.error.message, /hold 0\.0015 BTC.*need/);

  const got = await call(base, "GET", `${merchantPath}/refunds/${r.id}/psbt?fee_rate=3`, { key: a.key });
  t.equal(got.status, 200, JSON.stringify(got.body));
  const p = got.body.data;
  t.match(p, { refund_id: r.id, fee_rate: 3, inputs: [{ tx_hash: paid.txid, amount: "0.0015", address: pi.deposit_address }] });
  t.match(p.inputs[0].derivation, /^\[73c5da0a\/84'\/1'\/0'\/0\/\d+\]$/, "the Test key's origin and the address's index");
  t.equal(p.inputs[0].previous_transaction, true, "the whole previous transaction, as the watcher read it from its block");
  const carried = Transaction.fromPSBT(Buffer.from(p.psbt, "base64")).getInput(0).nonWitnessUtxo;
  t.ok(carried, "the PSBT carries it: the non-witness UTXO Trezor and Ledger ask for");
  t.equal(Transaction.fromRaw(RawTx.encode(carried!), { allowUnknownOutputs: true }).id, paid.txid, "and it is the paying transaction");
  t.equal(p.outputs.length, 2);
  t.match(p.outputs[0], { address: customer, amount: "0.0005", change: false });
  t.equal(p.outputs[1].change, true);
  t.not(p.outputs[1].address, pi.deposit_address, "change goes to the change chain, not back to the deposit address");
  const fee = Number(p.fee) * 1e8;
  t.equal(Math.round(fee), p.vsize * 3, "the fee is the rate times the size");
  t.equal(Math.round((0.0015 - 0.0005) * 1e8 - fee), Math.round(Number(p.outputs[1].amount) * 1e8), "inputs = outputs + fee");

  // The dashboard's refund page offers the same file, to open in a wallet.
  const dash = dashboardClient(base);
  t.equal((await dash.signIn(a.key)).status, 303);
  const refundPage = await dash.get(`/dashboard/refunds/${r.id}`);
  t.match(refundPage.body, /<form method="get" action="\/dashboard\/refunds\/rf_[0-9A-Za-z]+\/psbt"[^>]*id="psbt-form">/, "a Download PSBT form with a fee rate");
  const file = await fetch(`${base}/dashboard/refunds/${r.id}/psbt?fee_rate=3`, { headers: { cookie: `dashboard_session=${dash.session()}` } });
  t.equal(file.status, 200);
  t.equal(file.headers.get("content-disposition"), `attachment; filename="${r.id}.psbt"`);
  t.same(Buffer.from(await file.arrayBuffer()), Buffer.from(p.psbt, "base64"), "the binary PSBT, the same as the API's at that rate");
  const noRate = await dash.get(`/dashboard/refunds/${r.id}/psbt?fee_rate=0`);
  t.equal(noRate.status, 400);
  t.match(noRate.body, /fee_rate.*between 1 and 1000/, "a rate out of range is said on the page");

  // The wallet: the public test mnemonic's master key. btc-signer signs each input whose derivation
  // names its fingerprint, deriving the path given, as a hardware wallet does.
  const master = HDKey.fromMasterSeed(mnemonicToSeedSync("abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon about"));
  const tx = Transaction.fromPSBT(Buffer.from(p.psbt, "base64"));
  t.equal(tx.sign(wallet(master)), 1, "the wallet recognised and signed its input");
  tx.finalize();
  t.ok(tx.vsize <= p.vsize, `signed size ${tx.vsize} within the estimate ${p.vsize}`);
  const txid = await chain.rpc<string>("sendrawtransaction", [tx.hex]);
  t.equal(txid, tx.id);
  await chain.mine(2);
  const done = await until("the refund completed by the signed PSBT", async () => {
    const now = (await call(base, "GET", `${merchantPath}/refunds/${r.id}`, { key: a.key })).body.data;
    return now.status === "completed" ? now : undefined;
  }, 30_000);
  t.same(done.transactions.map((x: { tx_hash: string }) => x.tx_hash), [tx.id]);
  const after = (await call(base, "GET", `${merchantPath}/payment-intents/${pi.public_id}`, { key: a.key })).body.data;
  t.match(after, { status: "overpaid", amount_received: "0.0015", amount_refunded: "0.0005" }, "the change was not counted as a payment");

  const spent = await call(base, "GET", `${merchantPath}/refunds/${r.id}/psbt?fee_rate=3`, { key: a.key });
  t.equal(spent.status, 409, "a completed refund has nothing left to send");
});

t.test("one transaction paying two intents: its bytes are kept once, and each intent's PSBT carries them", async (t) => {
  const make = async () => (await call(base, "POST", `${merchantPath}/payment-intents`, { key: a.key, idempotencyKey: idemKey(), body: { network: "bitcoin", asset: "BTC", requested_amount: "0.001" } })).body.data;
  const [first, second] = [await make(), await make()];
  const paid = await chain.pay([{ address: first.deposit_address, btc: "0.0012" }, { address: second.deposit_address, btc: "0.0012" }]);
  await chain.mine(2);
  for (const pi of [first, second]) {
    await until("overpaid", async () => ((await call(base, "GET", `${merchantPath}/payment-intents/${pi.public_id}`, { key: a.key })).body.data.status === "overpaid" ? true : undefined), 30_000);
  }
  const kept = await s.app.db.em.fork().execute<{ n: number }[]>(`select count(*)::int as n from chain_observations where tx_hash = ? and raw_transaction is not null`, [paid.txid]);
  t.equal(kept[0]?.n, 1, "the bytes with one of its outputs only");
  const customer = p2wpkh(secp256k1.getPublicKey(secp256k1.utils.randomSecretKey(), true), TEST_NETWORK).address as string;
  for (const pi of [first, second]) {
    const r = (await call(base, "POST", `${merchantPath}/payment-intents/${pi.public_id}/refunds`, { key: a.key, idempotencyKey: idemKey(), body: { address: customer } })).body.data;
    const got = (await call(base, "GET", `${merchantPath}/refunds/${r.id}/psbt?fee_rate=2`, { key: a.key })).body.data;
    t.match(got.inputs, [{ tx_hash: paid.txid, previous_transaction: true }], `${pi.public_id}: its input carries the transaction`);
  }
});

t.test("a PSBT needs the key's origin: a merchant key set without one is refused with how to fix it, and set again with one it works", async (t) => {
  const seed = HDKey.fromMasterSeed(new Uint8Array(32).fill(7));
  const account = seed.derive("m/84'/1'/0'");
  const asVpub = toVpub(account.publicExtendedKey);
  await setAccountKey(s.app.db.em.fork(), a.merchant, "test", "bitcoin", asVpub);
  const created = (await call(base, "POST", `${merchantPath}/payment-intents`, { key: a.key, idempotencyKey: idemKey(), body: { network: "bitcoin", asset: "BTC", requested_amount: "0.001" } })).body.data;
  await chain.pay([{ address: created.deposit_address, btc: "0.002" }]);
  await chain.mine(2);
  await until("overpaid", async () => ((await call(base, "GET", `${merchantPath}/payment-intents/${created.public_id}`, { key: a.key })).body.data.status === "overpaid" ? true : undefined), 30_000);
  const customer = p2wpkh(secp256k1.getPublicKey(secp256k1.utils.randomSecretKey(), true), TEST_NETWORK).address as string;
  const r = (await call(base, "POST", `${merchantPath}/payment-intents/${created.public_id}/refunds`, { key: a.key, idempotencyKey: idemKey(), body: { address: customer } })).body.data;

  const refused = await call(base, "GET", `${merchantPath}/refunds/${r.id}/psbt?fee_rate=2`, { key: a.key });
  t.equal(refused.status, 409);
  t.match(refused.body.error.message, /without its origin.*address-source set .*--xpub "\[fingerprint\/84'\/1'\/0'\]<key>"/);
  t.notMatch(refused.body.error.message, asVpub, "the key is not repeated in an error");

  const fingerprint = seed.fingerprint.toString(16).padStart(8, "0");
  const set = await setAccountKey(s.app.db.em.fork(), a.merchant, "test", "bitcoin", `[${fingerprint}/84h/1h/0h]${asVpub}`);
  t.match(set, { account_key: asVpub, key_origin: `${fingerprint}/84'/1'/0'` }, "the same key again gains its origin and keeps its index");
  const got = await call(base, "GET", `${merchantPath}/refunds/${r.id}/psbt?fee_rate=2`, { key: a.key });
  t.equal(got.status, 200, JSON.stringify(got.body));
  const tx = Transaction.fromPSBT(Buffer.from(got.body.data.psbt, "base64"));
  t.equal(tx.sign(wallet(seed)), 1, "the merchant's own wallet signs it");
  tx.finalize();
  t.equal(await chain.rpc<string>("sendrawtransaction", [tx.hex]), tx.id, "and the node takes it");
});

t.test("a Live refund's claim page refuses a testnet address, takes a mainnet one once, and a second submission changes nothing", async (t) => {
  const live = await merchantWithKey(s.app, "live", undefined, a.merchant);
  const fresh = HDKey.fromMasterSeed(new Uint8Array(32).fill(9)).derive("m/84'/0'/0'");
  await setAccountKey(s.app.db.em.fork(), a.merchant, "live", "bitcoin", toVersion(fresh.publicExtendedKey, [0x04, 0xb2, 0x47, 0x46]));
  const created = await call(base, "POST", `${merchantPath}/payment-intents`, { key: live.key, idempotencyKey: idemKey(), body: { network: "bitcoin", asset: "BTC", requested_amount: "0.001" } });
  t.equal(created.status, 200, JSON.stringify(created.body));
  const pi = created.body.data;
  // Live bitcoin has no built-in watcher here: a Live watcher's report of a block with the payment, two deep.
  await reportChainOutput(s.app, s.rpcUrl, "live-bitcoin-watcher", "bitcoin", { toAddress: pi.deposit_address, asset: "BTC", amount: "0.0012" }, { confirmations: 2, environment: "live" });
  await until("overpaid", async () => ((await call(base, "GET", `${merchantPath}/payment-intents/${pi.public_id}`, { key: live.key })).body.data.status === "overpaid" ? true : undefined), 20_000);
  const r = (await call(base, "POST", `${merchantPath}/payment-intents/${pi.public_id}/refunds`, { key: live.key, idempotencyKey: idemKey(), body: {} })).body.data;
  t.match(r, { environment: "live", status: "awaiting_address", amount: "0.0002" });
  const claim = `${base}${new URL(r.claim_url).pathname}`;
  const post = (address: string) => fetch(claim, { method: "POST", redirect: "manual", headers: { "content-type": "application/x-www-form-urlencoded" }, body: new URLSearchParams({ address }).toString() });

  const testnet = await post("tb1qw508d6qejxtdg4y5r3zarvary0c5xw7kxpjzsx");
  t.equal(testnet.status, 400, "a testnet address for a Live refund");
  t.match(await testnet.text(), /This address is a bitcoin testnet address; live mode needs a bitcoin address/);
  t.match((await call(base, "GET", `${merchantPath}/refunds/${r.id}`, { key: live.key })).body.data, { status: "awaiting_address", address: null }, "nothing changed");

  const mainnet = "bc1qw508d6qejxtdg4y5r3zarvary0c5xw7kv8f3t4";
  t.equal((await post(mainnet)).status, 303, "a mainnet address is taken");
  const second = await post("bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdq");
  t.equal(second.status, 409, "a second address is refused");
  t.match((await call(base, "GET", `${merchantPath}/refunds/${r.id}`, { key: live.key })).body.data, { status: "awaiting_payment", address: mainnet }, "and changed nothing");
  t.match((await call(base, "GET", `${merchantPath}/refunds/${r.id}`, { key: a.key })).status, 404, "a Test key does not see a Live refund");
});

t.test("the dashboard's bitcoin refund page in Chromium: the PSBT form by keyboard, axe-clean, downloads the file", { skip: noBrowser }, async (t) => {
  const pi = (await call(base, "POST", `${merchantPath}/payment-intents`, { key: a.key, idempotencyKey: idemKey(), body: { network: "bitcoin", asset: "BTC", requested_amount: "0.001" } })).body.data;
  await chain.pay([{ address: pi.deposit_address, btc: "0.0011" }]);
  await chain.mine(2);
  await until("overpaid", async () => ((await call(base, "GET", `${merchantPath}/payment-intents/${pi.public_id}`, { key: a.key })).body.data.status === "overpaid" ? true : undefined), 30_000);
  const customer = p2wpkh(secp256k1.getPublicKey(secp256k1.utils.randomSecretKey(), true), TEST_NETWORK).address as string;
  const r = (await call(base, "POST", `${merchantPath}/payment-intents/${pi.public_id}/refunds`, { key: a.key, idempotencyKey: idemKey(), body: { address: customer } })).body.data;

  const browser = await chromium.launch({ executablePath, args: ["--no-sandbox"] });
  t.teardown(() => browser.close());
  const page = await (await browser.newContext({ viewport: { width: 390, height: 844 }, locale: "en-US", acceptDownloads: true })).newPage();
  await page.goto(`${base}/dashboard`);
  await page.getByLabel("API key").fill(a.key);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.waitForURL(`${base}/dashboard/payments`);
  await page.goto(`${base}/dashboard/refunds/${r.id}`);
  t.match(await page.locator("#psbt-h").textContent(), "Pay from this store's wallet");
  t.match(await page.locator("#fee-rate-help").textContent(), /0\.0001 BTC to the customer/);
  t.same(await axeViolations(page), [], "the refund page with its PSBT form: no serious or critical axe violation");
  await page.screenshot({ path: path.join(screenshotsDir(), "refund-bitcoin-psbt.png"), fullPage: true });

  await page.locator("#fee-rate").focus();
  await page.keyboard.type("4");
  const [download] = await Promise.all([page.waitForEvent("download"), page.keyboard.press("Enter")]);
  t.equal(download.suggestedFilename(), `${r.id}.psbt`);
  const bytes = readFileSync(await download.path());
  const tx = Transaction.fromPSBT(bytes);
  t.equal(tx.outputsLength, 2, "the customer's output and the change");
  t.equal(tx.getOutput(0).amount, 10_000n, "0.0001 BTC to the customer");
});
