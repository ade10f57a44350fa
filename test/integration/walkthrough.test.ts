// The README's "Walk-through with curl", run as written: both of its shell blocks are read from
// README.md (so the README cannot drift from what works), fed step by step to one bash, as a
// newcomer pastes them into one terminal, against a started app; each step's output is checked.
// Two lines start long-running processes in other terminals (the server restart and the example
// receiver): the test's own app and HTTPS receiver stand in for them. The lines of "Webhooks on
// your machine" meant for other terminals (the example receiver and `listen`) run as written,
// each in a bash of its own.
import { spawn } from "node:child_process";
import { createHmac } from "node:crypto";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import t from "tap";
import { call, startTestApp, until } from "../helpers/harness.ts";
import { freePort } from "../helpers/processes.ts";
import { makeTestCa, startReceiver, trustTestCa } from "../helpers/receiver.ts";
import { startDevChain } from "../../scripts/devchain/chain.ts";
import { walkthroughHeadings } from "../helpers/doc-blocks.ts";
import { jsonObjects, root, startShell } from "../helpers/doc-shell.ts";
import { sampleProblems, samplesOf } from "../helpers/doc-samples.ts";

const readme = readFileSync(path.join(root, "README.md"), "utf8");

/** The first ```sh block after a heading line. */
function shellBlock(heading: string): string {
  const at = readme.indexOf(`\n${heading}\n`);
  if (at < 0) throw new Error(`README.md has no heading "${heading}"`);
  const m = /\n```sh\n([\s\S]*?)\n```\n/.exec(readme.slice(at));
  if (!m) throw new Error(`no sh block under "${heading}"`);
  return m[1]!;
}

/** Each sample output a step shows ("# {...}") against the JSON it printed, in order: the docs cannot go stale. */
function samplesHold(t: { same(a: unknown, b: unknown, m: string): void; ok(v: unknown, m: string): void }, label: string, lines: readonly string[], printed: readonly unknown[]): void {
  const samples = samplesOf(lines);
  t.ok(samples.length > 0, `${label}: shows a sample output`);
  for (const [i, sample] of samples.entries()) t.same(sampleProblems(sample, printed[i]), [], `${label}: sample ${i + 1} is what it prints (${sample.slice(0, 60)}…)`);
}

interface Step {
  number: number;
  lines: string[];
}

/** Splits a block at its "# N. ..." comments. */
function steps(block: string): Step[] {
  const out: Step[] = [];
  for (const line of block.split("\n")) {
    const m = /^# (\d+)\. /.exec(line);
    if (m) out.push({ number: Number(m[1]), lines: [] });
    out.at(-1)?.lines.push(line);
  }
  return out;
}

const hookName = "hooks.local.test";
const ca = await makeTestCa(t, [hookName]);
trustTestCa(ca.caPem);
const receiver = await startReceiver(t, { key: ca.key, cert: ca.cert });
// The local dev chain as `npm run devchain` runs it (a block every second), on a port of its own;
// the app stands in for the server that step 2 of "Pay a Test intent" restarts, following it.
const dev = await startDevChain({ blockTimeSeconds: 1 });
t.teardown(() => dev.stop());
const { base, databaseUrl } = await startTestApp(t, {
  WEBHOOK_CONNECT_TO: `${hookName}:443:127.0.0.1:${receiver.port}`,
  WEBHOOK_RETRY_DELAYS: "0.2,0.2,0.2,0.2,0.2",
  ETHEREUM_TEST_RPC_URL: dev.url,
  ETHEREUM_CONFIRMATIONS: "2",
});

// A working directory of its own (the walk-through writes hook.key and hook.crt) that is still
// this checkout to npm; one bash, as a newcomer pastes the blocks into one terminal.
// The ports as a newcomer whose defaults are taken sets them: exported, read by the commands as written.
// listen keeps its secret and position per key in a folder of the test's own (LISTEN_STATE_DIR), not the user's.
const listenState = mkdtempSync(path.join(tmpdir(), "walkthrough-listen-"));
t.teardown(() => rmSync(listenState, { recursive: true, force: true }));
const shellEnv = { DATABASE_URL: databaseUrl, DEVCHAIN_PORT: String(dev.port), PORT: new URL(base).port, HOOK_PORT: String(receiver.port), LISTEN_STATE_DIR: listenState };
const { dir, paste, variable } = startShell(t, shellEnv);

