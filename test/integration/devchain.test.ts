// The dev chain behaves like npm start: `npm run devchain` execs, so SIGTERM to the PID npm runs
// stops anvil and frees DEVCHAIN_PORT; a port in use is refused naming DEVCHAIN_PORT; and `pay`
// sends the intent's asset (ETH to an ETH intent), whether given the intent's id or its address.
import { spawn, spawnSync } from "node:child_process";
import { createServer, type Server } from "node:net";
import path from "node:path";
import t from "tap";
import { formatEther, formatUnits, type Hex } from "viem";
import { startDevChain, tokenAbi } from "../../scripts/devchain/chain.ts";
import { reachable } from "../../services/platform/reachable.ts";
import { call, idemKey, merchantWithKey, startTestApp, until } from "../helpers/harness.ts";
import { freePort } from "../helpers/processes.ts";

const root = path.resolve(import.meta.dirname, "../..");
const env: Record<string, string> = {};
for (const [k, v] of Object.entries(process.env)) {
  // Not tap's: the child is a reader's `npm run`, not a test process.
  if (v !== undefined && k !== "NODE_OPTIONS" && !k.startsWith("TAP") && !k.startsWith("_TAP")) env[k] = v;
}
delete env.DATABASE_URL;

const listen = (port: number) =>
  new Promise<Server | undefined>((resolve) => {
    const server = createServer();
    server.once("error", () => resolve(undefined));
    server.listen(port, "127.0.0.1", () => resolve(server));
  });

t.test("SIGTERM to the PID of npm run devchain stops anvil: the port can be bound again", async (t) => {
  const port = await freePort();
  const npm = spawn("npm", ["run", "devchain"], { cwd: root, env: { ...env, DEVCHAIN_PORT: String(port) }, stdio: ["ignore", "pipe", "pipe"] });
  let out = "";
  npm.stdout.on("data", (d: Buffer) => (out += d.toString()));
  npm.stderr.on("data", (d: Buffer) => (out += d.toString()));
  const exited = new Promise<number | null>((resolve) => npm.once("exit", (code) => resolve(code)));
  t.teardown(() => void npm.kill("SIGKILL"));
  await until("the dev chain to announce itself and listen", async () => out.includes("Local dev chain: anvil on") && (await reachable("127.0.0.1", port)), 60_000, () => out);
  t.match(out, /> exec node scripts\/devchain\.ts/, "npm runs it with exec");
  npm.kill("SIGTERM");
  const server = await until("the port to be free again", async () => listen(port), 15_000, () => out);
  server.close();
  t.pass(`127.0.0.1:${port} could be bound again`);
  t.equal(await exited, 0, "npm exits 0");
});

t.test("a port in use: refused with one line naming DEVCHAIN_PORT", async (t) => {
  const port = await freePort();
  const held = await listen(port);
  t.ok(held, "the port is held");
  t.teardown(() => void held?.close());
  const r = spawnSync(process.execPath, [path.join(root, "scripts/devchain.ts")], { cwd: root, env: { ...env, DEVCHAIN_PORT: String(port) }, encoding: "utf8", timeout: 60_000 });
  t.equal(r.status, 1, "exit 1");
  t.equal(r.stdout, "", "nothing announced");
  t.equal(r.stderr.split("\n").length, 2, "one line");
  t.match(r.stderr, new RegExp(`^devchain: 127\\.0\\.0\\.1:${port} is in use \\(DEVCHAIN_PORT=${port}\\): .*set DEVCHAIN_PORT to a free port`), "names the port and DEVCHAIN_PORT");
});

