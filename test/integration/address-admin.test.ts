// Admin of deposit address sources (account keys, imported pools) and of internal credentials,
// on a real database; then the admin CLI itself for an import with a bad line and a credential.
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { HDKey, type Versions } from "@scure/bip32";
import t from "tap";
import { importAddresses, setAccountKey, showSources } from "../../services/addresses/admin.ts";
import { deriveAddress, testAccountKeys } from "../../services/addresses/keys.ts";
import { AdminError, createInternalCredential, createMerchant, revokeInternalCredential } from "../../services/auth/admin.ts";
import { hashApiKey } from "../../services/auth/keys.ts";
import { PaymentIntentRecord } from "../../services/intents/entities.ts";
import { newId } from "../../services/platform/ids.ts";
import { startTestApp } from "../helpers/harness.ts";
import { runCli } from "../helpers/processes.ts";


// BIP-0084's published account key (bitcoin live) and its first receive address.
const zpub = "zpub6rFR7y4Q2AijBEqTUquhVz398htDFrtymD9xYYfG1m4wAcvPhXNfE3EfH1r1ADqtfSdVCToUG868RvUUkgDKf31mGDtKsAYz2oz2AGutZYs";
const zpubReceive0 = "bc1qcr8te4kr609gcawutmrza0j4xv80jy8z306fyu";

const versions: Record<"x" | "v", Versions> = {
  x: { private: 0x0488ade4, public: 0x0488b21e },
  v: { private: 0x045f18bc, public: 0x045f1cf6 },
};
/** A fresh wallet's account node: its keys are nobody else's, so tests never collide. */
const account = (kind: "x" | "v", path: string) => HDKey.fromMasterSeed(randomBytes(32), versions[kind]).derive(path);

/** Distinct bitcoin live addresses of the BIP84 key, far from the indexes a source would hand out. */
let nextAddress = 1000;
const btc = () => deriveAddress("bitcoin", "live", zpub, nextAddress++);

type Asserts = Pick<typeof t, "type" | "match" | "fail">;

async function refused(t: Asserts, promise: Promise<unknown>, message: RegExp | string, what: string): Promise<string> {
  try {
    await promise;
  } catch (error) {
    t.type(error, AdminError, `${what}: an AdminError`);
    t.match((error as Error).message, message, what);
    return (error as Error).message;
  }
  t.fail(`${what}: not refused`);
  return "";
}

