// Issue 40, item 7: an address committed late is not missed. The chain watcher learns the
// addresses to watch from ChainService.ListWatchedAddresses, reading what was added since its
// last read. A create can commit long after its created_at (the creating process's clock when
// the create began): here one waits a minute on a row lock of its merchant's account key while
// the watcher keeps polling. Its payment must still count, seen by the incremental read (the
// full re-read comes only every 10 minutes). Then the same at the RPC: a transaction open across
// several reads is listed once it commits, and a cursor the server no longer writes restarts the
// list from the top.
import { randomBytes } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport, Http2SessionManager } from "@connectrpc/connect-node";
import { HDKey } from "@scure/bip32";
import pg from "pg";
import t from "tap";
import type { Hex } from "viem";
import { ChainService } from "../../gen/payments/v1/chains_pb.ts";
import { ErrorDetailSchema } from "../../gen/payments/v1/options_pb.ts";
import { signPayment, startDevChain } from "../../scripts/devchain/chain.ts";
import { createInternalCredential } from "../../services/auth/admin.ts";
import { CursorCodec } from "../../services/platform/cursor.ts";
import { deriveKey } from "../../services/platform/secret-key.ts";
import { call, idemKey, merchantWithKey, startTestApp, until, type Credentials } from "../helpers/harness.ts";

const holdMs = 60_000;

const dev = await startDevChain();
t.teardown(() => dev.stop());
// WATCHER_POLL_MS: the watcher lists what was added since every 200 ms; the full re-read stays at its 10 minutes.
const s = await startTestApp(t, { ETHEREUM_TEST_RPC_URL: dev.url, ETHEREUM_CONFIRMATIONS: "2", WATCHER_POLL_MS: "200" });
const em = () => s.app.db.em.fork();
const a = await merchantWithKey(s.app);
// Another merchant, on the built-in Test addresses.
const b = await merchantWithKey(s.app);
// The merchant's own account key for Test ethereum: after its first create the app reserves the
// next index ahead of each create, by an update of this row, without a lock timeout.
const xpub = HDKey.fromMasterSeed(randomBytes(32)).derive(`m/44'/60'/0'`).publicExtendedKey;
await em().execute(
  `insert into address_sources (merchant_id, environment, network, account_key, next_index, created_at, updated_at)
   values (?, 'test', 'ethereum', ?, 0, now(), now())`,
  [a.merchant, xpub],
);

interface Intent {
  public_id: string;
  deposit_address: Hex;
  created_at: string;
}

const intentsPath = (c: Credentials) => `/api/v1/merchants/${c.merchant}/payment-intents`;
async function createIntent(c: Credentials = a): Promise<Intent> {
  const res = await call(s.base, "POST", intentsPath(c), { key: c.key, idempotencyKey: idemKey(), body: { network: "ethereum", asset: "USDC", requested_amount: "5" } });
  if (res.status !== 200) throw new Error(`create: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.data as Intent;
}
const get = async (id: string, c: Credentials = a) => (await call(s.base, "GET", `${intentsPath(c)}/${id}`, { key: c.key })).body.data;
const confirmed = (id: string, ms: number, c: Credentials = a) =>
  until(`${id} confirmed`, async () => ((await get(id, c)).status === "confirmed" ? true : undefined), ms, () => "");
const pay = (pi: Intent) => signPayment(dev, pi.deposit_address, "5", "USDC", 6);

t.test("a create that commits a minute after its created_at: its payment still counts", async (t) => {
  // The first create allocates in its transaction and teaches the app where this merchant's addresses come from.
  const early = await createIntent();
  await until(
    "the watcher follows the chain",
    async () => (await em().execute(`select 1 from chain_watchers where network = 'ethereum' and environment = 'test' and height is not null`)).length > 0,
    30_000,
  );

  const holder = new pg.Client({ connectionString: s.databaseUrl });
  await holder.connect();
  t.teardown(() => holder.end());
  await holder.query("begin");
  await holder.query(`select 1 from address_sources where merchant_id = $1 and environment = 'test' and network = 'ethereum' for update`, [a.merchant]);
  const held = Date.now();
  const pending = createIntent();
  pending.catch(() => undefined);
  await until(
    "the create waits for the account key's row",
    async () =>
      (await em().execute(
        `select 1 from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock' and query like '%address_sources%'`,
      )).length > 0,
    20_000,
  );

  // Meanwhile the watcher goes on listing (every 200 ms), and another merchant's create, 15 s
  // into the wait, is listed: its payment counts before the waiting create commits.
  await sleep(15_000 - (Date.now() - held));
  const meanwhile = await createIntent(b);
  await pay(meanwhile);
  await dev.test.mine({ blocks: 2 });
  await confirmed(meanwhile.public_id, 30_000, b);
  t.pass("an intent created while the other create waits is listed and its payment counts");

  await sleep(holdMs - (Date.now() - held));
  await holder.query("commit");
  const late = await pending;
  const lag = Date.now() - Date.parse(late.created_at);
  t.ok(lag >= holdMs - 5_000, `committed ${lag} ms after its created_at`);
  t.not(late.deposit_address.toLowerCase(), early.deposit_address.toLowerCase());

  await pay(early);
  await pay(late);
  await dev.test.mine({ blocks: 2 });
  await confirmed(early.public_id, 30_000);
  t.pass("the intent created before the wait is confirmed: the watcher follows the chain");
  // Both payments are in the same blocks: by now the watcher has processed them.
  await confirmed(late.public_id, 30_000);
  t.pass("the intent whose create committed late is confirmed too");
});