/** A line for another terminal, run as written in a bash of its own (its process group ended at teardown); what it prints so far. */
function inAnotherTerminal(line: string, env: Record<string, string>): () => string {
  const full: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) if (v !== undefined && k !== "NODE_OPTIONS" && !k.startsWith("TAP") && !k.startsWith("_TAP")) full[k] = v;
  const child = spawn("bash", ["-c", line], { cwd: dir, env: { ...full, DATA_DIR: path.join(dir, "data"), LOG_LEVEL: "warn", ...shellEnv, ...env }, detached: true, stdio: ["ignore", "pipe", "pipe"] });
  let out = "";
  child.stdout.on("data", (d: Buffer) => (out += d.toString()));
  child.stderr.on("data", (d: Buffer) => (out += d.toString()));
  t.teardown(() => {
    try {
      process.kill(-child.pid!, "SIGKILL");
    } catch {
      /* ended already */
    }
  });
  return () => out;
}

t.test("the walk-through, step by step", async (t) => {
  const walk = steps(shellBlock(walkthroughHeadings.walkthrough));
  t.same(walk.map((s) => s.number), [1, 2, 3, 4, 5, 6, 7, 8], "eight steps");
  const step = (n: number) => walk.find((s) => s.number === n)!.lines;

  // This test's server is on a port of its own, in PORT as a newcomer would export it.
  t.ok(step(1).includes("API=http://127.0.0.1:${PORT:-8080}/api/v1"), "step 1 sets API to the local server, on PORT");
  const one = await paste(step(1));
  t.equal(one.status, 0, `1: exit 0 (${one.out})`);
  const merchant = await variable("MERCHANT");
  const key = await variable("KEY");
  t.match(merchant, /^mer_[0-9A-Za-z]+$/, "1: MERCHANT holds the new merchant's id");
  t.match(key, /^sk_test_/, "1: KEY holds a Test key");
  t.equal(await variable("BASE"), `${base}/api/v1/merchants/${merchant}`, "1: BASE is the merchant's API");

  const two = await paste(step(2));
  t.equal(two.status, 0, "2: exit 0");
  const created = jsonObjects(two.out)[0]?.data;
  t.match(created, { status: "pending", requested_amount: "12.50", merchant_reference: "order-1001", network: "ethereum", asset: "USDC" }, "2: the intent is shown");
  samplesHold(t, "2", step(2), jsonObjects(two.out));
  const intent = await variable("INTENT");
  t.equal(intent, created?.public_id, "2: INTENT holds its id");
  t.match(intent, /^pi_/);

  const three = await paste(step(3));
  t.equal(three.status, 0, "3: exit 0");
  t.match(three.out, /^Idempotent-Replayed: true\r?$/im, "3: the same request replays");

  const four = await paste(step(4));
  const list = jsonObjects(four.out)[0];
  t.same(list?.data.map((i: { public_id: string }) => i.public_id), [intent], "4: the list holds the intent");
  t.equal(list?.has_more, false, "4: has_more false");
  samplesHold(t, "4", step(4), jsonObjects(four.out));

  const five = await paste(step(5));
  t.equal(jsonObjects(five.out)[0]?.data.public_id, intent, "5: reads the intent");

  const six = await paste(step(6));
  t.match(jsonObjects(six.out)[0]?.data, { public_id: intent, status: "underpaid", amount_received: "6.25" }, "6: the simulator paid part of it");
  samplesHold(t, "6", step(6), jsonObjects(six.out));

  const seven = await paste(step(7));
  const cancelled = jsonObjects(seven.out)[0]?.data;
  t.equal(cancelled?.status, "cancelled", "7: a second intent, cancelled");
  t.equal(cancelled?.public_id, await variable("OTHER"), "7: OTHER holds its id");
  t.not(cancelled?.public_id, intent, "7: not the first one");
  samplesHold(t, "7", step(7), jsonObjects(seven.out));

  const eight = await paste(step(8));
  const offered = jsonObjects(eight.out)[0]?.data;
  t.same(
    offered?.payment_methods?.map((m: { network: string; asset: string; chosen: boolean }) => [m.network, m.asset, m.chosen]),
    [["ethereum", "USDC", false], ["base", "USDC", false]],
    "8: an intent offering two methods, none chosen",
  );
  t.same([offered?.network, offered?.deposit_address], [null, null], "8: no one method until a payment chooses");
  samplesHold(t, "8", step(8), jsonObjects(eight.out));

  t.test("webhooks on your machine: listen", async (t) => {
    const listen = steps(shellBlock(walkthroughHeadings.listen));
    t.same(listen.map((s) => s.number), [1, 2, 3], "three steps");
    const step = (n: number) => listen.find((s) => s.number === n)!.lines;
    const one = await paste(step(1));
    t.equal(one.status, 0, `1: exit 0 (${one.out})`);
    const secret = await variable("LISTEN_SECRET");
    t.match(secret, /^whsec_/, "1: LISTEN_SECRET holds listen's signing secret");
    const elsewhere = step(2).filter((l) => !l.startsWith("#") && l.trim() !== "");
    t.equal(elsewhere.length, 2, "2: two lines, each for a terminal of its own");
    // Its own port: the HTTPS receiver the test stands in with for the endpoint section holds HOOK_PORT.
    const env = { HOOK_PORT: String(await freePort()), LISTEN_SECRET: secret, PAYMENTS_API_KEY: await variable("KEY") };
    const receiverOut = inAnotherTerminal(elsewhere[0]!, env);
    const listenOut = inAnotherTerminal(elsewhere[1]!, env);
    await until("listen is ready", async () => listenOut().includes("Ready."), 30_000, listenOut);
    t.match(listenOut(), `Signing secret: ${secret}`, "2: listen signs with the secret step 1 printed");

    const three = await paste(step(3));
    t.equal(three.status, 0, `3: exit 0 (${three.out})`);
    t.match(three.out, /created pi_\S+ \(10\.00 USDC on ethereum, Test\)\nsimulated confirmed: pi_\S+ is confirmed/, "3: what trigger did");
    const printed = await until("the receiver prints payment.confirmed", async () => /^payment\.confirmed (evt_\S+)$/m.exec(receiverOut()) ?? undefined, 30_000, receiverOut);
    await until("listen prints its line", async () => new RegExp(`payment\\.confirmed\\s+${printed[1]}\\s+-> 200 \\(\\d+ ms\\)`).test(listenOut()), 10_000, listenOut);
    t.pass(`3: ${printed[0]} verified by the example receiver with the listen secret, and listen's line for it`);
  });

  t.test("webhook endpoints on your machine", async (t) => {
    const hooks = steps(shellBlock(walkthroughHeadings.webhooks));
    t.same(hooks.map((s) => s.number), [1, 2, 3, 4, 5, 6], "six steps");
    const hook = (n: number) => hooks.find((s) => s.number === n)!.lines;
    // Lines that start a process in another terminal: the server restart and the receiver.
    const elsewhere = (l: string) => /npm start$/.test(l) || /node examples\/receiver\.mjs/.test(l);
    const skipped = hooks.flatMap((s) => s.lines.filter(elsewhere));
    t.equal(skipped.length, 2, `only the restart and the receiver are left to other terminals: ${skipped.join(" | ")}`);
    t.match(skipped[0], `WEBHOOK_CONNECT_TO=${hookName}:443:127.0.0.1:\${HOOK_PORT:-8443}`, "the restart maps the name the endpoint uses to the receiver's port");

    const one = await paste(hook(1));
    t.equal(one.status, 0, `1: openssl made the certificate (${one.out})`);
    t.ok(existsSync(path.join(dir, "hook.key")) && existsSync(path.join(dir, "hook.crt")), "1: hook.key and hook.crt");
    t.match(readFileSync(path.join(dir, "hook.crt"), "utf8"), /^-----BEGIN CERTIFICATE-----/);
    t.same(hook(2).filter((l) => !l.startsWith("#") && l.trim() !== "" && !elsewhere(l)), [], "2: nothing else to run here");

    const three = await paste(hook(3).filter((l) => !elsewhere(l)));
    t.equal(three.status, 0, "3: exit 0");
    const endpoint = jsonObjects(three.out)[0]?.data;
    t.match(endpoint, { url: `https://${hookName}/webhooks`, status: "enabled", signing_secret: /^whsec_/ }, "3: the endpoint, with its secret");
    t.equal(await variable("ENDPOINT"), endpoint?.id, "3: ENDPOINT holds its id");
    samplesHold(t, "webhooks 3", hook(3), jsonObjects(three.out));

    const four = await paste(hook(4));
    const sent = jsonObjects(four.out)[0]?.data;
    t.match(sent, { id: /^wd_/, event_id: /^evt_/ }, "4: a delivery of a test event");
    const [request] = await receiver.waitFor(1, 20_000);
    t.equal(request?.headers["x-service-event-id"], sent?.event_id, "4: the receiver got it");
    const expected = createHmac("sha256", endpoint.signing_secret).update(`${request?.headers["x-service-timestamp"]}.`).update(request!.body).digest("hex");
    t.equal(request?.headers["x-service-signature"], expected, "4: signed with the secret step 3 printed");
    t.equal(JSON.parse(request!.body.toString()).type, "webhook.test", "4: webhook.test");
    // A newcomer reads the deliveries after the receiver has printed: here, once the service has recorded it.
    const merchant = await variable("MERCHANT");
    await until("the test delivery to be delivered", async () => {
      const res = await call(base, "GET", `/api/v1/merchants/${merchant}/webhook-deliveries?status=delivered`, { key });
      return res.body.data?.length === 1;
    }, 20_000);

    const five = await paste(hook(5));
    t.equal(five.status, 0, "5: exit 0");
    const [deliveries, replay] = jsonObjects(five.out);
    t.same(deliveries?.data.map((d: { id: string; status: string }) => [d.id, d.status]), [[sent?.id, "delivered"]], "5: the delivered delivery");
    t.equal(deliveries?.data[0]?.attempts.length, 1, "5: with its attempt");
    t.equal(await variable("DELIVERY"), sent?.id, "5: DELIVERY holds its id");
    t.match(replay?.data, { replay_of: sent?.id, event_id: sent?.event_id }, "5: the replay is a new delivery of the same event");
    t.not(replay?.data.id, sent?.id);

    const six = await paste(hook(6));
    t.match(jsonObjects(six.out)[0]?.error, { code: "validation_failed", param: "url", message: /not allowed: 10\.0\.0\.5 is a private address/ }, "6: refused");
    samplesHold(t, "webhooks 6", hook(6), jsonObjects(six.out));
  });

  t.test("pay a Test intent with a real transaction", async (t) => {
    const pay = steps(shellBlock(walkthroughHeadings.pay));
    t.same(pay.map((s) => s.number), [1, 2, 3, 4, 5], "five steps");
    const step = (n: number) => pay.find((s) => s.number === n)!.lines;
    // Steps 1 and 2 run in other terminals: the test's dev chain and app stand in for them.
    t.ok(step(1).includes("npm run devchain"), "1: the dev chain");
    const restart = step(2).find((l) => /npm start$/.test(l)) ?? "";
    t.match(restart, "ETHEREUM_TEST_RPC_URL=http://127.0.0.1:${DEVCHAIN_PORT:-8545}", "2: the server follows the dev chain's port");
    t.match(restart, `WEBHOOK_CONNECT_TO=${hookName}:443:127.0.0.1:`, "2: and keeps the webhook override of the section above");

    const three = await paste(step(3));
    t.equal(three.status, 0, `3: exit 0 (${three.out})`);
    const paid = await variable("PAID");
    t.match(paid, /^pi_/, "3: PAID holds the new intent's id");
    t.match(await variable("DEPOSIT"), /^0x[0-9a-fA-F]{40}$/, "3: DEPOSIT its address");

    const four = await paste(step(4));
    t.equal(four.status, 0, `4: exit 0 (${four.out})`);
    t.match(four.out, new RegExp(`sent 5 USDC \\(the asset of intent ${await variable("PAID")}\\) to ${await variable("DEPOSIT")} on ethereum in 0x[0-9a-f]{64}`), "4: the payment was sent, in the intent's asset");

    // Step 5 as written (it sleeps 3 s), again until the watcher has seen two blocks on a slow machine.
    let shown: { status?: string } | undefined;
    for (let i = 0; i < 10 && shown?.status !== "confirmed"; i++) shown = jsonObjects((await paste(step(5))).out)[0]?.data;
    t.match(shown, { public_id: paid, status: "confirmed", amount_received: "5", transactions: [{ amount: "5", confirmations: Number, counted: true, simulated: false }] }, "5: confirmed by the real transaction");
    // At least the 2 the server was started with: a watcher that first sees it a block late reports 3.
    t.ok((shown as { transactions?: { confirmations: number }[] })?.transactions?.[0]!.confirmations! >= 2, "5: at 2 confirmations or more");
    samplesHold(t, "pay 5", step(5), [{ data: shown }]);
    const confirmed = await until("payment.confirmed at the receiver", async () =>
      receiver.requests.find((r) => {
        const event = JSON.parse(r.body.toString());
        return event.type === "payment.confirmed" && event.data.payment_intent?.public_id === paid;
      }), 20_000);
    t.ok(confirmed, "5: the receiver got payment.confirmed");
  });
});
