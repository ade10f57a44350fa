// The cache of verified credentials: used only while revocations are known to arrive, never
// keeps a row read before a revocation it heard of, and reads again after its TTL.
import t from "tap";
import { CredentialCache } from "../../services/auth/credential-cache.ts";

function counter(row: unknown) {
  let loads = 0;
  return { load: async () => (loads++, row), get loads() { return loads; } };
}

t.test("not listening: every lookup reads the database", async (t) => {
  const cache = new CredentialCache();
  const db = counter({ id: "k1" });
  await cache.lookup("api_key", "h1", db.load);
  await cache.lookup("api_key", "h1", db.load);
  t.equal(db.loads, 2, "nothing is cached before LISTEN is in place");
  t.equal(cache.size, 0);
});

t.test("listening: a verified row is read once, until a change to it is announced", async (t) => {
  const cache = new CredentialCache();
  cache.listening();
  const db = counter({ id: "k1" });
  for (let i = 0; i < 3; i++) t.same(await cache.lookup("api_key", "h1", db.load), { id: "k1" });
  t.equal(db.loads, 1, "one read for three lookups");
  cache.invalidate("h2");
  await cache.lookup("api_key", "h1", db.load);
  t.equal(db.loads, 1, "another credential's change leaves it");
  cache.invalidate("h1");
  await cache.lookup("api_key", "h1", db.load);
  t.equal(db.loads, 2, "its own change drops it");
});

t.test("an unknown credential is never cached", async (t) => {
  const cache = new CredentialCache();
  cache.listening();
  const db = counter(undefined);
  await cache.lookup("site", "nope", db.load);
  await cache.lookup("site", "nope", db.load);
  t.equal(db.loads, 2);
});

t.test("a row read while a change was announced is not kept", async (t) => {
  const cache = new CredentialCache();
  cache.listening();
  let loads = 0;
  // The revocation commits (and is announced) while the read of the old row is under way.
  const racing = async () => {
    loads++;
    if (loads === 1) cache.invalidate("h1");
    return { id: "k1", revoked_at: loads === 1 ? null : "now" };
  };
  t.same(await cache.lookup("api_key", "h1", racing), { id: "k1", revoked_at: null }, "the racing read answers its own request");
  t.same(await cache.lookup("api_key", "h1", racing), { id: "k1", revoked_at: "now" }, "but the next one reads again and sees the revocation");
});

t.test("losing the connection empties the cache and stops using it", async (t) => {
  const cache = new CredentialCache();
  cache.listening();
  const db = counter({ id: "k1" });
  await cache.lookup("cashier", "h1", db.load);
  cache.lost();
  t.equal(cache.size, 0, "emptied");
  await cache.lookup("cashier", "h1", db.load);
  await cache.lookup("cashier", "h1", db.load);
  t.equal(db.loads, 3, "every lookup reads while away");
  cache.listening();
  await cache.lookup("cashier", "h1", db.load);
  await cache.lookup("cashier", "h1", db.load);
  t.equal(db.loads, 4, "cached again once back");
});

t.test("an entry is read again after its TTL", async (t) => {
  let now = 0;
  const cache = new CredentialCache({ ttlMs: 1000, now: () => now });
  cache.listening();
  const db = counter({ id: "k1" });
  await cache.lookup("internal", "h1", db.load);
  now = 999;
  await cache.lookup("internal", "h1", db.load);
  t.equal(db.loads, 1);
  now = 1000;
  await cache.lookup("internal", "h1", db.load);
  t.equal(db.loads, 2);
});

t.test("the cache is bounded", async (t) => {
  const cache = new CredentialCache({ maxEntries: 3 });
  cache.listening();
  for (let i = 0; i < 10; i++) await cache.lookup("api_key", `h${i}`, async () => ({ i }));
  t.equal(cache.size, 3);
});

t.test("the cache is used only while the listener confirms, within 5 s, that it is current", async (t) => {
  let now = 0;
  const cache = new CredentialCache({ now: () => now });
  cache.listening();
  const db = counter({ id: "k1" });
  await cache.lookup("api_key", "h1", db.load);
  now = 4999;
  await cache.lookup("api_key", "h1", db.load);
  t.equal(db.loads, 1, "cached within 5 s of the LISTEN");
  now = 5000;
  await cache.lookup("api_key", "h1", db.load);
  await cache.lookup("api_key", "h1", db.load);
  t.equal(db.loads, 3, "unconfirmed for 5 s (a silent connection): every lookup reads the database");
  cache.confirmed(4500);
  await cache.lookup("api_key", "h1", db.load);
  await cache.lookup("api_key", "h1", db.load);
  t.equal(db.loads, 4, "a heartbeat sent at 4.5 s and answered: cached again");
  cache.confirmed(1000);
  now = 9500;
  await cache.lookup("api_key", "h1", db.load);
  t.equal(db.loads, 5, "an older confirmation arriving late does not extend the trust");
});
