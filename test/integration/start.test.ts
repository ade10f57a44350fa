// The service as a new user runs it: `npm start` with no DATABASE_URL (embedded PostgreSQL),
// the admin CLI against the same data directory, a first request, and a clean SIGTERM.
import { spawnSync } from "node:child_process";
import { chmodSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { jetstreamManager } from "@nats-io/jetstream";
import { connect } from "@nats-io/transport-node";
import t from "tap";
import { call, createTestDatabase, deleteStream, idemKey, natsUrl, sampleIntent, until } from "../helpers/harness.ts";
import { spawnService } from "../helpers/processes.ts";

// Six whole services started one after another (npm, embedded PostgreSQL, NATS): more than
// tap's 180 s default under CI's two jobs at a time.
t.setTimeout(420_000);

const root = path.resolve(import.meta.dirname, "../..");
const dataDir = mkdtempSync(path.join(tmpdir(), "payments-start-"));
// The embedded PostgreSQL runs as the "postgres" user, which must be able to enter the directory.
chmodSync(dataDir, 0o755);
t.teardown(() => rmSync(dataDir, { recursive: true, force: true }));
const env: Record<string, string | undefined> = {
  ...process.env,
  DATA_DIR: dataDir,
  PORT: "0",
  RPC_PORT: "0",
  OPS_PORT: "0",
  NATS_URL: natsUrl,
  LOG_LEVEL: "warn",
  DATABASE_URL: undefined,
};

function admin(...args: string[]) {
  return adminIn(root, env, ...args);
}

function adminIn(dir: string, e: Record<string, string | undefined>, ...args: string[]) {
  const r = spawnSync(process.execPath, [path.join(dir, "services/app/admin.ts"), ...args], { cwd: dir, env: e, encoding: "utf8" });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** Runs main.ts from `dir` as `npm start` does (or `npm start` itself); resolves once it announces the REST API or exits. */
async function startService(t: { teardown(fn: () => unknown): void }, dir: string, e: Record<string, string | undefined>, o: { npm?: boolean } = {}) {
  const began = Date.now();
  const service = spawnService(t, [], e, { dir, npm: o.npm });
  await service.started.catch(() => undefined);
  const base = /REST API\s+(http:\/\/\S+?)\/api\/v1/.exec(service.stdout())?.[1] ?? "";
  // The installation's own JetStream prefix: its streams go with the test.
  const prefix = /JetStream prefix (\S+)/.exec(service.stdout())?.[1];
  if (prefix) t.teardown(() => deleteStream(prefix));
  const output = { get out() { return service.stdout(); }, get err() { return service.stderr(); } };
  return { child: service.child, output, exited: service.exited, base, elapsed: Date.now() - began };
}

t.test("admin CLI refuses bad input with one line and a non-zero exit", async (t) => {
  const cases = [
    ["merchant", "create"],
    ["api-key", "create", "--merchant", "mer_x", "--environment", "prod", "--scopes", "webhooks:read"],
    ["api-key", "create", "--merchant", "mer_x", "--environment", "test", "--scopes", "everything"],
    ["api-key", "revoke"],
    ["nonsense"],
  ];
  for (const args of cases) {
    const r = admin(...args);
    t.not(r.status, 0, args.join(" "));
    t.equal(r.stdout, "", "nothing on stdout");
    t.match(r.stderr, /^admin: /, "a message on stderr");
  }
});

t.test("admin --help prints the usage on stdout and exits 0", async (t) => {
  for (const flag of ["--help", "-h"]) {
    const r = admin(flag);
    t.equal(r.status, 0, flag);
    t.match(r.stdout, /^usage:\n  admin merchant create --name NAME/, `${flag}: the usage`);
    t.equal(r.stderr, "", `${flag}: no complaint about an unknown option`);
    t.match(r.stdout, /[^\n]\n$/, `${flag}: ends with one newline, so what the terminal prints next starts on a line of its own`);
  }
  t.match(admin("api-key", "create", "--help").stdout, /^usage:/, "after a command too");
});

t.test("npm start answers within 30 s without DATABASE_URL, and stops cleanly on SIGTERM", async (t) => {
  const { child, output, exited, base, elapsed } = await startService(t, root, env);
  const out = output.out + output.err;
  t.ok(base, `the REST API is announced (output: ${out.slice(-500)})`);
  t.match(output.out, /npm run -s admin -- merchant create/, "it prints how to get a key");
  t.match(output.out, /webhooks +JetStream prefix payments-[A-Za-z0-9]{10} on nats:/, "and the installation's own JetStream prefix");
  const ready = await call(base, "GET", "/api/v1/merchants/mer_x/payment-intents");
  t.equal(ready.status, 401, "the gateway answers");
  t.comment(`answered ${elapsed} ms after npm start`);

  const merchant = admin("merchant", "create", "--name", "Start Test Shop");
  t.equal(merchant.status, 0, merchant.stderr);
  const merchantId = JSON.parse(merchant.stdout).id;
  const key = admin("api-key", "create", "--merchant", merchantId, "--environment", "test", "--scopes", "payment_intents:read,payment_intents:write");
  t.equal(key.status, 0, key.stderr);
  const apiKey = JSON.parse(key.stdout).api_key;
  t.match(apiKey, /^sk_test_/);
  const created = await call(base, "POST", `/api/v1/merchants/${merchantId}/payment-intents`, { key: apiKey, idempotencyKey: idemKey(), body: sampleIntent });
  t.equal(created.status, 200, JSON.stringify(created.body));
  t.notMatch(output.out + output.err, apiKey, "the API key is never logged");

  child.kill("SIGTERM");
  t.equal(await exited, 0, "exits 0 on SIGTERM");

  const revoke = admin("api-key", "revoke", "--id", JSON.parse(key.stdout).id);
  t.equal(revoke.status, 0, "the admin CLI starts the embedded database itself when the server is down");
  t.match(JSON.parse(revoke.stdout), { revoked_at: String });
});

/** The process and every process under it (Linux /proc). */
function processTree(pid: number): number[] {
  let tasks: string[];
  try {
    tasks = readdirSync(`/proc/${pid}/task`);
  } catch {
    return [];
  }
  const children = tasks.flatMap((tid) => {
    try {
      return readFileSync(`/proc/${pid}/task/${tid}/children`, "utf8").split(" ").filter(Boolean).map(Number);
    } catch {
      return [];
    }
  });
  return [pid, ...children.flatMap(processTree)];
}

/** Still running: present and not a zombie waiting to be reaped. */
function running(pid: number): boolean {
  if (!existsSync(`/proc/${pid}/stat`)) return false;
  try {
    return !/^\d+ \(.*\) Z /.test(readFileSync(`/proc/${pid}/stat`, "utf8"));
  } catch {
    return false;
  }
}

/** Whether this process can listen on the port: nothing holds it any more. */
function free(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const probe = createServer();
    probe.once("error", () => resolve(false));
    probe.listen(port, host, () => probe.close(() => resolve(true)));
  });
}

