// USDT on tron, watched by the server: the watcher as its own process (`main.ts watcher`, reaching
// the core over gRPC with an internal credential) follows a TRON Test chain through the
// Ethereum-compatible JSON-RPC, and payments to `T…` deposit addresses are counted through the
// real REST API, each event delivered once as a signed webhook.
//
// The node is anvil standing in for a TRON node speaking the same protocol: Nile's chain id
// (3448148188), the Test USDT contract's bytecode (a TRC-20-shaped token: ERC-20's Transfer event
// and layout) at its 20-byte address, payments signed and mined for real. What anvil cannot show
// of TRON's documented differences, and the unit test test/unit/tron-source.test.ts covers against
// the documented response shapes: eth_syncing answering an object (with a clock-estimated
// highestBlock) whenever the node has peers, where anvil answers false; block fields (BlockId
// hashes whose first 8 bytes are the height, `stateRoot` "0x", zero blooms); `pending`/`safe` tags
// refused; the -32003 "Response exceeds the limit" of maxResponseSize; and mainnet's chain id and
// block 0 (a Live node), refused on Test.
import t from "tap";
import { encodeFunctionData, parseUnits, type Hex } from "viem";
import { signPayment, startDevChain, testTokenCode, tokenAbi } from "../../scripts/devchain/chain.ts";
import { tronToHex20 } from "../../services/addresses/formats.ts";
import { createInternalCredential } from "../../services/auth/admin.ts";
import { call, giveLiveAccountKey, idemKey, merchantWithKey, until } from "../helpers/harness.ts";
import { spawnWatcher, type WatcherProcess } from "../helpers/watcher-process.ts";
import { eventsOnce, webhookSetup } from "../helpers/webhooks.ts";

const dev = await startDevChain({ network: "tron" });
t.teardown(() => dev.stop());
// The core (no watcher role: no TRON_TEST_RPC_URL) counts at 3 confirmations here.
const s = await webhookSetup(t, { env: { TRON_CONFIRMATIONS: "3" } });
const { base, creds: a } = s;
const endpoint = await s.createEndpoint();
const { credential } = await createInternalCredential(s.app.db.em.fork(), "tron watcher", ["observe"], "test", { networks: ["tron"] });
const startWatcher = () => spawnWatcher(t, { RPC_URL: s.rpcUrl, WATCHER_CREDENTIAL_TEST: credential, TRON_TEST_RPC_URL: dev.url });
let watcher: WatcherProcess = startWatcher();

