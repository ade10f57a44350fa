// Only a chain's own watcher speaks for it (issue 47). The server's own Test ethereum watcher
// follows a dev chain through a JSON-RPC proxy of ours (lease 5 s). Another observe credential,
// unscoped (as `internal-credential create --roles observe --environment test` made them) or
// scoped to another network, can neither claim ethereum nor report on it, with any epoch and
// any watcher id, while the watcher holds its lease or after it lapsed (the node down);
// one scoped to ethereum loses the claim while the lease is held and learns no epoch, position
// or tip, and its reports under the holder's epoch and id are refused. ObservationService is
// refused on ethereum Test for good once the built-in watcher claimed it, lease or no lease.
// Over real gRPC with real credentials; intents read through REST; webhooks as received.
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport, Http2SessionManager } from "@connectrpc/connect-node";
import t from "tap";
import type { Hex } from "viem";
import { signPayment, startDevChain } from "../../scripts/devchain/chain.ts";
import { ChainService } from "../../gen/payments/v1/chains_pb.ts";
import { ErrorDetailSchema } from "../../gen/payments/v1/options_pb.ts";
import { ObservationService } from "../../gen/payments/v1/observations_pb.ts";
import { createInternalCredential } from "../../services/auth/admin.ts";
import { call, idemKey, until } from "../helpers/harness.ts";
import { hash } from "../helpers/lifecycle.ts";
import { startRpcProxy } from "../helpers/rpc-proxy.ts";
import { eventsOnce, notDetected, webhookSetup } from "../helpers/webhooks.ts";

t.setTimeout(240_000);
const dev = await startDevChain();
t.teardown(() => dev.stop());
const node = await startRpcProxy(t, dev.url);
const s = await webhookSetup(t, { env: { ETHEREUM_TEST_RPC_URL: node.url, ETHEREUM_CONFIRMATIONS: "2", WATCHER_POLL_MS: "100", WATCHER_LEASE_SECONDS: "5" } });
const { base, creds: a } = s;
const endpoint = await s.createEndpoint();
const em = () => s.app.db.em.fork();
const sessions = new Http2SessionManager(s.rpcUrl);
t.teardown(() => sessions.abort());
const transport = createGrpcTransport({ baseUrl: s.rpcUrl, sessionManager: sessions });
const chains = createClient(ChainService, transport);
const observations = createClient(ObservationService, transport);
const bearer = (credential: string) => ({ headers: { authorization: `Bearer ${credential}` } });

