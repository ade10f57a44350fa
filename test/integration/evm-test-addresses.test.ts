// The EVM networks' built-in Test key is one (m/44'/60'/0'), so an index is the same address on
// ethereum, polygon, base and arbitrum. Each network had its own index sequence: the first intent
// on each got index 0, one address for four intents, and a payment sent on the wrong chain counted
// for another intent. They now share one sequence (Migration20261202160000_EvmSharedIndex): every
// Test intent's address is its own on every EVM chain, through the create's transactional path and
// the addresses reserved ahead alike, creates on several chains at once included. Through REST.
import t from "tap";
import { builtinAddress } from "../../services/addresses/keys.ts";
import { openDatabase } from "../../services/app/database.ts";
import { call, createTestDatabase, idemKey, merchantWithKey, startTestApp } from "../helpers/harness.ts";

const s = await startTestApp(t, {}, ["rpc", "gateway"]);
const evm = ["ethereum", "polygon", "base", "arbitrum"];

t.test("Test intents on the four EVM networks never share an address", async (t) => {
  const m = await merchantWithKey(s.app);
  const create = async (network: string) => {
    const res = await call(s.base, "POST", `/api/v1/merchants/${m.merchant}/payment-intents`, {
      key: m.key,
      idempotencyKey: idemKey(),
      body: { network, asset: "USDC", requested_amount: "1.00" },
    });
    if (res.status !== 200) throw new Error(`${network}: ${res.status} ${JSON.stringify(res.body)}`);
    return { network, id: res.body.data.public_id as string, address: res.body.data.deposit_address as string };
  };
  // One at a time first (each network's first create allocates in its transaction), then many at
  // once across the four (from the addresses reserved ahead, a block of the shared sequence each).
  const made = [];
  for (const network of evm) made.push(await create(network));
  made.push(...(await Promise.all(Array.from({ length: 40 }, (_, i) => create(evm[i % evm.length]!)))));
  const byAddress = new Map<string, string[]>();
  for (const i of made) byAddress.set(i.address.toLowerCase(), [...(byAddress.get(i.address.toLowerCase()) ?? []), `${i.network} ${i.id}`]);
  t.same([...byAddress.values()].filter((ids) => ids.length > 1), [], `${made.length} intents, ${byAddress.size} addresses: none shared`);

  // Each is the built-in key's address at the index stored with it, one index per address.
  const rows = await s.app.db.em.fork().execute<{ id: string; network: string; address_index: number; deposit_address: string }[]>(
    `select id, network, address_index, deposit_address from payment_intents where merchant_id = ?`,
    [m.merchant],
  );
  t.equal(rows.length, made.length, "every intent stored");
  t.ok(rows.every((r) => builtinAddress(r.network, r.address_index) === r.deposit_address), "each address is the built-in key's at its index");
  t.equal(new Set(rows.map((r) => r.address_index)).size, rows.length, "and no index is used twice, whatever the network");
});

t.test("the upgrade moves the shared sequence past every index any EVM network handed out", async (t) => {
  const db = await openDatabase(await createTestDatabase(t));
  t.teardown(() => db.close());
  await db.migrator.up({ to: "Migration20261202150000_EveryEventType" });
  // Before: base handed out 0–6, ethereum 0–2, polygon and arbitrum nothing.
  await db.em.fork().execute(`select nextval('test_address_index_base') from generate_series(1, 7)`);
  await db.em.fork().execute(`select nextval('test_address_index_ethereum') from generate_series(1, 3)`);
  await db.migrator.up();
  const [next] = await db.em.fork().execute<{ n: number }[]>(`select nextval('test_address_index_ethereum')::int as n`);
  t.equal(next?.n, 7, "the next index after base's 0–6");
  const left = await db.em.fork().execute<{ name: string }[]>(`select relname as name from pg_class where relkind = 'S' and relname like 'test_address_index_%' order by 1`);
  t.same(left.map((r) => r.name), ["test_address_index_bitcoin", "test_address_index_ethereum", "test_address_index_solana", "test_address_index_tron"], "one sequence per built-in key");
});
