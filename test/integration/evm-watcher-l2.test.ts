// USDC on base and arbitrum, followed by the built-in EVM watcher as on ethereum: anvil standing in
// for Base Sepolia (chain id 84532) and Arbitrum Sepolia (421614), the asset table's Test USDC
// contract placed at its address on each, a Test intent created through REST with the chain's
// EIP-681 payment URI, paid with a real signed transfer, and confirmed through REST at the
// network's confirmation count. The watcher proves each node serves a Test chain of that network
// (its chain id is not the mainnet's, its block 0 not base mainnet's) before reading it.
import t from "tap";
import type { Hex } from "viem";
import { signPayment, startDevChain } from "../../scripts/devchain/chain.ts";
import { findAsset } from "../../services/vocabulary/assets.ts";
import { call, idemKey, merchantWithKey, startTestApp, until } from "../helpers/harness.ts";

const networks = [
  { network: "base", chainId: 84532 },
  { network: "arbitrum", chainId: 421614 },
] as const;
const chains = await Promise.all(networks.map(({ network }) => startDevChain({ network })));
t.teardown(() => Promise.all(chains.map((c) => c.stop())));
const [base, arbitrum] = chains as [(typeof chains)[number], (typeof chains)[number]];

// 2 confirmations instead of the asset table's 60 and 480: the test mines every block itself.
const s = await startTestApp(t, {
  BASE_TEST_RPC_URL: base.url,
  ARBITRUM_TEST_RPC_URL: arbitrum.url,
  BASE_CONFIRMATIONS: "2",
  ARBITRUM_CONFIRMATIONS: "2",
  WATCHER_POLL_MS: "100",
});
const a = await merchantWithKey(s.app);
const intents = `/api/v1/merchants/${a.merchant}/payment-intents`;
const get = async (id: string) => (await call(s.base, "GET", `${intents}/${id}`, { key: a.key })).body.data;
const position = async (network: string) =>
  (await s.app.db.em.fork().execute<{ height: string | null }[]>(`select height from chain_watchers where network = ? and environment = 'test'`, [network]))[0]?.height;

networks.forEach(({ network, chainId }, i) => {
  const dev = chains[i] as (typeof chains)[number];
  t.test(`${network}: a USDC payment to a Test intent counts at its confirmations, through REST`, async (t) => {
    t.equal(dev.chainId, chainId, `anvil serves ${network}'s Test chain id`);
    await until(`the ${network} watcher saved a position`, async () => (await position(network)) != null, 30_000);
    const created = await call(s.base, "POST", intents, { key: a.key, idempotencyKey: idemKey(), body: { network, asset: "USDC", requested_amount: "12.50" } });
    t.equal(created.status, 200, JSON.stringify(created.body));
    const pi = created.body.data as { public_id: string; deposit_address: Hex; payment_uri: string; required_confirmations: number; watched: boolean };
    const contract = findAsset(network, "USDC")?.contract?.test as string;
    t.equal(pi.payment_uri, `ethereum:${contract}@${chainId}/transfer?address=${pi.deposit_address}&uint256=12500000`, "EIP-681 with the Test chain id and Circle's Test USDC");
    t.equal(pi.required_confirmations, 2);
    t.equal(pi.watched, true, "a built-in watcher follows the chain");

    const { hash } = await signPayment(dev, pi.deposit_address, "12.5", "USDC", 6);
    await dev.test.mine({ blocks: 1 });
    const seen = await until(`${pi.public_id} shows ${hash} at 1 confirmation`, async () => {
      const now = await get(pi.public_id);
      return now.transactions?.some((x: { tx_hash: string; confirmations: number }) => x.tx_hash === hash && x.confirmations === 1) ? now : undefined;
    }, 20_000);
    t.equal(seen.status, "pending", "1 of 2 confirmations: seen, not counted");
    t.same([seen.transactions[0].asset, seen.transactions[0].amount, seen.transactions[0].reason], ["USDC", "12.5", "below_confirmations"]);
    await dev.test.mine({ blocks: 1 });
    const confirmed = await until(`${pi.public_id} confirmed`, async () => {
      const now = await get(pi.public_id);
      return now.status === "confirmed" ? now : undefined;
    }, 20_000);
    t.equal(confirmed.amount_received, "12.5");
    t.same([confirmed.transactions.length, confirmed.transactions[0].tx_hash, confirmed.transactions[0].counted], [1, hash, true], "the one transfer, counted");
  });
});

networks.forEach(({ network, chainId }, i) => {
  const dev = chains[i] as (typeof chains)[number];
  t.test(`${network}: ETH, the rollup's gas coin, paid as a native transfer, counts at its confirmations`, async (t) => {
    const created = await call(s.base, "POST", intents, { key: a.key, idempotencyKey: idemKey(), body: { network, asset: "ETH", requested_amount: "0.05" } });
    t.equal(created.status, 200, JSON.stringify(created.body));
    const pi = created.body.data as { public_id: string; deposit_address: Hex; payment_uri: string };
    t.equal(pi.payment_uri, `ethereum:${pi.deposit_address}@${chainId}?value=50000000000000000`, "EIP-681 native, with the Test chain id");
    const { hash } = await signPayment(dev, pi.deposit_address, "0.05", "ETH", 18);
    const confirmed = await until(`${pi.public_id} confirmed`, async () => {
      await dev.test.mine({ blocks: 1 });
      const now = await get(pi.public_id);
      return now.status === "confirmed" ? now : undefined;
    }, 20_000);
    t.same([confirmed.amount_received, confirmed.transactions[0].tx_hash, confirmed.transactions[0].asset], ["0.05", hash, "ETH"]);
  });
});