const path = `/api/v1/merchants/${a.merchant}/payment-intents`;
async function createIntent(): Promise<{ public_id: string; deposit_address: Hex }> {
  const res = await call(base, "POST", path, { key: a.key, idempotencyKey: idemKey(), body: { network: "ethereum", asset: "ETH", requested_amount: "0.5" } });
  if (res.status !== 200) throw new Error(`create: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.data;
}
const get = async (id: string) => (await call(base, "GET", `${path}/${id}`, { key: a.key })).body.data;
const eventsOf = (id: string) => eventsOnce(s.receiver, endpoint.secret).filter((e) => e.data.payment_intent?.public_id === id && notDetected(e)).map((e) => e.type).sort();

/** The call's refusal as code and documented error code; "accepted" when it went through. */
async function outcome(p: Promise<unknown>): Promise<string> {
  try {
    await p;
    return "accepted";
  } catch (err) {
    const e = ConnectError.from(err);
    return `${Code[e.code]} ${e.findDetails(ErrorDetailSchema)[0]?.code ?? ""}`.trim();
  }
}

const lease = async () =>
  (
    await em().execute<{ holder: string; epoch: string; live: boolean }[]>(
      `select holder, epoch, lease_expires_at > now() as live from chain_watchers where network = 'ethereum' and environment = 'test'`,
    )
  )[0];
const tip = async () =>
  (await em().execute<{ height: string; hash: string }[]>(`select height, hash from chain_blocks where network = 'ethereum' and environment = 'test' and best order by height desc limit 1`))[0];

/** `count` invented blocks on the core's tip, the first paying `to` the intent's amount. */
async function invented(to: string, count = 4) {
  const top = await tip();
  const from = Number(top?.height ?? 0) + 1;
  const blocks: { height: bigint; hash: string; parentHash: string; outputs: { asset: string; toAddress: string; txHash: string; outputIndex: number; amount: string }[] }[] = [];
  for (let i = 0; i < count; i++) {
    blocks.push({ height: BigInt(from + i), hash: `0x${hash()}`, parentHash: i === 0 ? (top?.hash ?? `0x${hash()}`) : (blocks[i - 1] as { hash: string }).hash, outputs: [] });
  }
  (blocks[0] as (typeof blocks)[0]).outputs.push({ asset: "ETH", toAddress: to, txHash: `0x${hash()}`, outputIndex: 0, amount: "0.5" });
  return blocks;
}

/** Every report an intruder could send with `credential`: invented blocks, a heartbeat and a mempool read, under each watcher id and epoch given. */
async function everyReport(credential: string, watcherIds: string[], epochs: bigint[], to: string): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const watcherId of watcherIds) {
    for (const leaseEpoch of epochs) {
      const blocks = await invented(to);
      const key = `${watcherId}@${leaseEpoch}`;
      out[`${key} blocks`] = await outcome(chains.reportBlocks({ network: "ethereum", watcherId, leaseEpoch, blocks, headHeight: (blocks.at(-1) as { height: bigint }).height }, bearer(credential)));
      out[`${key} heartbeat`] = await outcome(chains.reportBlocks({ network: "ethereum", watcherId, leaseEpoch, blocks: [], headHeight: 1n }, bearer(credential)));
      const top = await tip();
      out[`${key} mempool`] = await outcome(
        chains.reportMempool(
          { network: "ethereum", watcherId, leaseEpoch, tipHash: top?.hash ?? `0x${hash()}`, outputs: [{ output: { asset: "ETH", toAddress: to, txHash: `0x${hash()}`, outputIndex: 0, amount: "0.5" }, replaceable: false }] },
          bearer(credential),
        ),
      );
    }
  }
  return out;
}
const allRefused = (r: Record<string, string>, as?: string) => Object.entries(r).filter(([, v]) => v === "accepted" || (as !== undefined && v !== as));

const unscoped = await createInternalCredential(em(), "intruder (unscoped)", ["observe"], "test");
const solana = await createInternalCredential(em(), "solana watcher", ["observe"], "test", { networks: ["solana"] });
const replica = await createInternalCredential(em(), "ethereum replica", ["observe"], "test", { networks: ["ethereum"] });
const held = await until("the built-in watcher holds ethereum Test", async () => {
  const l = await lease();
  return l?.live && (await tip()) ? l : undefined;
}, 30_000);
const intent = await createIntent();

t.test("while the built-in watcher holds the lease: no other credential claims or reports, with any epoch or watcher id", async (t) => {
  t.equal(await outcome(chains.claimChain({ network: "ethereum", watcherId: "intruder", leaseSeconds: 30 }, bearer(unscoped.credential))), "PermissionDenied insufficient_scope", "an unscoped credential cannot claim ethereum");
  t.equal(await outcome(chains.claimChain({ network: "ethereum", watcherId: "intruder", leaseSeconds: 30 }, bearer(solana.credential))), "PermissionDenied insufficient_scope", "one scoped to solana cannot claim ethereum");
  const lost = await chains.claimChain({ network: "ethereum", watcherId: "intruder", leaseSeconds: 30 }, bearer(replica.credential));
  t.same([lost.active, lost.holder, lost.epoch, lost.position, Object.keys(lost.requiredConfirmations)], [false, held.holder, 0n, undefined, []], "one scoped to ethereum loses the claim, and learns no epoch, position or tip");
  const stolenId = await chains.claimChain({ network: "ethereum", watcherId: held.holder, leaseSeconds: 30 }, bearer(replica.credential));
  t.same([stolenId.active, stolenId.epoch], [false, 0n], "nor does it win under the holder's own watcher id");

  const epoch = BigInt(held.epoch);
  const ids = ["intruder", held.holder];
  const epochs = [0n, epoch, epoch + 1n];
  t.same(allRefused(await everyReport(unscoped.credential, ids, epochs, intent.deposit_address), "PermissionDenied insufficient_scope"), [], "the unscoped credential: every report refused as out of scope");
  t.same(allRefused(await everyReport(solana.credential, ids, epochs, intent.deposit_address), "PermissionDenied insufficient_scope"), [], "the solana one too");
  t.same(allRefused(await everyReport(replica.credential, ids, epochs, intent.deposit_address)), [], "the ethereum-scoped one: refused under the holder's epoch and id, as the credential did not claim the lease");

  const now = await get(intent.public_id);
  t.same([now.status, now.transactions], ["pending", []], "the intent stays pending, nothing recorded");
  t.same((await lease())?.holder, held.holder, "the built-in watcher keeps its lease");
});

t.test("after the lease lapsed (the node down): still nobody else; ObservationService refused; the real payment later counted once", async (t) => {
  await node.down();
  const lapsed = await until("the lease lapsed", async () => {
    const l = await lease();
    return l && !l.live ? l : undefined;
  }, 60_000);
  // ObservationService, first thing once the lease lapsed: an operator's own watcher may not speak for a chain the built-in one claimed, lease or no lease.
  const tx = `0x${hash()}`;
  const observation = { network: "ethereum", asset: "ETH", toAddress: intent.deposit_address, txHash: tx, outputIndex: 0, amount: "0.5", confirmations: 12, blockHeight: 10n, blockHash: `0x${hash()}` };
  t.equal(await outcome(observations.recordObservation(observation, bearer(unscoped.credential))), "PermissionDenied insufficient_scope", "ObservationService: an unscoped credential is refused on ethereum");
  t.equal(await outcome(observations.recordObservation(observation, bearer(replica.credential))), "FailedPrecondition invalid_state", "one scoped to ethereum too: the built-in watcher speaks for it, whatever the lease");
  t.equal(await outcome(observations.recordReorg({ network: "ethereum", txHashes: [tx] }, bearer(replica.credential))), "FailedPrecondition invalid_state", "its reorgs too");
  const [kept] = await em().execute<{ n: string }[]>(`select count(*) as n from chain_observations where tx_hash = ?`, [tx]);
  t.equal(Number(kept?.n), 0, "nothing recorded");

  t.equal(await outcome(chains.claimChain({ network: "ethereum", watcherId: "intruder", leaseSeconds: 30 }, bearer(unscoped.credential))), "PermissionDenied insufficient_scope", "an unscoped credential cannot claim the lapsed lease");
  t.equal(await outcome(chains.claimChain({ network: "ethereum", watcherId: "intruder", leaseSeconds: 30 }, bearer(solana.credential))), "PermissionDenied insufficient_scope", "nor can one scoped to solana");
  const epoch = BigInt(lapsed.epoch);
  t.same(
    allRefused(await everyReport(unscoped.credential, ["intruder", lapsed.holder], [epoch, epoch + 1n], intent.deposit_address), "PermissionDenied insufficient_scope"),
    [],
    "nor report on it, with any epoch or watcher id",
  );
  t.same(allRefused(await everyReport(replica.credential, [lapsed.holder], [epoch], intent.deposit_address)), [], "the holder's epoch and id under another credential: refused");

  let now = await get(intent.public_id);
  t.same([now.status, now.transactions], ["pending", []], "the intent stays pending");

  // A credential scoped to ethereum is a legitimate replica: it takes the lapsed lease (and lets it lapse).
  const taken = await chains.claimChain({ network: "ethereum", watcherId: "replica", leaseSeconds: 5 }, bearer(replica.credential));
  t.same([taken.active, taken.epoch > epoch, taken.position !== undefined], [true, true, true], "a credential scoped to ethereum claims the lapsed lease, with its epoch and position");

  // The node comes back: the built-in watcher takes the chain back and counts the real payment, once.
  await node.up();
  const { hash: paid } = await signPayment(dev, intent.deposit_address, "0.5", "ETH", 18);
  await dev.test.mine({ blocks: 2 });
  now = await until("the real payment confirmed", async () => {
    const pi = await get(intent.public_id);
    if (pi.status !== "confirmed") {
      await dev.test.mine({ blocks: 1 });
      return undefined;
    }
    return pi;
  }, 90_000);
  t.same(now.transactions.map((x: { tx_hash: string; counted: boolean }) => [x.tx_hash, x.counted]), [[paid.toLowerCase(), true]], "one transaction, the real one, counted once");
  t.equal(now.amount_received, "0.5", "the amount received is the real payment's");
  await until("the confirmation webhook", async () => eventsOf(intent.public_id).includes("payment.confirmed"), 20_000);
  const confirmed = eventsOnce(s.receiver, endpoint.secret).filter((e) => e.type === "payment.confirmed" && e.data.payment_intent?.public_id === intent.public_id);
  const paidIn = (e: (typeof confirmed)[0]) => (e.data.payment_intent as { transactions?: { tx_hash: string }[] }).transactions?.map((x) => x.tx_hash);
  t.same(confirmed.map(paidIn), [[paid.toLowerCase()]], "one payment.confirmed, for the real payment alone");
});