t.test("pay sends the intent's asset: ETH to an ETH intent, by its id or by its address", async (t) => {
  const dev = await startDevChain({ blockTimeSeconds: 1 });
  t.teardown(() => dev.stop());
  const s = await startTestApp(t, {}, ["rpc", "gateway"]);
  const a = await merchantWithKey(s.app);
  const create = async (asset: string) => {
    const res = await call(s.base, "POST", `/api/v1/merchants/${a.merchant}/payment-intents`, { key: a.key, idempotencyKey: idemKey(), body: { network: "ethereum", asset, requested_amount: "1" } });
    t.equal(res.status, 200, `a ${asset} intent`);
    return res.body.data as { public_id: string; deposit_address: Hex };
  };
  const eth = await create("ETH");
  const usdc = await create("USDC");
  const pay = (...args: string[]) =>
    spawnSync(process.execPath, [path.join(root, "scripts/devchain.ts"), "pay", ...args], { cwd: root, env: { ...env, DATABASE_URL: s.databaseUrl, DEVCHAIN_URL: dev.url }, encoding: "utf8", timeout: 60_000 });
  const ethOf = async (address: Hex) => formatEther(await dev.public.getBalance({ address }));
  const usdcOf = async (address: Hex) => formatUnits(await dev.public.readContract({ address: dev.tokens.USDC!, abi: tokenAbi, functionName: "balanceOf", args: [address] }), 6);

  let r = pay(eth.public_id, "0.01");
  t.equal(r.status, 0, `by id (${r.stderr})`);
  t.match(r.stdout, new RegExp(`^sent 0\\.01 ETH \\(the asset of intent ${eth.public_id}\\) to ${eth.deposit_address} on ethereum in 0x[0-9a-f]{64}\\n$`), "says it sends ETH, and why");
  await until("0.01 ETH at the intent's address", async () => (await ethOf(eth.deposit_address)) === "0.01", 20_000);

  r = pay(eth.deposit_address, "0.02");
  t.equal(r.status, 0, `by address, no asset named (${r.stderr})`);
  t.match(r.stdout, /^sent 0\.02 ETH \(the asset of intent pi_/, "the intent's asset, not the default USDC");
  await until("0.03 ETH at the intent's address", async () => (await ethOf(eth.deposit_address)) === "0.03", 20_000);
  t.equal(await usdcOf(eth.deposit_address), "0", "and no USDC");

  r = pay(usdc.public_id, "2.5");
  t.equal(r.status, 0, `a USDC intent by id (${r.stderr})`);
  await until("2.5 USDC at the USDC intent's address", async () => (await usdcOf(usdc.deposit_address)) === "2.5", 20_000);

  r = pay(eth.deposit_address, "1", "USDT");
  t.match(r.stdout, /^sent 1 USDT to 0x/, "a named asset is sent as named (a wrong-asset payment on purpose)");

  r = pay("pi_doesnotexist", "1");
  t.equal(r.status, 1);
  t.match(r.stderr, /^devchain: no intent pi_doesnotexist in the server's database/, "an unknown intent id: nothing sent");

  r = spawnSync(process.execPath, [path.join(root, "scripts/devchain.ts"), "pay", "0x9858EfFD232B4033E47d90003D41EC34EcaEda94", "1"], {
    cwd: root,
    env: { ...env, DATA_DIR: path.join(root, ".data-none"), DEVCHAIN_URL: dev.url },
    encoding: "utf8",
    timeout: 60_000,
  });
  t.match(r.stdout, /^sent 1 USDC \(the default: no intent with this address found; name the asset to send another\)/, "no database to ask: the default, said");
});

t.test("a base dev chain: pay finds the network by its chain id, pays an intent of several methods in its base one, refuses an ethereum intent naming the chain to start", async (t) => {
  const dev = await startDevChain({ blockTimeSeconds: 1, network: "base" });
  t.teardown(() => dev.stop());
  const s = await startTestApp(t, {}, ["rpc", "gateway"]);
  const a = await merchantWithKey(s.app);
  const create = async (body: Record<string, unknown>) => {
    const res = await call(s.base, "POST", `/api/v1/merchants/${a.merchant}/payment-intents`, { key: a.key, idempotencyKey: idemKey(), body });
    t.equal(res.status, 200, JSON.stringify(res.body));
    return res.body.data;
  };
  const several = await create({ requested_amount: "3", payment_methods: [{ network: "ethereum", asset: "USDC" }, { network: "base", asset: "USDC" }] });
  const onBase = several.payment_methods.find((m: { network: string }) => m.network === "base").deposit_address as Hex;
  const pay = (...args: string[]) =>
    spawnSync(process.execPath, [path.join(root, "scripts/devchain.ts"), "pay", ...args], { cwd: root, env: { ...env, DATABASE_URL: s.databaseUrl, DEVCHAIN_URL: dev.url }, encoding: "utf8", timeout: 60_000 });

  let r = pay(several.public_id, "3");
  t.equal(r.status, 0, `by id (${r.stderr})`);
  t.match(r.stdout, new RegExp(`^sent 3 USDC \\(the asset of intent ${several.public_id}\\) to ${onBase} on base in 0x[0-9a-f]{64}\\n$`), "the base method, on base");
  const usdcOf = async (address: Hex) => formatUnits(await dev.public.readContract({ address: dev.tokens.USDC!, abi: tokenAbi, functionName: "balanceOf", args: [address] }), 6);
  await until("3 USDC at the base address, on the base chain's Test USDC", async () => (await usdcOf(onBase)) === "3", 20_000);

  const eth = await create({ network: "ethereum", asset: "ETH", requested_amount: "1" });
  r = pay(eth.public_id, "1");
  t.equal(r.status, 1);
  t.equal(r.stdout, "", "nothing sent");
  t.match(r.stderr, new RegExp(`^devchain: intent ${eth.public_id} is a ethereum ETH intent, and the dev chain at .* stands for base \\(chain id 84532\\): start one with npm run devchain -- ethereum\\n$`));
});