// A supervisor, a container runtime or `kill $!` signals only the PID it started: npm's. Under
// `sh -c` the shell died of it and left the server running, ports held, with PPID 1.
t.test("SIGTERM to exactly the PID of npm start stops the server and its embedded database, and frees every port", async (t) => {
  const dir = mkdtempSync(path.join(tmpdir(), "payments-npm-start-"));
  chmodSync(dir, 0o755);
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const { child, output, exited, base } = await startService(t, root, { ...env, DATA_DIR: dir, LOG_LEVEL: "info" }, { npm: true });
  t.ok(base, `npm start announces the REST API (output: ${(output.out + output.err).slice(-800)})`);
  const banner = (label: string) => new URL(new RegExp(`${label}\\s+(http://\\S+)`).exec(output.out)?.[1] ?? "http://invalid:1");
  const listening = [banner("REST API"), banner("gRPC/Connect"), banner("health")].map((u) => ({ host: u.hostname, port: Number(u.port) }));
  const { pgPort } = JSON.parse(readFileSync(path.join(dir, "embedded.json"), "utf8")) as { pgPort: number };
  listening.push({ host: "127.0.0.1", port: pgPort });
  for (const { host, port } of listening) t.notOk(await free(host, port), `${host}:${port} is held while it runs`);
  const tree = processTree(child.pid!);
  t.ok(tree.length >= 3, `npm, the server and PostgreSQL run under npm's PID (${tree.length} processes)`);
  // Should any outlive npm, they must not outlive the test.
  t.teardown(() => tree.filter(running).forEach((pid) => process.kill(pid, "SIGKILL")));
  const dashboard = await fetch(banner("dashboard"));
  t.equal(dashboard.status, 200, "the banner's dashboard address answers");
  t.match(await dashboard.text(), /API key/, "with its sign-in page");

  child.kill("SIGTERM");
  t.equal(await exited, 0, "npm exits 0");
  await until("every process that ran under npm has exited", async () => tree.every((pid) => !running(pid)), 30_000, () => `still running: ${tree.filter(running).join(", ")}`);
  t.pass("every process that ran under npm has exited");
  for (const { host, port } of listening) t.ok(await free(host, port), `${host}:${port} is free`);
  t.match(output.out + output.err, /"signal":"SIGTERM"[^\n]*"msg":"stopped"/, "the server logged its clean stop");
});

