// USDT on polygon (issue 62): Tether's USDT0 at 0xc2132D05…, on Live only, since Tether names no
// token on Amoy. A Live intent is paid and confirmed as any polygon token is (through a watcher's
// report naming mainnet's block 0); every Test path that could offer it refuses it with why, or
// leaves it out ("all"), and the accepted-methods setting is tried through the admin CLI and
// AdminService as an operator uses them.
import { execFile } from "node:child_process";
import path from "node:path";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import t from "tap";
import { AdminService } from "../../gen/payments/v1/admin_pb.ts";
import { createInternalCredential } from "../../services/auth/admin.ts";
import { call, giveLiveAccountKey, idemKey, merchantWithKey, startTestApp, until } from "../helpers/harness.ts";
import { reportChainOutput } from "../helpers/lifecycle.ts";

const root = path.resolve(import.meta.dirname, "../..");
const s = await startTestApp(t, { RATE_SOURCES: "fixed" });
const live = await merchantWithKey(s.app, "live");
const test = await merchantWithKey(s.app, "test");
await Promise.all([giveLiveAccountKey(s.app, live.merchant, "polygon"), giveLiveAccountKey(s.app, live.merchant, "ethereum")]);
const intentsOf = (m: { merchant: string }) => `/api/v1/merchants/${m.merchant}/payment-intents`;
const create = (m: { merchant: string; key: string }, body: object) => call(s.base, "POST", intentsOf(m), { key: m.key, idempotencyKey: idemKey(), body });
const count = async (m: { merchant: string; key: string }) => (await call(s.base, "GET", intentsOf(m), { key: m.key })).body.data.length as number;
const methodsOf = (body: { data: { payment_methods: { network: string; asset: string }[] } }) => body.data.payment_methods.map((m) => `${m.network}.${m.asset}`).sort();

/** The admin CLI as an operator runs it beside the service, on its database. */
function admin(...args: string[]) {
  return new Promise<{ status: number; stdout: string; stderr: string }>((resolve) => {
    execFile(
      process.execPath,
      [path.join(root, "services/app/admin.ts"), ...args],
      { cwd: root, env: { PATH: process.env.PATH, HOME: process.env.HOME, DATABASE_URL: s.databaseUrl, LOG_LEVEL: "warn" }, encoding: "utf8" },
      (err, stdout, stderr) => resolve({ status: err ? (typeof err.code === "number" ? err.code : 1) : 0, stdout, stderr }),
    );
  });
}

t.test("a Live polygon USDT intent: Tether's contract on chain 137 in its URI, paid and confirmed at polygon's 64 confirmations", async (t) => {
  const res = await create(live, { network: "polygon", asset: "USDT", requested_amount: "12.5" });
  t.equal(res.status, 200, JSON.stringify(res.body));
  const pi = res.body.data;
  t.same([pi.network, pi.asset, pi.required_confirmations], ["polygon", "USDT", 64]);
  t.equal(pi.payment_uri, `ethereum:0xc2132D05D31c914a87C6611C10748AEb04B58e8F@137/transfer?address=${pi.deposit_address}&uint256=12500000`, "EIP-681: the token on Polygon PoS");
  await reportChainOutput(s.app, s.rpcUrl, "polygon-live", "polygon", { toAddress: pi.deposit_address, asset: "USDT", amount: "12.5" }, { confirmations: 64, environment: "live" });
  const confirmed = await until(
    "the Live USDT intent confirmed",
    async () => {
      const now = (await call(s.base, "GET", `${intentsOf(live)}/${pi.public_id}`, { key: live.key })).body.data;
      return now.status === "confirmed" ? now : undefined;
    },
    20_000,
  );
  t.same([confirmed.amount_received, confirmed.transactions[0].confirmations, confirmed.transactions[0].counted], ["12.5", 64, true]);
});

