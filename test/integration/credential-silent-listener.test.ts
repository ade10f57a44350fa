// A process whose LISTEN connection goes silent (a network that drops everything, so it is never
// told the connection is gone) hears no revocation. settleCredentialChanges() cannot reach it and
// cuts it after 5 s; by then that process has stopped using its cache, because its connection has
// not confirmed for 5 s that it is current. Later the silent connection is given up and replaced.
import pg from "pg";
import t from "tap";
import { CredentialCache, settleCredentialChanges } from "../../services/auth/credential-cache.ts";
import { createLogger } from "../../services/platform/logger.ts";
import { createTestDatabase, until } from "../helpers/harness.ts";
import { startTcpProxy } from "../helpers/tcp-proxy.ts";

const databaseUrl = await createTestDatabase(t);
const direct = new URL(databaseUrl);
const proxy = await startTcpProxy(t, Number(direct.port || 5432));
const throughProxy = new URL(databaseUrl);
throughProxy.hostname = "127.0.0.1";
throughProxy.port = String(proxy.port);

t.test("a silent LISTEN connection: the cache stops being used before settle() returns", async (t) => {
  const cache = new CredentialCache();
  const listener = cache.listen(throughProxy.toString(), createLogger("silent", 2));
  t.teardown(() => listener.stop());
  let loads = 0;
  const load = async () => (loads++, { id: "k1", revoked_at: null });
  await until("the cache to be in use", async () => {
    const before = loads;
    await cache.lookup("api_key", "h1", load);
    return loads === before ? true : undefined;
  }, 10_000);

  proxy.freeze();
  const notifier = new pg.Client({ connectionString: databaseUrl });
  await notifier.connect();
  t.teardown(() => notifier.end());
  // The revocation's announcement, which the silent listener never hears.
  await notifier.query("select pg_notify('credential_changed', 'h1')");
  const cut = await settleCredentialChanges(databaseUrl);
  t.equal(cut.length, 1, "settle() gets no answer from the silent listener and cuts its backend");

  const before = loads;
  await cache.lookup("api_key", "h1", load);
  t.equal(loads, before + 1, "the next lookup reads the database (the revocation is seen)");

  const connections = proxy.connections;
  await until("the silent connection to be given up and a new one to be made", async () => (proxy.connections > connections ? true : undefined), 20_000);
  await until("the cache to be in use again", async () => {
    const n = loads;
    await cache.lookup("api_key", "h1", load);
    return loads === n ? true : undefined;
  }, 10_000);
  t.pass("the listener connects again by itself, and the cache is used again");
});
