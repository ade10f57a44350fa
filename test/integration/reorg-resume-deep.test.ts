// A fork deeper than the watcher's window is located, not guessed, and a resumed chain keeps what
// it kept (issue 60, defect 2), against anvil followed by the app's in-process watcher, ethereum
// Test (ETHEREUM_CONFIRMATIONS=3, ETHEREUM_MAX_REORG_DEPTH=5: the watcher is handed 2·5 + 16 = 26
// hashes, the core keeps 2 048 blocks). A chain followed for 110 blocks, a payment 60 blocks deep,
// then a 40-block anvil_reorg with another payment in the new branch's third block:
//  - the chain stops with the fork's exact depth, 40 (the core keeps where the branches part), and
//    the halt names the branch's real lowest block (chain-resume prints it);
//  - after `ops chain-resume` only the 40 blocks above the fork leave: the deep payment stays
//    confirmed with no payment.reorged, and the new branch's payment confirms.
// Before, the watcher found none of its 26 blocks on the node's chain and reported from the lowest
// of them saying it did not find the fork point: the chain stopped "at least 27" blocks deep, the
// resume took every kept block off the best chain (the deep payment back to pending, with
// payment.reorged) and the new branch's blocks below the watcher's window were never read.
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport, Http2SessionManager } from "@connectrpc/connect-node";
import t from "tap";
import { encodeFunctionData, keccak256, parseUnits, type Hex } from "viem";
import { ChainService } from "../../gen/payments/v1/chains_pb.ts";
import { ErrorDetailSchema } from "../../gen/payments/v1/options_pb.ts";
import { tokenAbi } from "../../scripts/devchain/chain.ts";
import { createInternalCredential } from "../../services/auth/admin.ts";
import { until } from "../helpers/harness.ts";
import { reorgSetup } from "../helpers/reorg.ts";
import { consumerDrained } from "../helpers/webhooks.ts";

const r = await reorgSetup(t, { ETHEREUM_MAX_REORG_DEPTH: "5" });

interface ChainRow {
  network: string;
  environment: string;
  height: number | null;
  halted: string | null;
  halted_depth: number | null;
  halted_depth_is_lower_bound: boolean;
}
async function chainRow(): Promise<ChainRow> {
  const run = await r.ops("chains", "--json");
  if (run.code !== 0) throw new Error(`ops chains: ${run.code} ${run.stderr}`);
  return (JSON.parse(run.stdout) as ChainRow[]).find((c) => c.network === "ethereum" && c.environment === "test") as ChainRow;
}

/** A USDC payment to `to`, signed and not sent: mined only where anvil_reorg puts it. */
async function signedOnly(to: Hex, amount: string): Promise<Hex> {
  const { dev } = r;
  const request = await dev.wallet.prepareTransactionRequest({
    account: dev.payer,
    chain: dev.wallet.chain,
    to: dev.tokens.USDC as Hex,
    data: encodeFunctionData({ abi: tokenAbi, functionName: "transfer", args: [to, parseUnits(amount, 6)] }),
  });
  return dev.wallet.signTransaction({ ...request, account: dev.payer, chain: dev.wallet.chain } as Parameters<typeof dev.wallet.signTransaction>[0]);
}

