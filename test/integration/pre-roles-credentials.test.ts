// Old credentials lose what they were never given: a credential issued before roles and
// environments (the roles migration gave it {observe, admin} and no environment) holds no role
// once the migrations have run. AdminService refuses it (it could rotate a Live merchant's
// signing secret before), ChainService refuses it, and `admin internal-credential list` shows it
// as needing re-issue. The row is written as the old schema wrote it, then the migrations run.
import { Code, createClient } from "@connectrpc/connect";
import { createGrpcTransport, Http2SessionManager } from "@connectrpc/connect-node";
import t from "tap";
import { AdminService } from "../../gen/payments/v1/admin_pb.ts";
import { ChainService } from "../../gen/payments/v1/chains_pb.ts";
import { generateInternalCredential, hashApiKey, keyHint } from "../../services/auth/keys.ts";
import { openDatabase } from "../../services/app/database.ts";
import { createTestDatabase, merchantWithKey } from "../helpers/harness.ts";
import { runCli } from "../helpers/processes.ts";
import { webhookSetup } from "../helpers/webhooks.ts";
import { refusal } from "../helpers/lifecycle.ts";

const databaseUrl = await createTestDatabase(t);
// The schema as it was just before roles and environments, and a credential of that time.
const old = await openDatabase(databaseUrl);
await old.migrator.up({ to: "Migration20261124150204_SecretKeyCheck" });
const secret = generateInternalCredential();
await old.em.fork().execute(`insert into internal_credentials (id, name, secret_hash, hint, created_at, revoked_at) values (?, ?, ?, ?, now(), null)`, [
  "ic_preroles",
  "old watcher",
  hashApiKey(secret),
  keyHint(secret),
]);
await old.close();

// The service starts on it: the rest of the migrations run.
const s = await webhookSetup(t, { env: { DATABASE_URL: databaseUrl }, roles: ["rpc", "gateway"] });
const sessions = new Http2SessionManager(s.rpcUrl);
t.teardown(() => sessions.abort());
const transport = createGrpcTransport({ baseUrl: s.rpcUrl, sessionManager: sessions });
const headers = { authorization: `Bearer ${secret}` };
const secretOf = async (id: string) => (await s.app.db.em.fork().execute<{ c: Buffer }[]>(`select secret_ciphertext as c from webhook_endpoints where id = ?`, [id]))[0]?.c.toString("hex");

t.test("a pre-roles credential holds no role after the migrations: AdminService and ChainService refuse it", async (t) => {
  const [row] = await s.app.db.em.fork().execute<{ roles: string[]; environment: string | null }[]>(`select roles, environment from internal_credentials where id = 'ic_preroles'`);
  t.same([row?.roles, row?.environment], [[], null], "the migration left it no role");

  const live = await merchantWithKey(s.app, "live");
  const endpoint = await s.createEndpoint("/hooks/live", live);
  const before = await secretOf(endpoint.id);
  const admin = createClient(AdminService, transport);
  t.same(await refusal(admin.rotateSigningSecret({ endpointId: endpoint.id, overlapSeconds: 0 }, { headers })), { code: Code.PermissionDenied, detail: "insufficient_scope" }, "AdminService: it cannot rotate a Live merchant's signing secret");
  t.equal(await secretOf(endpoint.id), before, "the secret is unchanged");
  t.same(await refusal(admin.getMerchantPolicy({ merchant: live.merchant }, { headers })), { code: Code.PermissionDenied, detail: "insufficient_scope" }, "nor read a policy");

  const chains = createClient(ChainService, transport);
  t.same(await refusal(chains.claimChain({ network: "ethereum", watcherId: "old", leaseSeconds: 30 }, { headers })), { code: Code.PermissionDenied, detail: "insufficient_scope" }, "ChainService: it cannot claim a chain");
  t.same(await refusal(chains.reportBlocks({ network: "ethereum", watcherId: "old", leaseEpoch: 1n, blocks: [], headHeight: 0n }, { headers })), { code: Code.PermissionDenied, detail: "insufficient_scope" }, "nor report on one");
});

t.test("admin internal-credential list shows it as needing re-issue", async (t) => {
  const cli = await runCli("services/app/admin.ts", { DATABASE_URL: databaseUrl }, "internal-credential", "list");
  t.equal(cli.code, 0, cli.stderr);
  const listed = (JSON.parse(cli.stdout) as { id: string; needs_reissue: boolean; reissue?: string; roles: string[] }[]).find((c) => c.id === "ic_preroles");
  t.same([listed?.needs_reissue, listed?.roles], [true, []], "needs_reissue, no roles");
  t.match(listed?.reissue, /issue a new one/, "and says what to do");
});