const intentsPath = (m = a.merchant) => `/api/v1/merchants/${m}/payment-intents`;
async function createIntent(amount: string, c = a) {
  const res = await call(base, "POST", intentsPath(c.merchant), { key: c.key, idempotencyKey: idemKey(), body: { network: "tron", asset: "USDT", requested_amount: amount } });
  if (res.status !== 200) throw new Error(`create: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.data as { public_id: string; deposit_address: string };
}
const get = async (id: string, c = a) => (await call(base, "GET", `${intentsPath(c.merchant)}/${id}`, { key: c.key })).body.data;
const mine = (blocks = 1) => dev.test.mine({ blocks });
/** The T… deposit address's 20 bytes: what a TRC-20 transfer names on chain. */
const onChain = (address: string) => tronToHex20(address) as Hex;
const pay = (pi: { deposit_address: string }, amount: string) => signPayment(dev, onChain(pi.deposit_address), amount, "USDT", 6);
const recorded = async () => Number((await s.app.db.em.fork().execute<{ n: string }[]>(`select count(*) as n from chain_observations where network = 'tron'`))[0]?.n);
const position = async () =>
  (await s.app.db.em.fork().execute<{ holder: string; height: string | null }[]>(`select holder, height from chain_watchers where network = 'tron' and environment = 'test'`))[0];

/** Waits until the intent shows `tx` with `confirmations`: a GET is one snapshot, so that read's status goes with it. */
function seen(id: string, tx: string, confirmations: number) {
  return until(`${id} shows ${tx} at ${confirmations} confirmations`, async () => {
    const pi = await get(id);
    return pi.transactions?.some((x: { tx_hash: string; confirmations: number }) => x.tx_hash === tx && x.confirmations === confirmations) ? pi : undefined;
  }, 30_000, () => watcher.output().slice(-2000));
}
// payment.detected aside ("*" takes it): it comes or not as the watcher first sees a payment below
// its confirmations or already at them; the first test asserts it where it must come.
const eventsOf = (id: string, detected = false) =>
  eventsOnce(s.receiver, endpoint.secret).filter((e) => e.data.payment_intent?.public_id === id && (detected || e.type !== "payment.detected")).map((e) => e.type).sort();
const events = (id: string, count: number) => until(`${count} events of ${id}`, async () => (eventsOf(id).length >= count ? eventsOf(id) : undefined), 20_000, () => JSON.stringify(eventsOf(id)));

t.test("a T… deposit address paid with USDT counts exactly at the threshold, to the unit, as a signed webhook", async (t) => {
  await until("the watcher follows the chain", async () => /following the chain/.test(watcher.output()), 30_000, watcher.output);
  const pi = await createIntent("12.345678");
  t.match(pi.deposit_address, /^T[1-9A-HJ-NP-Za-km-z]{33}$/, "the API shows the T… address");
  const { hash } = await pay(pi, "12.345678");
  await mine();
  let now = await seen(pi.public_id, hash, 1);
  t.same([now.status, now.transactions[0].counted, now.transactions[0].reason], ["pending", false, "below_confirmations"], "1 of 3: seen, not counted");
  t.same([now.transactions[0].asset, now.transactions[0].amount], ["USDT", "12.345678"]);
  await mine();
  now = await seen(pi.public_id, hash, 2);
  t.equal(now.status, "pending", "2 of 3: still not counted");
  await mine();
  now = await seen(pi.public_id, hash, 3);
  t.equal(now.status, "confirmed", "at 3 it counts");
  t.equal(now.amount_received, "12.345678", "to the unit");
  t.equal(now.transactions[0].counted, true);
  t.same(await events(pi.public_id, 2), ["payment.confirmed", "payment.intent.created"]);
  const withDetected = await until("payment.detected too", async () => (eventsOf(pi.public_id, true).length >= 3 ? eventsOf(pi.public_id, true) : undefined), 20_000);
  t.same(withDetected, ["payment.confirmed", "payment.detected", "payment.intent.created"], "and payment.detected, seen at 1 of 3: \"*\" takes it");
  const row = await s.app.db.em.fork().execute<{ to_address: string }[]>(`select to_address from chain_observations where tx_hash = ?`, [hash]);
  t.same(row.map((r) => r.to_address), [pi.deposit_address], "recorded to the T… address, not its 20-byte form");
});

t.test("underpaid, then topped up: confirmed", async (t) => {
  const pi = await createIntent("10");
  const first = await pay(pi, "3.999999");
  await mine(3);
  const under = await seen(pi.public_id, first.hash, 3);
  t.same([under.status, under.amount_received], ["underpaid", "3.999999"]);
  const second = await pay(pi, "6.000001");
  await mine(3);
  const now = await seen(pi.public_id, second.hash, 3);
  t.same([now.status, now.amount_received], ["confirmed", "10"]);
  t.same(await events(pi.public_id, 3), ["payment.confirmed", "payment.intent.created", "payment.underpaid"]);
});

t.test("a reorg takes a counted payment away; the transaction mined again counts again", async (t) => {
  const pi = await createIntent("7");
  const { hash, raw } = await pay(pi, "7");
  await mine(3);
  t.equal((await seen(pi.public_id, hash, 3)).status, "confirmed");
  // The three blocks from the payment's are replaced by empty ones.
  await dev.test.request({ method: "anvil_reorg" as never, params: [3, []] as never });
  await mine();
  const gone = await until("the reorg seen", async () => {
    const now = await get(pi.public_id);
    return now.status === "pending" ? now : undefined;
  }, 30_000, () => watcher.output().slice(-2000));
  t.equal(gone.amount_received, "0");
  t.equal(gone.transactions.find((x: { tx_hash: string }) => x.tx_hash === hash)?.counted, false);
  await dev.public.sendRawTransaction({ serializedTransaction: raw });
  await mine(3);
  const back = await until("counted again", async () => {
    const now = await get(pi.public_id);
    return now.status !== "pending" ? now : undefined;
  }, 30_000);
  t.same([back.status, back.amount_received], ["confirmed", "7"], "the same transaction in the new chain counts again");
  t.same(await events(pi.public_id, 4), ["payment.confirmed", "payment.confirmed", "payment.intent.created", "payment.reorged"]);
});

t.test("another token to a deposit address, and USDT to a Live intent's address on the Test chain: nothing counted", async (t) => {
  const pi = await createIntent("2");
  // The same token code at an address the asset table does not name.
  const other: Hex = "0x00000000000000000000000000000000000c0ffe";
  await dev.test.setCode({ address: other, bytecode: testTokenCode() });
  await dev.wallet.sendTransaction({ account: dev.payer, chain: dev.wallet.chain, to: other, data: encodeFunctionData({ abi: tokenAbi, functionName: "mint", args: [onChain(pi.deposit_address), parseUnits("2", 6)] }) });
  const live = await merchantWithKey(s.app, "live", undefined, a.merchant);
  await giveLiveAccountKey(s.app, a.merchant, "tron");
  const livePi = await createIntent("2", live);
  await pay(livePi, "2");
  await mine(3);
  // The sentinel: a payment in a later block, to another intent, seen and counted.
  const sentinel = await createIntent("1");
  const tx = await pay(sentinel, "1");
  await mine(3);
  t.equal((await seen(sentinel.public_id, tx.hash, 3)).status, "confirmed");
  const now = await get(pi.public_id);
  t.same([now.status, now.amount_received, now.transactions], ["pending", null, []], "another token's transfer is not seen");
  const l = await get(livePi.public_id, live);
  t.same([l.status, l.transactions], ["pending", []], "a Test chain's payment never matches a Live intent");
});

t.test("the watcher SIGKILLed while catching up and restarted: every payment counted once", async (t) => {
  await until("the watcher saved a position", async () => (await position())?.height != null, 20_000, watcher.output);
  watcher.child.kill("SIGKILL");
  await watcher.exited;
  // A backlog while no watcher runs: 8 payments, one block each.
  const ids: string[] = [];
  const before = await recorded();
  for (let i = 0; i < 8; i++) {
    const pi = await createIntent("1.5");
    ids.push(pi.public_id);
    await pay(pi, "1.5");
    await mine();
  }
  await mine(3);
  watcher = startWatcher();
  // Killed as soon as it has reported something of the backlog (its lease then runs out before the next takes over).
  await until("the restarted watcher reports", async () => (await recorded()) > before, 30_000, watcher.output);
  watcher.child.kill("SIGKILL");
  await watcher.exited;
  watcher = startWatcher();
  await until("every backlog intent confirmed", async () => {
    for (const id of ids) if ((await get(id)).status !== "confirmed") return undefined;
    return true;
  }, 60_000, watcher.output);
  for (const id of ids) {
    const pi = await get(id);
    t.same([pi.amount_received, pi.transactions.length], ["1.5", 1], `${id}: counted once, one output`);
  }
  await until("the last watcher follows the chain", async () => /following the chain/.test(watcher.output()), 30_000, watcher.output);
  watcher.child.kill("SIGTERM");
  t.equal(await watcher.exited, 0, "SIGTERM: a clean exit");
  t.match(watcher.output(), "chain        tron (test) followed at", "the banner names the chain");
});