t.test("a 40-block reorg past ETHEREUM_MAX_REORG_DEPTH=5 with the watcher handed 26 hashes: stopped 40 blocks deep, exactly; resumed, only the 40 leave and the new branch is read from the fork", async (t) => {
  t.teardown(async () => {
    if (!t.passing()) console.error(await r.diagnosis());
  });
  // Followed for 110 blocks, a payment 60 blocks deep among them.
  await r.mine(50);
  const x = await r.createIntent("5");
  const paid = await r.pay(x, "5");
  await r.mine();
  const P = await r.head();
  await r.mine(59);
  await r.statusIs(x.public_id, "confirmed");
  await r.eventSeen(x.public_id, "payment.confirmed");
  const T = await r.caughtUp();
  t.equal(T - P + 1, 60, "the payment has 60 confirmations");
  t.ok(T >= 110, `the chain was followed for 110 blocks and more (head ${T})`);

  // The new branch: 40 blocks replacing the last 40, a payment in its third.
  const y = await r.createIntent("1");
  const raw = await signedOnly(y.deposit_address, "1");
  const depth = 40;
  const fork = T - depth + 1;
  await r.reorg(depth, [[raw, 2]]);
  t.equal(await r.head(), T, "the new branch is as high as the old one");
  const receipt = await r.dev.public.getTransactionReceipt({ hash: keccak256(raw) });
  t.equal(Number(receipt.blockNumber), fork + 2, "the new branch's payment is in its third block");
  t.equal((await r.dev.public.getTransactionReceipt({ hash: paid.hash })).blockNumber, BigInt(P), "the deep payment's block stays on the node's chain");

  // Stopped, with the exact depth: the core keeps where the branches part.
  let row: ChainRow | undefined;
  await until("the chain stopped", async () => ((row = await chainRow()).halted !== null ? row : undefined), 40_000, () => JSON.stringify(row)).catch((err: Error) => t.fail(err.message));
  t.equal(row?.halted_depth, depth, `stopped 40 blocks deep: ${row?.halted}`);
  t.equal(row?.halted_depth_is_lower_bound, false, "exactly, not as a lower bound");
  t.match(row?.halted, new RegExp(`^a branch from block ${fork - 1} takes 40 blocks off the best chain`), "from where the branches part");
  t.notMatch((await r.chainCheck()).message, /at least/, "readiness says the depth exactly");

  // Resumed: the fork named by the branch's real lowest block, just above where they part.
  const resumed = await r.ops("chain-resume", "--network", "ethereum", "--environment", "test");
  t.equal(resumed.code, 0, `ops chain-resume exits 0: ${resumed.stdout}${resumed.stderr}`);
  t.match(resumed.stdout, new RegExp(`the branch with block ${fork}, 0x[0-9a-f]{64}`), `and takes the branch from block ${fork}: ${resumed.stdout}`);

  const counted = await r.statusIs(y.public_id, "confirmed", 60_000).catch((err: Error) => {
    t.fail(`the new branch's payment confirms within 60 s of the resume: ${err.message}`);
    return undefined;
  });
  t.match(counted, { status: "confirmed", amount_received: "1" }, "the payment in the new branch's third block counts");
  t.match(counted?.transactions?.[0], { block_height: fork + 2, counted: true }, "in its block");
  await r.mine(2);
  await r.caughtUp();
  await consumerDrained(r.s);

  const now = await r.get(x.public_id);
  t.same([now.status, now.amount_received, now.transactions.length], ["confirmed", "5", 1], "the deep payment stays confirmed, counted once");
  t.match(now.transactions[0], { tx_hash: paid.hash, block_height: P, counted: true }, "in its own block");
  t.same(r.eventsOf(x.public_id), ["payment.confirmed", "payment.intent.created"], "no payment.reorged for a payment 20 blocks below the fork");

  // Only the blocks above the fork left the best chain.
  const em = r.s.app.db.em.fork();
  const gone = await em.execute<{ n: string }[]>(
    `select count(*) as n from chain_blocks where network = 'ethereum' and environment = 'test' and not best and height <= ?`,
    [fork - 1],
  );
  t.equal(Number(gone[0]?.n), 0, "no block at or below the fork point left the best chain");
  const left = await em.execute<{ n: string }[]>(`select count(*) as n from chain_blocks where network = 'ethereum' and environment = 'test' and not best`);
  t.equal(Number(left[0]?.n), depth, "the 40 blocks of the old branch above it did");
  const chain = await chainRow();
  t.same([chain.halted, chain.halted_depth], [null, null], "the chain counts");
});

t.test("ListBestBlocks over gRPC: the core's best chain below a height, its newest `limit` blocks there, oldest first; only to a credential that speaks for the network", async (t) => {
  const sessions = new Http2SessionManager(r.s.rpcUrl);
  t.teardown(() => sessions.abort());
  const chains = createClient(ChainService, createGrpcTransport({ baseUrl: r.s.rpcUrl, sessionManager: sessions }));
  const em = () => r.s.app.db.em.fork();
  const scoped = await createInternalCredential(em(), "ethereum reader", ["observe"], "test", { networks: ["ethereum"] });
  const unscoped = await createInternalCredential(em(), "no network", ["observe"], "test");
  const as = (c: { credential: string }) => ({ headers: { authorization: `Bearer ${c.credential}` } });
  const refusal = (err: unknown) => {
    const e = ConnectError.from(err);
    return `${Code[e.code]} ${e.findDetails(ErrorDetailSchema)[0]?.code ?? ""}`;
  };

  const page = await chains.listBestBlocks({ network: "ethereum", beforeHeight: 50n, limit: 10 }, as(scoped));
  t.same(page.blocks.map((b) => Number(b.height)), [40, 41, 42, 43, 44, 45, 46, 47, 48, 49], "blocks 40 to 49, oldest first");
  for (const b of page.blocks) t.equal(b.hash, (await r.dev.public.getBlock({ blockNumber: b.height })).hash, `block ${b.height}: the node's hash`);
  const [kept] = await em().execute<{ n: string; low: string }[]>(`select count(*) as n, min(height) as low from chain_blocks where network = 'ethereum' and environment = 'test' and best`);
  const all = await chains.listBestBlocks({ network: "ethereum", beforeHeight: 1_000_000n }, as(scoped));
  t.equal(all.blocks.length, Math.min(256, Number(kept?.n)), "256 at most unless asked for more: here every best block kept");
  t.same((await chains.listBestBlocks({ network: "ethereum", beforeHeight: BigInt(Number(kept?.low)) }, as(scoped))).blocks, [], "none below the lowest block kept");
  t.equal(await chains.listBestBlocks({ network: "ethereum", beforeHeight: 50n }, as(unscoped)).then(() => "accepted", refusal), "PermissionDenied insufficient_scope", "refused to a credential that does not speak for ethereum");
  t.equal(await chains.listBestBlocks({ network: "ethereum", beforeHeight: 50n, limit: 2049 }, as(scoped)).then(() => "accepted", refusal), "InvalidArgument validation_failed", "a page of more than 2 048 is refused");
});
