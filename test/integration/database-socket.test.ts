// DATABASE_URL may name a Unix socket directory as libpq and pg do (`?host=/run/postgresql`):
// the ORM's pool and the LISTEN connections (plain pg) then both connect through it, not over
// TCP to the URL's host. Skipped where the server has no socket in the usual directory.
import { existsSync } from "node:fs";
import pg from "pg";
import t from "tap";
import { openDatabase } from "../../services/app/database.ts";
import { unixSocketOf } from "../../services/platform/db.ts";
import { createTestDatabase, serverUrl } from "../helpers/harness.ts";

// The test server's own socket: its port names the file; a server that does not take the test's
// user through it (another server on that port, peer authentication) is skipped, not failed.
const server = new URL(serverUrl);
const port = server.port || "5432";
const found = ["/var/run/postgresql", "/run/postgresql", "/tmp"].find((d) => existsSync(`${d}/.s.PGSQL.${port}`));
const viaSocket = (u: URL, dir: string) => {
  const v = new URL(u);
  v.hostname = "no-such-host.invalid";
  v.searchParams.set("host", dir);
  return v.toString();
};
const dir = found && (await probe(viaSocket(server, found))) ? found : undefined;

async function probe(url: string): Promise<boolean> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 2000 });
  try {
    await client.connect();
    await client.end();
    return true;
  } catch {
    return false;
  }
}

t.test("a URL's host parameter", async (t) => {
  t.equal(unixSocketOf("postgres://u@localhost:5432/db?host=/run/postgresql"), "/run/postgresql");
  t.equal(unixSocketOf("postgres://u@localhost:5432/db?host=%2Fvar%2Frun%2Fpostgresql"), "/var/run/postgresql", "percent-encoded");
  t.equal(unixSocketOf("postgres://u@db.internal:5432/db"), undefined, "none: TCP to the URL's host");
  t.equal(unixSocketOf("postgres://u@localhost:5432/db?host=db.internal"), undefined, "a host name is not a socket directory");
});

t.test("through the socket", { skip: dir ? false : `the test server takes no connection through a socket in /var/run/postgresql, /run/postgresql or /tmp (port ${port})` }, async (t) => {
  const url = viaSocket(new URL(await createTestDatabase(t)), dir as string);
  const db = await openDatabase(url, 2);
  t.teardown(() => db.close());
  const [orm] = await db.em.fork().execute<{ tcp: string | null }[]>(`select inet_client_addr()::text as tcp`);
  t.equal(orm?.tcp, null, "the ORM's connection is a Unix socket's (no client address), not TCP to the URL's host");
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  t.teardown(() => client.end());
  const { rows } = await client.query<{ tcp: string | null }>(`select inet_client_addr()::text as tcp`);
  t.equal(rows[0]?.tcp, null, "pg with the same URL (LISTEN, the shared rate limits) goes through it too");
});
