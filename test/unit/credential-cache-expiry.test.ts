// The cache of verified credentials never serves a row past the row's own expiry (an internal
// credential of a watcher beside the rpc role): it reads it again, and never caches an expired one.
import t from "tap";
import { CredentialCache } from "../../services/auth/credential-cache.ts";

function counter(row: { expires_at: number | null }) {
  let loads = 0;
  return { load: async () => (loads++, row), get loads() { return loads; } };
}
const expiry = (row: { expires_at: number | null }) => row.expires_at;

t.test("a cached row is served until its own expiry, then read again", async (t) => {
  let wall = 1_000_000;
  const cache = new CredentialCache({ wallNow: () => wall });
  cache.listening();
  const db = counter({ expires_at: wall + 5000 });
  await cache.lookup("internal", "h1", db.load, expiry);
  await cache.lookup("internal", "h1", db.load, expiry);
  t.equal(db.loads, 1, "cached before its expiry");
  wall += 4999;
  await cache.lookup("internal", "h1", db.load, expiry);
  t.equal(db.loads, 1, "still cached a moment before it");
  wall += 1;
  await cache.lookup("internal", "h1", db.load, expiry);
  t.equal(db.loads, 2, "read again at its expiry");
  await cache.lookup("internal", "h1", db.load, expiry);
  t.equal(db.loads, 3, "an expired row is not cached");
  t.equal(cache.size, 0);
});

t.test("a row without an expiry is cached as before", async (t) => {
  let wall = 0;
  const cache = new CredentialCache({ wallNow: () => wall });
  cache.listening();
  const db = counter({ expires_at: null });
  await cache.lookup("internal", "h1", db.load, expiry);
  wall += 10 * 365 * 86_400_000;
  await cache.lookup("internal", "h1", db.load, expiry);
  t.equal(db.loads, 1);
});

t.test("a renewal (a change to the row, announced) is read: the new expiry counts", async (t) => {
  let wall = 0;
  const cache = new CredentialCache({ wallNow: () => wall });
  cache.listening();
  const row = { expires_at: 1000 as number | null };
  const db = counter(row);
  await cache.lookup("internal", "h1", db.load, expiry);
  row.expires_at = 61_000;
  cache.invalidate("h1");
  wall = 30_000;
  t.same(await cache.lookup("internal", "h1", db.load, expiry), { expires_at: 61_000 });
  await cache.lookup("internal", "h1", db.load, expiry);
  t.equal(db.loads, 2, "the renewed row is cached until its new expiry");
});
