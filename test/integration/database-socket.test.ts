// DATABASE_URL may name a Unix socket directory as libpq and pg do (`?host=/run/postgresql`):
// the ORM's pool and the LISTEN connections (plain pg) then both connect through it, not over
// TCP to the URL's host. Skipped where the server has no socket in the usual directory.
import { existsSync } from "node:fs";
import pg from "pg";
import t from "tap";
import { openDatabase } from "../../services/app/database.ts";
import { unixSocketOf } from "../../services/platform/db.ts";
import { createTestDatabase } from "../helpers/harness.ts";

const dir = ["/var/run/postgresql", "/run/postgresql", "/tmp"].find((d) => existsSync(`${d}/.s.PGSQL.5432`));

t.test("a URL's host parameter", async (t) => {
  t.equal(unixSocketOf("postgres://u@localhost:5432/db?host=/run/postgresql"), "/run/postgresql");
  t.equal(unixSocketOf("postgres://u@localhost:5432/db?host=%2Fvar%2Frun%2Fpostgresql"), "/var/run/postgresql", "percent-encoded");
  t.equal(unixSocketOf("postgres://u@db.internal:5432/db"), undefined, "none: TCP to the URL's host");
  t.equal(unixSocketOf("postgres://u@localhost:5432/db?host=db.internal"), undefined, "a host name is not a socket directory");
});

t.test("through the socket", { skip: dir ? false : "no PostgreSQL socket in /var/run/postgresql, /run/postgresql or /tmp" }, async (t) => {
  const url = new URL(await createTestDatabase(t));
  url.hostname = "no-such-host.invalid";
  url.searchParams.set("host", dir as string);
  const db = await openDatabase(url.toString(), 2);
  t.teardown(() => db.close());
  const [orm] = await db.em.fork().execute<{ tcp: string | null }[]>(`select inet_client_addr()::text as tcp`);
  t.equal(orm?.tcp, null, "the ORM's connection is a Unix socket's (no client address), not TCP to the URL's host");
  const client = new pg.Client({ connectionString: url.toString() });
  await client.connect();
  t.teardown(() => client.end());
  const { rows } = await client.query<{ tcp: string | null }>(`select inet_client_addr()::text as tcp`);
  t.equal(rows[0]?.tcp, null, "pg with the same URL (LISTEN, the shared rate limits) goes through it too");
});