t.test("on Test, polygon USDT is refused wherever it is named, with why, and nothing is created", async (t) => {
  const before = await count(test);
  const one = await create(test, { network: "polygon", asset: "USDT", requested_amount: "5" });
  t.equal(one.status, 400, JSON.stringify(one.body));
  t.equal(one.body.error?.param, "asset");
  t.match(one.body.error?.message, "USDT on polygon is offered on Live only: its issuer has no token on polygon's testnet");
  const listed = await create(test, { price_amount: "5", price_currency: "USD", payment_methods: [{ network: "polygon", asset: "USDC" }, { network: "polygon", asset: "USDT" }] });
  t.equal(listed.status, 400, JSON.stringify(listed.body));
  t.equal(listed.body.error?.param, "payment_methods[1].asset", "the method named");
  t.equal(await count(test), before, "nothing was created");
  // The same pair on Live is taken (the first test paid one).
  const ok = await create(live, { requested_amount: "5", payment_methods: [{ network: "polygon", asset: "USDC" }, { network: "polygon", asset: "USDT" }] });
  t.equal(ok.status, 400, "two assets need a price, on Live too");
  t.equal(ok.body.error?.param, "price_amount");
});

t.test('"all" leaves polygon USDT out of Test intents; accepted methods set through the CLI and AdminService follow each environment', async (t) => {
  const all = await create(test, { price_amount: "5", price_currency: "USD", payment_methods: "all" });
  t.equal(all.status, 200, JSON.stringify(all.body));
  t.ok(methodsOf(all.body).includes("polygon.USDC"), "polygon's USDC is offered on Test");
  t.notOk(methodsOf(all.body).includes("polygon.USDT"), "its USDT is not");

  // Live: the CLI narrows "all" to the USDT methods, polygon's among them; one asset, so an amount in it serves.
  const set = await admin("policy", "accepted-methods", "--merchant", live.merchant, "--environment", "live", "--methods", "polygon.USDT,ethereum.USDT");
  t.equal(set.status, 0, set.stderr);
  t.same(JSON.parse(set.stdout).accepted_methods, ["polygon.USDT", "ethereum.USDT"]);
  const usdt = await create(live, { requested_amount: "20", payment_methods: "all" });
  t.equal(usdt.status, 200, JSON.stringify(usdt.body));
  t.same(methodsOf(usdt.body), ["ethereum.USDT", "polygon.USDT"], "the Live merchant's accepted methods");
  t.match(usdt.body.data.payment_methods.find((m: { network: string }) => m.network === "polygon").payment_uri, /^ethereum:0xc2132D05D31c914a87C6611C10748AEb04B58e8F@137\/transfer\?/);

  // Test: the CLI refuses the Live-only method and says why; the policy is unchanged.
  const refused = await admin("policy", "accepted-methods", "--merchant", test.merchant, "--environment", "test", "--methods", "polygon.USDC,polygon.USDT");
  t.not(refused.status, 0, "refused");
  t.match(refused.stderr, "USDT on polygon is offered on Live only");
  t.notMatch(refused.stdout, "accepted_methods", "nothing printed as set");

  // AdminService, with a Test admin credential: the same refusal, then a narrowing "all" follows.
  const { credential } = await createInternalCredential(s.app.db.em.fork(), "methods admin", ["admin"], "test");
  const rpc = createClient(AdminService, createGrpcTransport({ baseUrl: s.rpcUrl }));
  const headers = { authorization: `Bearer ${credential}` };
  const bad = await rpc.setAcceptedMethods({ merchant: test.merchant, methods: ["polygon.USDT"] }, { headers }).catch((e: unknown) => e);
  t.ok(bad instanceof ConnectError && bad.code === Code.InvalidArgument, `InvalidArgument: ${String(bad)}`);
  t.match((bad as ConnectError).rawMessage, "offered on Live only");
  const read = await rpc.getMerchantPolicy({ merchant: test.merchant }, { headers });
  t.same(read.policy?.acceptedMethods, [], "the refused calls changed nothing: every method, by default");
  const narrowed = await rpc.setAcceptedMethods({ merchant: test.merchant, methods: ["polygon.USDC", "base.USDC"] }, { headers });
  t.same(narrowed.policy?.acceptedMethods, ["polygon.USDC", "base.USDC"]);
  const two = await create(test, { requested_amount: "7", payment_methods: "all" });
  t.equal(two.status, 200, JSON.stringify(two.body));
  t.same(methodsOf(two.body), ["base.USDC", "polygon.USDC"], "Test's \"all\" follows what AdminService set");
  const reset = await admin("policy", "accepted-methods", "--merchant", test.merchant, "--environment", "test", "--reset");
  t.equal(reset.status, 0, reset.stderr);
  t.same(JSON.parse(reset.stdout).accepted_methods, [], "reset: every method again");
});
