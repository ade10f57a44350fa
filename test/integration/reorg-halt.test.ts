// A reorg deeper than the chain's maximum stops that chain loudly, and an operator resumes it
// (issue 46), against anvil followed by the app's in-process watcher, ethereum Test
// (ETHEREUM_CONFIRMATIONS=3) started with ETHEREUM_MAX_REORG_DEPTH=30 (<NETWORK>_MAX_REORG_DEPTH;
// defaults bitcoin 100, ethereum and tron 128, polygon 256). A 40-block reorg:
//  - no payment counts on the chain while it is stopped;
//  - go-live readiness (a Test merchant): the chain_watcher check fails, naming the network and the
//    depth, never the node's address;
//  - /metrics on the ops port: chain_halted_reorg_depth{network="ethereum",environment="test"} 40
//    (0 or absent while the chain counts);
//  - the app's log: exactly one line (warn or above) saying the chain stopped, with the network and depth;
//  - `ops chain-resume --network ethereum --environment test` exits 0 and prints a line naming the
//    chain; the watcher then follows the new branch, and the halt is gone from readiness and the gauge.
// Today nothing of this exists: the follower's window (22 blocks) is shallower than the reorg, the
// core refuses every batch as unlinked, and the chain stops without a word.
import t, { type Test } from "tap";
import { call, until } from "../helpers/harness.ts";
import { metricValue, reorgSetup } from "../helpers/reorg.ts";

const r = await reorgSetup(t, { ETHEREUM_MAX_REORG_DEPTH: "30" });
const { base, creds } = r.s;
const nodeAddress = new URL(r.dev.url).host;
const nodePort = new URL(r.dev.url).port;
const labels = { network: "ethereum", environment: "test" };
const gauge = () => metricValue(r.s.app.ports.ops, "chain_halted_reorg_depth", labels);

interface Check {
  id: string;
  passed: boolean;
  message: string;
}
async function chainCheck(): Promise<Check> {
  const res = await call(base, "GET", `/api/v1/merchants/${creds.merchant}/go-live/readiness`, { key: creds.key });
  if (res.status !== 200) throw new Error(`readiness: ${res.status} ${JSON.stringify(res.body)}`);
  return (res.body.data.checks as Check[]).find((c) => c.id === "chain_watcher") as Check;
}

/** The app's lines at warn or above saying the chain stopped, with the network and the depth. */
const haltLines = () =>
  r.log.lines().filter((line) => {
    const text = JSON.stringify(line);
    return Number(line.level) >= 40 && /\b(halt|halted|halts|stop|stopped|stops)\b/i.test(String(line.msg)) && text.includes("ethereum") && /\b40\b/.test(text);
  });

/** Runs `step`; a failure (a deadline passed) is reported and the test goes on to its next step. */
async function step<T>(t: Test, what: string, fn: () => Promise<T>): Promise<T | undefined> {
  try {
    return await fn();
  } catch (err) {
    t.fail(`${what}: ${(err as Error).message}`);
    return undefined;
  }
}

t.test("a 40-block reorg past ETHEREUM_MAX_REORG_DEPTH=30 stops the chain loudly; ops chain-resume follows the new branch", async (t) => {
  await r.mine(60);
  await r.caughtUp();
  await until("readiness: the Test chain is followed", async () => (await chainCheck()).passed, 30_000);
  t.notOk(await gauge(), "chain_halted_reorg_depth is 0 or absent while the chain counts");

  const T = await r.head();
  await r.reorg(40);
  t.equal(await r.head(), T, "the new branch is as high as the old one");

  // (b) readiness names the halt.
  const halted = await step(t, "readiness shows the halt", () =>
    until("chain_watcher fails", async () => {
      const c = await chainCheck();
      return c.passed ? undefined : c;
    }, 40_000),
  );
  const check = halted ?? (await chainCheck());
  t.equal(check.passed, false, `chain_watcher fails while the chain is stopped: ${check.message}`);
  t.match(check.message, /ethereum/, "the message names the network");
  t.match(check.message, /\b40\b/, "and the reorg's depth");
  t.match(check.message, /a reorg would take 40 blocks off the chain counted so far/, "exactly: the watcher knew where the branches part");
  t.notMatch(check.message, /at least/, "not as a lower bound");
  t.notOk(check.message.includes(nodeAddress) || check.message.includes(nodePort), `and never the node's address: ${check.message}`);

  // (c) the gauge.
  let depth: number | undefined;
  await step(t, "chain_halted_reorg_depth 40", () => until("the gauge", async () => (depth = await gauge()) === 40, 10_000, () => String(depth)));
  t.equal(depth, 40, 'chain_halted_reorg_depth{network="ethereum",environment="test"} is the reorg\'s depth');

  // (a) a payment on the new branch does not count while the chain is stopped: not within 5 s of
  // its blocks (the watcher polls every 100 ms), and the chain still stopped at the end of it.
  const y = await r.createIntent("1");
  const sentinel = await r.pay(y, "1");
  await r.mine(5);
  const deadline = Date.now() + 5_000;
  const statuses = new Set<string>();
  while (Date.now() < deadline) {
    statuses.add((await r.get(y.public_id)).status);
    await new Promise((done) => setTimeout(done, 100));
  }
  t.notOk(statuses.has("confirmed"), `not counted while stopped (statuses seen: ${[...statuses]})`);
  t.equal(await gauge(), 40, "still stopped at the deadline");
  t.equal((await chainCheck()).passed, false, "and readiness still says so");

  // (d) said once in the app's log, however long it stays stopped.
  t.equal(haltLines().length, 1, `exactly one log line says the chain stopped: ${JSON.stringify(haltLines())}`);

  // (e) the operator resumes the chain.
  const resumed = await r.ops("chain-resume", "--network", "ethereum", "--environment", "test");
  t.equal(resumed.code, 0, `ops chain-resume exits 0: ${resumed.stderr}`);
  t.match(resumed.stdout, /ethereum[^\n]*test|test[^\n]*ethereum/, `prints a line naming the chain: ${resumed.stdout}`);

  const counted = await step(t, "the payment on the new branch counts after the resume", () => r.statusIs(y.public_id, "confirmed", 40_000));
  t.match(counted, { status: "confirmed", amount_received: "1" }, "confirmed once the chain follows the new branch");
  t.equal(counted?.transactions?.[0]?.tx_hash, sentinel.hash, "by its transaction");
  const after = await step(t, "readiness after the resume", () =>
    until("chain_watcher passes", async () => {
      const c = await chainCheck();
      return c.passed ? c : undefined;
    }, 20_000),
  );
  t.ok(after?.passed, "readiness passes again");
  t.notMatch((await chainCheck()).message, /\b40\b/, "and no longer names the halt");
  await step(t, "the gauge back to 0", () => until("the gauge", async () => !(depth = await gauge()), 10_000, () => String(depth)));
  t.notOk(await gauge(), "chain_halted_reorg_depth back to 0");
  t.equal(haltLines().length, 1, "still one line saying the chain stopped");
  if (!t.passing()) t.comment(await r.diagnosis());
});