t.test("address sources and pools", async (t) => {
  const s = await startTestApp(t, {}, ["rpc"]);
  const em = () => s.app.db.em.fork();
  const merchant = (await createMerchant(em(), "Address Shop")).id;
  const other = (await createMerchant(em(), "Other Shop")).id;
  const poolCount = async (network: string) => {
    const [row] = await em().execute<{ n: number }[]>(`select count(*)::int as n from address_pool where network = ?`, [network]);
    return row?.n ?? -1;
  };

  t.test("set: a valid key, the same key again keeps the index, a new key starts at 0", async (t) => {
    const set = await setAccountKey(em(), merchant, "live", "bitcoin", ` ${zpub}\n`);
    t.match(set, { merchant, environment: "live", network: "bitcoin", account_key: zpub, next_index: 0, updated_at: String });
    await em().execute(`update address_sources set next_index = 7 where merchant_id = ? and network = 'bitcoin'`, [merchant]);
    const again = await setAccountKey(em(), merchant, "live", "bitcoin", zpub);
    t.equal(again.next_index, 7, "the same key keeps its index: its first addresses are already handed out");

    const first = account("x", "m/44'/60'/0'").publicExtendedKey;
    const second = account("x", "m/44'/60'/0'").publicExtendedKey;
    t.equal((await setAccountKey(em(), merchant, "test", "ethereum", first)).account_key, first);
    await em().execute(`update address_sources set next_index = 3 where merchant_id = ? and network = 'ethereum'`, [merchant]);
    const replaced = await setAccountKey(em(), merchant, "test", "ethereum", second);
    t.match(replaced, { account_key: second, next_index: 0 }, "a different key replaces it from index 0");
    const back = await setAccountKey(em(), merchant, "test", "ethereum", first);
    t.match(back, { account_key: first, next_index: 3 }, "a key the source had before resumes where it stopped: no address twice");
    t.match(await setAccountKey(em(), merchant, "test", "ethereum", second), { account_key: second, next_index: 0 }, "and so does the other");
    const elsewhere = (await createMerchant(em(), "Elsewhere Shop")).id;
    await refused(t, setAccountKey(em(), elsewhere, "test", "ethereum", second), /already the source of another merchant/, "another merchant's current key");
    await refused(t, setAccountKey(em(), elsewhere, "test", "ethereum", first), /already the source of another merchant/, "another merchant's former key");

    const vpub = account("v", "m/84'/1'/0'").publicExtendedKey;
    t.match(await setAccountKey(em(), merchant, "test", "bitcoin", vpub), { environment: "test", account_key: vpub, next_index: 0 });
  });

  t.test("set with the key's origin (as a descriptor writes it): kept with the key, through a rotation and back", async (t) => {
    const shop = (await createMerchant(em(), "Origin Shop")).id;
    const seed = HDKey.fromMasterSeed(randomBytes(32), versions.v);
    const fingerprint = seed.fingerprint.toString(16).padStart(8, "0");
    const vpub = seed.derive("m/84'/1'/0'").publicExtendedKey;
    t.match(await setAccountKey(em(), shop, "test", "bitcoin", vpub), { account_key: vpub, key_origin: null }, "a bare key: no origin");
    t.match(await setAccountKey(em(), shop, "test", "bitcoin", `[${fingerprint}/84h/1h/0h]${vpub}`), { account_key: vpub, key_origin: `${fingerprint}/84'/1'/0'` }, "the same key with its origin gains it");
    t.match(await setAccountKey(em(), shop, "test", "bitcoin", vpub), { key_origin: `${fingerprint}/84'/1'/0'` }, "and keeps it when set bare again");
    const next = account("v", "m/84'/1'/0'").publicExtendedKey;
    t.match(await setAccountKey(em(), shop, "test", "bitcoin", next), { account_key: next, key_origin: null }, "another key: its own (none)");
    t.match(await setAccountKey(em(), shop, "test", "bitcoin", vpub), { account_key: vpub, key_origin: `${fingerprint}/84'/1'/0'` }, "the first key back: its origin kept through its retirement");
    t.match((await showSources(em(), shop)).account_keys, [{ network: "bitcoin", account_key: vpub, key_origin: `${fingerprint}/84'/1'/0'` }]);
    await refused(t, setAccountKey(em(), shop, "test", "bitcoin", `[${fingerprint}/84'/0'/0']${vpub}`), /path is m\/84'\/0'\/0'; bitcoin test mode expects m\/84'\/1'\/0'/, "an origin with another path");
    await refused(t, setAccountKey(em(), shop, "test", "bitcoin", `[xyz/84'/1'/0']${vpub}`), /fingerprint, 8 hex digits/, "an origin without a fingerprint");
    t.match((await showSources(em(), shop)).account_keys[0], { key_origin: `${fingerprint}/84'/1'/0'` }, "a refused origin changed nothing");
  });

  t.test("set: refusals", async (t) => {
    await refused(t, setAccountKey(em(), "mer_nobody", "live", "bitcoin", zpub), /no merchant mer_nobody/, "unknown merchant");
    const unknown = await refused(t, setAccountKey(em(), merchant, "live", "dogecoin", zpub), /unknown network "dogecoin"/, "unknown network");
    t.match(unknown, /bitcoin, ethereum, tron, solana, polygon/, "the networks are listed");

    const xprv = account("x", "m/44'/60'/0'").privateExtendedKey;
    const message = await refused(t, setAccountKey(em(), merchant, "live", "ethereum", xprv), /never give a private key/, "a private key");
    t.notOk(message.includes(xprv) || message.includes(xprv.slice(4, 20)), "the private key is not echoed");

    await refused(t, setAccountKey(em(), merchant, "test", "bitcoin", zpub), /got a zpub.*vpub/, "a live key in test mode");
    await refused(t, setAccountKey(em(), merchant, "live", "ethereum", zpub), /got a zpub.*xpub/, "a bitcoin key for ethereum");
    await refused(t, setAccountKey(em(), merchant, "live", "solana", zpub), /imported address pool/, "solana has no account key");

    await refused(t, setAccountKey(em(), merchant, "test", "ethereum", testAccountKeys.ethereum), "the built-in Test key is shared; give your own", "the test key");
    await refused(t, setAccountKey(em(), merchant, "live", "polygon", testAccountKeys.polygon), "the built-in Test key is shared", "the test key, live");

    await refused(t, setAccountKey(em(), other, "live", "bitcoin", zpub), /already the source of another merchant or network: addresses would repeat/, "another merchant's key");
    const evm = account("x", "m/44'/60'/0'").publicExtendedKey;
    await setAccountKey(em(), other, "live", "ethereum", evm);
    await refused(t, setAccountKey(em(), other, "live", "polygon", evm), /another merchant or network/, "the same merchant's key of another network");
    await refused(t, setAccountKey(em(), other, "test", "ethereum", evm), /another merchant or network/, "the same key in the other environment");
    const [row] = await em().execute<{ n: number }[]>(`select count(*)::int as n from address_sources where merchant_id = ?`, [other]);
    t.equal(row?.n, 1, "nothing refused was stored");
  });

  t.test("import: addresses stored normalized, comments and blank lines skipped", async (t) => {
    const a = btc();
    const b = btc();
    const evm = deriveAddress("ethereum", "live", account("x", "m/44'/60'/0'").publicExtendedKey, 0);
    const text = `# cold wallet, batch 1\n\n${a.toUpperCase()}\r\n  ${b}  \n# end\n`;
    const imported = await importAddresses(em(), merchant, "live", "bitcoin", text);
    t.same(imported, { merchant, environment: "live", network: "bitcoin", imported: 2, free: 2 });
    const rows = await em().execute<{ address: string; merchant_id: string; leased_at: Date | null }[]>(
      `select address, merchant_id, leased_at from address_pool where network = 'bitcoin' and merchant_id = ? order by id`,
      [merchant],
    );
    t.same(rows.map((r) => r.address), [a, b], "bech32 lowercased, in file order");

    const lower = await importAddresses(em(), merchant, "live", "ethereum", evm.toLowerCase());
    t.equal(lower.imported, 1);
    const [stored] = await em().execute<{ address: string }[]>(`select address from address_pool where network = 'ethereum'`);
    t.equal(stored?.address, evm, "an all-lowercase EVM address is stored EIP-55 checksummed");

    await em().execute(`update address_pool set leased_at = now(), payment_intent_id = 'pi_x' where address = ?`, [a]);
    t.equal((await importAddresses(em(), merchant, "live", "bitcoin", btc())).free, 2, "free counts only unleased addresses");
  });

  t.test("import: the first bad line is named and nothing is imported", async (t) => {
    const before = await poolCount("bitcoin");
    const message = await refused(
      t,
      importAddresses(em(), merchant, "live", "bitcoin", `${btc()}\n# ok so far\n${btc()}\nbc1qnotanaddress\n0xnope\n`),
      /^line 4: is not a valid bitcoin address/,
      "a bad line",
    );
    t.notMatch(message, /line 5/, "only the first bad line");
    await refused(t, importAddresses(em(), merchant, "test", "bitcoin", `${btc()}\n`), /^line 1: is a bitcoin address; test mode needs a bitcoin testnet address/, "a live address in test mode");
    await refused(t, importAddresses(em(), merchant, "live", "dogecoin", btc()), /unknown network "dogecoin"/, "unknown network");
    await refused(t, importAddresses(em(), "mer_nobody", "live", "bitcoin", btc()), /no merchant mer_nobody/, "unknown merchant");
    t.equal(await poolCount("bitcoin"), before, "nothing imported");
  });

  t.test("import: an address repeated in the file, in a pool, or an intent's deposit address", async (t) => {
    const before = await poolCount("bitcoin");
    const a = btc();
    await refused(t, importAddresses(em(), merchant, "live", "bitcoin", `${a}\n${btc()}\n\n${a.toUpperCase()}\n`), /^line 4: repeats line 1$/, "repeated in the file");

    const pooled = btc();
    await importAddresses(em(), other, "live", "bitcoin", pooled);
    await refused(t, importAddresses(em(), merchant, "live", "bitcoin", `${btc()}\n${pooled}\n`), /^line 2: is already in an address pool on bitcoin$/, "in another merchant's pool");

    const now = new Date();
    await em().insert(PaymentIntentRecord, {
      id: newId("pi"),
      merchant: other,
      environment: "live",
      status: "pending",
      merchantReference: null,
      network: "bitcoin",
      asset: "BTC",
      requestedAmount: "0.001",
      metadata: {},
      createdAt: now,
      expiresAt: new Date(now.getTime() + 3_600_000),
      updatedAt: now,
      depositAddress: zpubReceive0,
      addressIndex: 0,
      amountReceived: null,
      paidAt: null,
      expiredAt: null,
      cancelledAt: null,
    });
    await refused(
      t,
      importAddresses(em(), merchant, "live", "bitcoin", `${btc()}\n${btc()}\n${zpubReceive0}\n`),
      /^line 3: is already the deposit address of a payment intent on bitcoin$/,
      "an intent's deposit address",
    );
    t.equal(await poolCount("bitcoin"), before + 1, "only the other merchant's import went in");
  });

  t.test("show", async (t) => {
    const shown = await showSources(em(), merchant);
    t.equal(shown.merchant, merchant);
    t.same(
      shown.account_keys.map((k) => [k.environment, k.network, k.next_index]),
      [
        ["live", "bitcoin", 7],
        ["test", "bitcoin", 0],
        ["test", "ethereum", 0],
      ],
    );
    t.equal(shown.account_keys[0]?.account_key, zpub);
    t.same(shown.pools, [
      { environment: "live", network: "bitcoin", imported: 3, free: 2 },
      { environment: "live", network: "ethereum", imported: 1, free: 1 },
    ]);
    const empty = (await createMerchant(em(), "Empty")).id;
    t.same(await showSources(em(), empty), { merchant: empty, account_keys: [], pools: [] }, "a merchant with no sources");
    await refused(t, showSources(em(), "mer_nobody"), /no merchant/, "unknown merchant");
  });

  t.test("internal credentials: only the hash is stored; revoking twice keeps the first time", async (t) => {
    const created = await createInternalCredential(em(), "  chain watcher ", ["observe"], "test");
    t.match(created, { id: /^ic_[0-9A-Za-z]{24}$/, name: "chain watcher", credential: /^int_[0-9A-Za-z]{40}$/, created_at: String });
    const rows = await em().execute<Record<string, unknown>[]>(`select * from internal_credentials where id = ?`, [created.id]);
    t.equal(rows.length, 1);
    const row = rows[0] ?? {};
    t.equal(row.secret_hash, hashApiKey(created.credential), "the SHA-256 of the secret");
    t.equal(row.hint, `${created.credential.slice(0, 12)}…`);
    t.notOk(JSON.stringify(row).includes(created.credential), "the secret itself is nowhere in the row");
    await refused(t, createInternalCredential(em(), "  ", ["observe"], "test"), /--name must be 1 to 200/, "an empty name");

    const revoked = await revokeInternalCredential(em(), created.id);
    t.match(revoked, { id: created.id, name: "chain watcher", revoked_at: String });
    const again = await revokeInternalCredential(em(), created.id);
    t.equal(again.revoked_at, revoked.revoked_at, "the first revocation time stays");
    await refused(t, revokeInternalCredential(em(), "ic_nobody"), /no internal credential ic_nobody/, "unknown id");
  });
});

