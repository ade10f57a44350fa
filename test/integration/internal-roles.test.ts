// Internal credentials carry roles and an environment, checked per RPC from its proto option:
// a chain watcher's credential (observe) cannot rotate a merchant's signing secret and so
// forge webhooks; an operator's (admin) cannot record chain facts; a Test watcher's outputs
// never touch a Live intent, even at the same address; an admin credential acts in its own
// environment only.
import { Code, createClient } from "@connectrpc/connect";
import { createGrpcTransport, Http2SessionManager } from "@connectrpc/connect-node";
import t from "tap";
import { AdminService } from "../../gen/payments/v1/admin_pb.ts";
import { ObservationService } from "../../gen/payments/v1/observations_pb.ts";
import { createInternalCredential } from "../../services/auth/admin.ts";
import { call, idemKey, merchantWithKey, sampleIntent } from "../helpers/harness.ts";
import { hash, refusal } from "../helpers/lifecycle.ts";
import { runCli } from "../helpers/processes.ts";
import { webhookSetup } from "../helpers/webhooks.ts";

const s = await webhookSetup(t, { roles: ["rpc", "gateway"] });
const em = () => s.app.db.em.fork();
const sessions = new Http2SessionManager(s.rpcUrl);
t.teardown(() => sessions.abort());
const transport = createGrpcTransport({ baseUrl: s.rpcUrl, sessionManager: sessions });
const admin = createClient(AdminService, transport);
const observations = createClient(ObservationService, transport);
const bearer = (credential: string) => ({ headers: { authorization: `Bearer ${credential}` } });

const live = await merchantWithKey(s.app, "live");
const liveEndpoint = await s.createEndpoint("/hooks/live", live);
const testEndpoint = await s.createEndpoint("/hooks/test");
const secretOf = async (id: string) => (await em().execute<{ c: Buffer }[]>(`select secret_ciphertext as c from webhook_endpoints where id = ?`, [id]))[0]?.c.toString("hex");

t.test("a watcher's credential (observe) cannot rotate a signing secret; an operator's (admin) cannot record chain facts", async (t) => {
  const watcher = await createInternalCredential(em(), "watcher", ["observe"], "live", { networks: ["ethereum"] });
  const operator = await createInternalCredential(em(), "operator", ["admin"], "live");
  const before = await secretOf(liveEndpoint.id);
  t.same(await refusal(admin.rotateSigningSecret({ endpointId: liveEndpoint.id }, bearer(watcher.credential))), { code: Code.PermissionDenied, detail: "insufficient_scope" }, "observe cannot rotate");
  t.same(await refusal(admin.recoverFailedDeliveries({ endpointId: liveEndpoint.id, since: { seconds: 0n } }, bearer(watcher.credential))), { code: Code.PermissionDenied, detail: "insufficient_scope" }, "observe cannot recover");
  t.equal(await secretOf(liveEndpoint.id), before, "the secret is unchanged");
  const report = { network: "ethereum", asset: "USDC", toAddress: "0x000000000000000000000000000000000000dEaD", txHash: hash(), outputIndex: 0, amount: "1", confirmations: 0 };
  t.same(await refusal(observations.recordObservation(report, bearer(operator.credential))), { code: Code.PermissionDenied, detail: "insufficient_scope" }, "admin cannot record");
  t.same(await refusal(observations.listUnmatchedObservations({}, bearer(operator.credential))), { code: Code.PermissionDenied, detail: "insufficient_scope" }, "admin cannot list unmatched outputs");

  const rotated = await admin.rotateSigningSecret({ endpointId: liveEndpoint.id, overlapSeconds: 0 }, bearer(operator.credential));
  t.match(rotated.signingSecret, /^whsec_/, "admin rotates");
  t.ok((await observations.recordObservation({ ...report, txHash: hash() }, bearer(watcher.credential))).data, "observe records");
});

t.test("a Test watcher's output to a Live intent's address is not that intent's: nothing counted", async (t) => {
  const res = await call(s.base, "POST", `/api/v1/merchants/${live.merchant}/payment-intents`, { key: live.key, idempotencyKey: idemKey(), body: { ...sampleIntent, requested_amount: "5" } });
  t.equal(res.status, 200);
  const address = res.body.data.deposit_address as string;
  const testWatcher = await createInternalCredential(em(), "test watcher", ["observe"], "test", { networks: ["ethereum"] });
  const liveWatcher = await createInternalCredential(em(), "live watcher", ["observe"], "live", { networks: ["ethereum"] });
  const output = { network: "ethereum", asset: "USDC", toAddress: address, txHash: hash(), outputIndex: 0, amount: "5", confirmations: 12, blockHeight: 100n, blockHash: hash() };

  const fromTest = await observations.recordObservation(output, bearer(testWatcher.credential));
  t.equal(fromTest.data?.paymentIntentId, undefined, "recorded as unmatched on the Test chain");
  t.equal(fromTest.paymentIntentStatus, undefined);
  const intent = await call(s.base, "GET", `/api/v1/merchants/${live.merchant}/payment-intents/${res.body.data.public_id}`, { key: live.key });
  t.equal(intent.body.data.status, "pending", "the Live intent is untouched");
  t.equal(intent.body.data.amount_received, null);

  const unmatchedLive = await observations.listUnmatchedObservations({}, bearer(liveWatcher.credential));
  t.notOk(unmatchedLive.data.some((o) => o.txHash === output.txHash), "the Test chain's unmatched output is not listed for Live");
  const unmatchedTest = await observations.listUnmatchedObservations({}, bearer(testWatcher.credential));
  t.ok(unmatchedTest.data.some((o) => o.txHash === output.txHash), "it is listed for Test");

  // The same transaction id on the Live chain is another output: it pays the Live intent.
  const fromLive = await observations.recordObservation(output, bearer(liveWatcher.credential));
  t.equal(fromLive.data?.paymentIntentId, res.body.data.public_id, "the Live watcher's output is the Live intent's");
  t.equal(fromLive.paymentIntentStatus, "confirmed");
  // A reorg reported by the Test watcher does not un-count the Live chain's block.
  const reorg = await observations.recordReorg({ network: "ethereum", orphanedBlockHashes: [output.blockHash] }, bearer(testWatcher.credential));
  t.same(reorg.paymentIntentIds, [], "a Test reorg touches no Live intent");
  const after = await call(s.base, "GET", `/api/v1/merchants/${live.merchant}/payment-intents/${res.body.data.public_id}`, { key: live.key });
  t.equal(after.body.data.status, "confirmed", "the Live intent stays confirmed");
});