t.test("a failure to start the embedded database is one line on stderr and exit 1", async (t) => {
  // A port PostgreSQL cannot bind: held by this test.
  const holder = createServer();
  await new Promise<void>((resolve) => holder.listen(0, "127.0.0.1", resolve));
  t.teardown(() => holder.close());
  const port = (holder.address() as { port: number }).port;
  const dir = mkdtempSync(path.join(tmpdir(), "payments-fail-"));
  chmodSync(dir, 0o755);
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  writeFileSync(path.join(dir, "embedded.json"), JSON.stringify({ pgPort: port, pgUser: "payments", pgPassword: "pw-not-shown-anywhere", natsPort: 1 }));

  const { exited, output } = await startService(t, root, { ...env, DATA_DIR: dir });
  t.equal(await exited, 1, "exit code 1");
  const lines = output.err.trimEnd().split("\n");
  t.equal(lines.length, 1, `one line on stderr: ${output.err}`);
  t.match(lines[0], /^payments: could not start: embedded PostgreSQL did not start: .*could not create any TCP\/IP sockets.*; set DATABASE_URL/, "says what failed and what to do");
  t.notMatch(output.out + output.err, /\n\s+at /, "no stack trace");
  t.notMatch(output.out + output.err, /pw-not-shown-anywhere/, "the password is not shown");

  const r = adminIn(root, { ...env, DATA_DIR: dir }, "merchant", "create", "--name", "X");
  t.equal(r.status, 1, "the admin CLI fails too");
  t.match(r.stderr, /^admin: failed: embedded PostgreSQL did not start: .*set DATABASE_URL[^\n]*\n$/, "in one line");
});

// As root, the embedded PostgreSQL runs as the "postgres" user, which cannot enter a private
// (0700) directory: the binaries and the cluster must live where it can, and still just work.
t.test("as root, npm start works from a private (0700) checkout", { skip: process.getuid?.() !== 0 && "not root" }, async (t) => {
  const base = statSync(tmpdir()).dev === statSync(root).dev ? tmpdir() : root;
  const priv = mkdtempSync(path.join(base, "payments-private-"));
  chmodSync(priv, 0o700);
  const copy = path.join(priv, "main");
  let clusterDir = "";
  t.teardown(() => {
    rmSync(priv, { recursive: true, force: true });
    if (clusterDir) rmSync(clusterDir, { recursive: true, force: true });
  });
  // A hard-linked copy of what runs: the same files, under a private parent.
  const parts = ["package.json", "services", "gateway", "gen", "proto", "node_modules"];
  spawnSync("mkdir", [copy]);
  const linked = spawnSync("cp", ["-al", ...parts.map((p) => path.join(root, p)), copy]);
  if (linked.status !== 0) spawnSync("cp", ["-a", ...parts.map((p) => path.join(root, p)), copy]);
  const e = { ...env };
  delete e.DATA_DIR;

  const { child, output, exited, base: url } = await startService(t, copy, e);
  t.ok(url, `the REST API is announced (output: ${(output.out + output.err).slice(-800)})`);
  const settings = JSON.parse(readFileSync(path.join(copy, ".data", "embedded.json"), "utf8")) as { pgDataDir?: string };
  clusterDir = settings.pgDataDir ?? "";
  t.ok(clusterDir && !clusterDir.startsWith(priv), `the cluster lives outside the private directory (${clusterDir})`);
  t.match(output.out, `database     embedded PostgreSQL under ${clusterDir}`, "and the banner says where");
  t.equal((statSync(priv).mode & 0o777).toString(8), "700", "the private directory keeps its mode");
  const merchant = adminIn(copy, e, "merchant", "create", "--name", "Private Shop");
  t.equal(merchant.status, 0, merchant.stderr);
  const merchantId = JSON.parse(merchant.stdout).id;
  const key = adminIn(copy, e, "api-key", "create", "--merchant", merchantId, "--environment", "test", "--scopes", "payment_intents:write");
  t.equal(key.status, 0, key.stderr);
  const created = await call(url, "POST", `/api/v1/merchants/${merchantId}/payment-intents`, { key: JSON.parse(key.stdout).api_key, idempotencyKey: idemKey(), body: sampleIntent });
  t.equal(created.status, 200, JSON.stringify(created.body));
  child.kill("SIGTERM");
  t.equal(await exited, 0, "exits 0 on SIGTERM");
});

