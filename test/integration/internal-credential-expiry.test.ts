// Internal credentials that expire (issue 40, item 3): one past its expiry is refused like a
// revoked one (invalid_api_key), whether or not the rpc role has it cached; an operator's has no
// expiry. The credentials of a watcher beside the rpc role are its process's own: renewed while it
// runs (a failed renewal logged once, never a secret), revoked at its clean stop, and a start
// deletes only long-expired ones, never another running process's.
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport, Http2SessionManager } from "@connectrpc/connect-node";
import { hostname } from "node:os";
import { Writable } from "node:stream";
import pg from "pg";
import { pino } from "pino";
import t from "tap";
import { ErrorDetailSchema } from "../../gen/payments/v1/options_pb.ts";
import { ObservationService } from "../../gen/payments/v1/observations_pb.ts";
import { startDevChain } from "../../scripts/devchain/chain.ts";
import { createInternalCredential, inProcessWatcherName, listInternalCredentials } from "../../services/auth/admin.ts";
import { InProcessWatcherCredentials } from "../../services/auth/watcher-credentials.ts";
import { startTestApp, until } from "../helpers/harness.ts";
import { runCli } from "../helpers/processes.ts";

const s = await startTestApp(t, {}, ["rpc"]);
const em = () => s.app.db.em.fork();
const sessions = new Http2SessionManager(s.rpcUrl);
t.teardown(() => sessions.abort());
const observations = createClient(ObservationService, createGrpcTransport({ baseUrl: s.rpcUrl, sessionManager: sessions }));

/** What an internal RPC answers to `credential`: "ok", or the refusal's code and detail. */
async function answer(credential: string): Promise<"ok" | { code: Code; detail: string | undefined }> {
  try {
    await observations.listUnmatchedObservations({}, { headers: { authorization: `Bearer ${credential}` } });
    return "ok";
  } catch (e) {
    const err = ConnectError.from(e);
    return { code: err.code, detail: err.findDetails(ErrorDetailSchema)[0]?.code };
  }
}
const refused = { code: Code.Unauthenticated, detail: "invalid_api_key" };

/** What `credential` is answered once refused: a revocation reaches the rpc role's credential cache
 * by NOTIFY, a moment after its commit. */
async function onceRefused(credential: string, what: string) {
  return until(what, async () => {
    const a = await answer(credential);
    return a === "ok" ? undefined : a;
  }, 10_000);
}

/** A logger whose lines are kept. */
function capturingLogger() {
  const lines: string[] = [];
  const stream = new Writable({
    write(chunk, _encoding, done) {
      lines.push(...chunk.toString().split("\n").filter(Boolean));
      done();
    },
  });
  return { logger: pino({ level: "info", base: undefined }, stream), lines };
}

t.test("an internal credential is refused from its expiry on, cached or not; an operator's never expires", async (t) => {
  const lapsed = await createInternalCredential(em(), "lapsed", ["observe"], "test", { expiresAt: new Date(Date.now() - 1000) });
  t.same(await answer(lapsed.credential), refused, "already expired: invalid_api_key, as revoked");

  const expiresAt = new Date(Date.now() + 2000);
  const expiring = await createInternalCredential(em(), "expiring", ["observe"], "test", { expiresAt });
  t.equal(expiring.expires_at, expiresAt.toISOString(), "issued with its expiry");
  const operator = await createInternalCredential(em(), "operator's", ["observe"], "test");
  t.notOk("expires_at" in operator, "an operator's credential has none");
  // Accepted (and so cached, nothing about the row changing) until its expiry; refused from then on.
  const accepted = await answer(expiring.credential);
  t.equal(accepted, "ok", "accepted before its expiry");
  const refusedAt = await until(
    "the expiring credential refused",
    async () => {
      const before = Date.now();
      const a = await answer(expiring.credential);
      if (a === "ok") {
        if (before >= expiresAt.getTime()) throw new Error("accepted after its expiry");
        return undefined;
      }
      t.same(a, refused, "refused as revoked credentials are");
      return Date.now();
    },
    20_000,
  );
  t.ok(refusedAt >= expiresAt.getTime(), "not refused before its expiry");
  t.equal(await answer(operator.credential), "ok", "the operator's credential still works");

  const listed = await listInternalCredentials(em());
  t.equal(listed.find((c) => c.id === expiring.id)?.expires_at, expiresAt.toISOString(), "list shows the expiry");
  t.equal(listed.find((c) => c.id === operator.id)?.expires_at, null, "and null for none");
  const cli = await runCli("services/app/admin.ts", { DATABASE_URL: s.databaseUrl }, "internal-credential", "list");
  t.equal(cli.code, 0, "admin internal-credential list");
  t.match(JSON.parse(cli.stdout).find((c: { id: string }) => c.id === expiring.id), { id: expiring.id, expires_at: expiresAt.toISOString(), revoked_at: null });
  t.notOk([expiring, operator].some((c) => cli.stdout.includes(c.credential)), "no secret in the list");
});