t.test("ListWatchedAddresses: a transaction open across reads is listed once it commits; an old cursor starts over", async (t) => {
  const sessions = new Http2SessionManager(s.rpcUrl);
  t.teardown(() => sessions.abort());
  const chains = createClient(ChainService, createGrpcTransport({ baseUrl: s.rpcUrl, sessionManager: sessions }));
  const { credential } = await createInternalCredential(em(), "late commit test", ["observe"], "test", { networks: ["ethereum"] });
  const headers = { authorization: `Bearer ${credential}` };
  /** Every page from `cursor` on, a small page size so that reads page; the addresses (lowercase) and the cursor to go on with. */
  async function read(cursor: string | undefined): Promise<{ addresses: Set<string>; cursor: string }> {
    const addresses = new Set<string>();
    for (;;) {
      const page = await chains.listWatchedAddresses({ network: "ethereum", cursor, limit: 2 }, { headers });
      for (const x of page.addresses) addresses.add(x.toLowerCase());
      cursor = page.nextCursor;
      if (!page.hasMore) return { addresses, cursor };
    }
  }
  const address = () => `0x${randomBytes(20).toString("hex")}`;
  /**
   * An intent row with `deposit`, created `age` seconds ago, written by `client` (in its transaction,
   * when it has one open); its watch_xid is its transaction's, or `xid`.
   */
  const insert = (client: pg.Client | pg.Pool, deposit: string, age = 0, xid?: string) =>
    client.query(
      `insert into payment_intents (id, merchant_id, environment, status, network, asset, requested_amount, metadata, created_at, expires_at, updated_at, deposit_address, watch_xid)
       values ($1, $2, 'test', 'pending', 'ethereum', 'USDC', 1, '{}', now() - make_interval(secs => $4), now() + interval '1 hour', now(), $3, coalesce($5::xid8, pg_current_xact_id()))`,
      [`pi_late_${randomBytes(8).toString("hex")}`, a.merchant, deposit, age, xid ?? null],
    );
  const pool = new pg.Pool({ connectionString: s.databaseUrl, max: 2 });
  t.teardown(() => pool.end());
  const open = new pg.Client({ connectionString: s.databaseUrl });
  await open.connect();
  t.teardown(() => open.end());

  const existing = address();
  await insert(pool, existing);
  // Transaction ids of different lengths (as from before the column, or long ago): pages follow them as numbers.
  const shortXid = address();
  const longXid = address();
  await insert(pool, shortXid, 0, "999");
  await insert(pool, longXid, 0, "1000");
  // A transaction that began (and took its transaction id) before the reads, as a create waiting on a lock.
  await open.query("begin");
  await open.query("select pg_current_xact_id()");
  const first = await read(undefined);
  t.ok([existing, shortXid, longXid].every((x) => first.addresses.has(x)), "the first read lists what exists, page after page");

  const before = address();
  await insert(pool, before);
  const second = await read(first.cursor);
  t.ok(second.addresses.has(before), "what committed since is listed");

  // Its intent's created_at is a minute back, as a create's that waited that long before it could commit.
  const lateAddress = address();
  await insert(open, lateAddress, 60);
  // Later creates commit meanwhile, and the reads go on past them.
  const after = address();
  await insert(pool, after);
  const third = await read(second.cursor);
  t.ok(third.addresses.has(after), "a create committed after the open one began is listed");
  t.notOk(third.addresses.has(lateAddress), "the open transaction's row is not visible yet");
  const fourth = await read(third.cursor);
  t.notOk(fourth.addresses.has(lateAddress), "nor at the read after");

  await open.query("commit");
  const fifth = await read(fourth.cursor);
  t.ok(fifth.addresses.has(lateAddress), "once it commits, the next read lists it");

  // A cursor as the service wrote it before (creation time and id): the list starts over, rather than failing.
  const codec = new CursorCodec(deriveKey(s.masterKey, "list-cursor"));
  const old = codec.encode("watched:ethereum:test", { t: Date.now(), i: "" });
  const again = await read(old);
  t.ok([existing, before, lateAddress, after].every((x) => again.addresses.has(x)), "an old cursor reads everything again");

  const refused = await chains.listWatchedAddresses({ network: "ethereum", cursor: "not-a-cursor" }, { headers }).then(
    () => undefined,
    (e: unknown) => ConnectError.from(e),
  );
  t.equal(refused?.code, Code.InvalidArgument, "a cursor that is not one is refused");
  t.equal(refused?.findDetails(ErrorDetailSchema)[0]?.code, "invalid_cursor");
});