t.test("the admin CLI beside a server started with DATABASE_URL uses that database, and says so", async (t) => {
  const own = mkdtempSync(path.join(tmpdir(), "payments-dburl-"));
  t.teardown(() => rmSync(own, { recursive: true, force: true }));
  const databaseUrl = await createTestDatabase(t);
  const serverEnv = { ...env, DATA_DIR: own, DATABASE_URL: databaseUrl };
  const { child, exited, base } = await startService(t, root, serverEnv);
  t.match(base, /^http:/, "the server started");
  // As the banner shows the commands: in another terminal, without DATABASE_URL.
  const cliEnv = { ...env, DATA_DIR: own, DATABASE_URL: undefined };
  const merchant = adminIn(root, cliEnv, "merchant", "create", "--name", "Beside");
  t.equal(merchant.status, 0, merchant.stderr);
  t.match(merchant.stderr, /^admin: database postgres:\/\/[^\n]* \(the server's, recorded in [^\n]*server-database\.json; set DATABASE_URL to use another\)\n$/, "it names the database it used");
  const id = JSON.parse(merchant.stdout).id as string;
  const key = JSON.parse(adminIn(root, cliEnv, "api-key", "create", "--merchant", id, "--environment", "test", "--scopes", "payment_intents:read").stdout).api_key as string;
  const list = await call(base, "GET", `/api/v1/merchants/${id}/payment-intents`, { key });
  t.equal(list.status, 200, "the key it printed works on the server (it was 401 invalid_api_key)");
  child.kill("SIGTERM");
  await exited;
});

/** The names of the streams on the test NATS that start with `prefix`. */
async function streamsOf(prefix: string): Promise<string[]> {
  const nc = await connect({ servers: natsUrl, reconnect: false });
  try {
    const names: string[] = [];
    for await (const name of (await jetstreamManager(nc)).streams.names()) if (name.startsWith(`${prefix}-`)) names.push(name);
    return names.sort();
  } finally {
    await nc.close();
  }
}

function ops(e: Record<string, string | undefined>, ...args: string[]) {
  const r = spawnSync(process.execPath, [path.join(root, "services/app/ops-cli.ts"), ...args], { cwd: root, env: e, encoding: "utf8" });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

t.test("ops reset: lists this checkout's embedded data and streams, removes them only with --yes, never under a running server", async (t) => {
  const dir = mkdtempSync(path.join(tmpdir(), "payments-reset-"));
  chmodSync(dir, 0o755);
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const e = { ...env, DATA_DIR: dir };
  const { child, output, exited, base } = await startService(t, root, e);
  t.ok(base, `the server started (${(output.out + output.err).slice(-500)})`);
  const prefix = /JetStream prefix (\S+)/.exec(output.out)?.[1] ?? "none";
  await until("the installation's streams", async () => (await streamsOf(prefix)).length === 2, 20_000);

  const running = ops(e, "reset", "--yes");
  t.equal(running.status, 1, "refused while the server runs");
  t.match(running.stderr, /^ops: the embedded PostgreSQL of .* is running \(port \d+\): stop the server/);
  t.ok(existsSync(path.join(dir, "embedded.json")), "and nothing removed");

  child.kill("SIGTERM");
  t.equal(await exited, 0);
  const listed = ops(e, "reset");
  t.equal(listed.status, 0, listed.stderr);
  t.match(listed.stdout, `would remove:\n  ${dir}\n`, "DATA_DIR");
  t.match(listed.stdout, `stream ${prefix}-webhook-deliveries on nats://`, "the delivery stream");
  t.match(listed.stdout, `stream ${prefix}-installation on nats://`, "the claim stream");
  t.match(listed.stdout, /nothing was removed: run npm run -s ops -- reset --yes/, "says how to confirm");
  t.ok(existsSync(path.join(dir, "embedded.json")), "without --yes nothing is removed");
  t.equal((await streamsOf(prefix)).length, 2, "the streams are still there");
  // Had it used the embedded nats-server (stopped with it), the streams would be in DATA_DIR/nats.
  const { natsPort } = JSON.parse(readFileSync(path.join(dir, "embedded.json"), "utf8")) as { natsPort: number };
  const embedded = ops({ ...e, NATS_URL: `nats://127.0.0.1:${natsPort}` }, "reset");
  t.equal(embedded.status, 0, embedded.stderr);
  t.notMatch(embedded.stdout, /stream /, "with the embedded NATS stopped, no stream to remove apart from DATA_DIR");

  const removed = ops(e, "reset", "--yes");
  t.equal(removed.status, 0, removed.stderr);
  t.match(removed.stdout, /^removed:\n/);
  t.notOk(existsSync(dir), "DATA_DIR is gone");
  t.same(await streamsOf(prefix), [], "and so are its streams");
  const again = ops(e, "reset", "--yes");
  t.equal(again.status, 0);
  t.match(again.stdout, /^nothing to reset: no embedded data under /, "a second reset finds nothing");

  const own = ops({ ...e, DATABASE_URL: "postgres://someone@127.0.0.1:5432/theirs" }, "reset", "--yes");
  t.equal(own.status, 2, "a database of one's own is not the checkout's to drop");
  t.match(own.stderr, /^ops: this checkout's server uses the database at postgres:\/\/\*\*\*@127\.0\.0\.1:5432\/theirs: reset removes only/);
});