t.test("an admin credential acts in its own environment: another environment's endpoint is not found", async (t) => {
  const testOperator = await createInternalCredential(em(), "test operator", ["admin"], "test");
  const before = await secretOf(liveEndpoint.id);
  t.same(await refusal(admin.rotateSigningSecret({ endpointId: liveEndpoint.id }, bearer(testOperator.credential))), { code: Code.NotFound, detail: "not_found" });
  t.equal(await secretOf(liveEndpoint.id), before, "the Live secret is unchanged");
  t.match((await admin.rotateSigningSecret({ endpointId: testEndpoint.id, overlapSeconds: 0 }, bearer(testOperator.credential))).signingSecret, /^whsec_/, "its own environment's endpoint rotates");
});

t.test("the admin CLI issues internal credentials with roles and an environment, and refuses one without", async (t) => {
  const env = { DATABASE_URL: s.databaseUrl };
  const missing = await runCli("services/app/admin.ts", env, "internal-credential", "create", "--name", "watcher");
  t.not(missing.code, 0);
  t.match(missing.stderr, /--roles is required/);
  const bad = await runCli("services/app/admin.ts", env, "internal-credential", "create", "--name", "watcher", "--roles", "everything", "--environment", "live");
  t.match(bad.stderr, /--roles takes observe and\/or admin, got "everything"/);
  const made = await runCli("services/app/admin.ts", env, "internal-credential", "create", "--name", "watcher", "--roles", "observe", "--environment", "live");
  t.equal(made.code, 0, made.stderr);
  t.match(JSON.parse(made.stdout), { name: "watcher", roles: ["observe"], environment: "live", credential: /^int_/ });
  const list = await runCli("services/app/admin.ts", env, "internal-credential", "list");
  const listed = JSON.parse(list.stdout).find((c: { id: string }) => c.id === JSON.parse(made.stdout).id);
  t.match(listed, { roles: ["observe"], environment: "live" });
});

t.test("--networks: what an observe credential speaks for, shown by create and list; an unknown network refused", async (t) => {
  const env = { DATABASE_URL: s.databaseUrl };
  const scoped = await runCli("services/app/admin.ts", env, "internal-credential", "create", "--name", "w", "--roles", "observe", "--environment", "test", "--networks", "solana,ethereum");
  t.equal(scoped.code, 0, scoped.stderr);
  t.match(JSON.parse(scoped.stdout), { speaks_for: { scoped: true, networks: ["ethereum", "solana"] } }, "scoped to the networks given");
  const unscoped = await runCli("services/app/admin.ts", env, "internal-credential", "create", "--name", "w", "--roles", "observe", "--environment", "test");
  t.match(JSON.parse(unscoped.stdout), { speaks_for: { scoped: false, networks: ["solana"] } }, "without --networks: only networks no built-in watcher follows");
  const bad = await runCli("services/app/admin.ts", env, "internal-credential", "create", "--name", "w", "--roles", "observe", "--environment", "test", "--networks", "dogecoin");
  t.not(bad.code, 0, "exits non-zero");
  t.match(bad.stderr, /--networks takes .*got "dogecoin"/, "an unknown network refused");
  const list = JSON.parse((await runCli("services/app/admin.ts", env, "internal-credential", "list")).stdout);
  t.match(list.find((c: { id: string }) => c.id === JSON.parse(scoped.stdout).id), { speaks_for: { scoped: true, networks: ["ethereum", "solana"] }, needs_reissue: false }, "list shows it");
});

t.test("one hash normalisation: the same transaction reported with its hex hash in upper and lower case is one output, counted once", async (t) => {
  const res = await call(s.base, "POST", `/api/v1/merchants/${live.merchant}/payment-intents`, { key: live.key, idempotencyKey: idemKey(), body: { ...sampleIntent, requested_amount: "5" } });
  const watcher = await createInternalCredential(em(), "live watcher", ["observe"], "live", { networks: ["ethereum"] });
  const tx = `0x${hash()}`;
  const output = { network: "ethereum", asset: "USDC", toAddress: res.body.data.deposit_address, outputIndex: 1, amount: "5", confirmations: 1, blockHeight: 100n, blockHash: `0x${hash()}` };
  const upper = await observations.recordObservation({ ...output, txHash: `0x${tx.slice(2).toUpperCase()}` }, bearer(watcher.credential));
  t.equal(upper.data?.txHash, tx, "kept lowercased");
  await observations.recordObservation({ ...output, txHash: tx, confirmations: 12 }, bearer(watcher.credential));
  const pi = (await call(s.base, "GET", `/api/v1/merchants/${live.merchant}/payment-intents/${res.body.data.public_id}`, { key: live.key })).body.data;
  t.same([pi.status, pi.amount_received, pi.transactions.length], ["confirmed", "5", 1], "one output, counted once");
});