const admin = (env: Record<string, string>, ...args: string[]) => runCli("services/app/admin.ts", env, ...args);

t.test("the admin CLI", async (t) => {
  const s = await startTestApp(t, {}, ["rpc"]);
  const env = { DATABASE_URL: s.databaseUrl };
  const merchant = (await createMerchant(s.app.db.em.fork(), "CLI Shop")).id;
  const dir = mkdtempSync(path.join(tmpdir(), "address-import-"));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const file = path.join(dir, "addresses.txt");
  writeFileSync(file, `${btc()}\n${btc()}\nnot-an-address\n`);

  const bad = await admin(env, "address", "import", "--merchant", merchant, "--environment", "live", "--network", "bitcoin", "--file", file);
  t.equal(bad.code, 2, bad.stderr);
  t.equal(bad.stdout, "", "nothing on stdout");
  t.match(bad.stderr, /^admin: line 3: is not a valid bitcoin address[^\n]*\n$/, "one line on stderr naming the line");
  const [row] = await s.app.db.em.fork().execute<{ n: number }[]>(`select count(*)::int as n from address_pool`);
  t.equal(row?.n, 0, "nothing imported");

  const created = await admin(env, "internal-credential", "create", "--name", "watcher", "--roles", "observe", "--environment", "test");
  t.equal(created.code, 0, created.stderr);
  const credential = JSON.parse(created.stdout);
  t.match(credential, { id: /^ic_/, name: "watcher", credential: /^int_[0-9A-Za-z]{40}$/ });
});