t.test("an in-process watcher's credential: its process's own, renewed while it runs, revoked at stop", async (t) => {
  const { logger, lines } = capturingLogger();
  // Another process's expired credentials (one long ago, one just now) and a running one's.
  const stale = await createInternalCredential(em(), inProcessWatcherName("test", "gone-1"), ["observe"], "test", { expiresAt: new Date(Date.now() - 2 * 86_400_000) });
  const recent = await createInternalCredential(em(), inProcessWatcherName("test", "gone-2"), ["observe"], "test", { expiresAt: new Date(Date.now() - 60_000) });
  const other = new InProcessWatcherCredentials(em, createLogger(), { processName: "other-host-7" });
  const otherSecret = await other.issue("test", ["ethereum"]);

  const mine = new InProcessWatcherCredentials(em, logger, { lifetimeMs: 1500, renewEveryMs: 200, processName: "this-host-42" });
  const secret = await mine.issue("test", ["ethereum"]);
  const rows = async () => (await listInternalCredentials(em())).filter((c) => c.name.startsWith("in-process chain watcher"));
  const now = await rows();
  t.notOk(now.some((c) => c.id === stale.id), "a start deletes a credential that expired over a day ago");
  t.ok(now.some((c) => c.id === recent.id), "and keeps one that expired lately");
  const row = now.find((c) => c.name === "in-process chain watcher (test) this-host-42");
  t.ok(row, "named after its process");
  t.equal(now.find((c) => c.name === "in-process chain watcher (test) other-host-7")?.revoked_at, null, "another process's credential is not revoked by this start");
  t.equal(await answer(otherSecret), "ok", "and is still accepted");

  // Renewed: accepted well past its first expiry.
  const firstExpiry = Date.parse(row?.expires_at as string);
  await until("accepted past its first expiry", async () => Date.now() > firstExpiry + 1000 && (await answer(secret)) === "ok", 20_000);
  t.ok(Date.parse((await rows()).find((c) => c.id === row?.id)?.expires_at as string) > firstExpiry, "its expiry moved on");

  await mine.revoke();
  t.same(await onceRefused(secret, "refused once revoked"), refused, "a clean stop revokes it");
  t.ok((await rows()).find((c) => c.id === row?.id)?.revoked_at, "recorded revoked");
  t.equal(await answer(otherSecret), "ok", "the other process's credential is untouched");
  await other.revoke();
  t.same(await onceRefused(otherSecret, "the other refused once revoked"), refused, "and its own stop revokes the other's");
  t.notOk(lines.some((l) => l.includes(secret) || l.includes("int_")), "no secret in a log line");
});

t.test("a renewal that fails (the database away) is logged once and retried; the process goes on", async (t) => {
  const { logger, lines } = capturingLogger();
  let down = false;
  let attempts = 0;
  const flaky = () => {
    if (down) {
      attempts++;
      throw new Error("connect ECONNREFUSED 127.0.0.1:5432");
    }
    return em();
  };
  const creds = new InProcessWatcherCredentials(flaky, logger, { lifetimeMs: 60_000, renewEveryMs: 100, processName: "flaky-host-9" });
  const secret = await creds.issue("test", ["ethereum"]);
  down = true;
  await until("three renewals failed", async () => attempts >= 3, 10_000);
  t.equal(lines.filter((l) => l.includes("could not renew")).length, 1, "logged once for the outage");
  down = false;
  await until("renewed again", async () => lines.some((l) => l.includes("renewed the in-process watcher's credential again")), 10_000);
  t.equal(await answer(secret), "ok", "still accepted");
  await creds.revoke();
  t.same(await onceRefused(secret, "refused once revoked"), refused, "revoked at its stop");
  t.notOk(lines.some((l) => l.includes(secret) || l.includes("int_")), "no secret in a log line");
});

t.test("the all-in-one app's clean stop revokes its watcher's credential after the watcher stopped, before the pool closes", async (t) => {
  const dev = await startDevChain();
  t.teardown(() => dev.stop());
  const app = await startTestApp(t, { DATABASE_URL: s.databaseUrl, ETHEREUM_TEST_RPC_URL: dev.url, WATCHER_POLL_MS: "100" }, undefined, s.masterKey);
  const name = inProcessWatcherName("test", `${hostname().slice(0, 150)}-${process.pid}`);
  const db = new pg.Client({ connectionString: s.databaseUrl });
  await db.connect();
  t.teardown(() => db.end());
  const running = (await db.query<{ id: string; expires_at: Date | null }>(`select id, expires_at from internal_credentials where name = $1 and revoked_at is null`, [name])).rows;
  t.equal(running.length, 1, `the running app holds "${name}"`);
  t.ok(running[0]?.expires_at, "with an expiry");
  const steps: string[] = [];
  await app.app.stop((step) => steps.push(step));
  t.ok(steps.indexOf("chain watcher") < steps.indexOf("watcher credentials") && steps.indexOf("watcher credentials") < steps.indexOf("database pool"), `stopped in order: ${steps.join(", ")}`);
  const after = (await db.query<{ revoked_at: Date | null }>(`select revoked_at from internal_credentials where id = $1`, [running[0]?.id])).rows[0];
  t.ok(after?.revoked_at, "revoked at the clean stop");
});

function createLogger() {
  return pino({ level: "silent" });
}
