// The watcher's probe of a node that refused its connections: a refusal is told from other
// failures, and the probe returns as soon as something listens on the node's port again, or when
// its time is up.
import t from "tap";
import { createServer, type Server } from "node:net";
import { connectionRefused, untilAccepting } from "../../services/watcher/node-probe.ts";
import { evmNode } from "../../services/watcher/evm-node.ts";
import { bitcoinNode } from "../../services/watcher/bitcoin-node.ts";

/** A port nothing listens on (taken, then given back). */
async function freePort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((resolve) => s.listen(0, "127.0.0.1", resolve));
  const port = (s.address() as { port: number }).port;
  await new Promise((resolve) => s.close(resolve));
  return port;
}

function listen(port: number): Promise<Server> {
  const s = createServer((socket) => socket.destroy());
  return new Promise((resolve) => s.listen(port, "127.0.0.1", () => resolve(s)));
}

t.test("a refused connection is told apart from a node that answers with an error or never answers", async (t) => {
  const port = await freePort();
  const refused = await evmNode(`http://127.0.0.1:${port}`).headHeight().catch((e: unknown) => e);
  t.ok(connectionRefused(refused), "the EVM node's call (viem over fetch)");
  const btc = await bitcoinNode(`http://u:p@127.0.0.1:${port}`).hashAt(1).catch((e: unknown) => e);
  t.ok(connectionRefused(btc), "the bitcoin node's call");
  const answers = await listen(await freePort());
  t.teardown(() => answers.close());
  // It accepts, then closes without a word: the call fails, but not because nothing listens.
  const closed = await evmNode(`http://127.0.0.1:${(answers.address() as { port: number }).port}`, 2_000).headHeight().catch((e: unknown) => e);
  t.ok(closed instanceof Error, "the call failed");
  t.notOk(connectionRefused(closed), "a node that accepted the connection is not probed");
  t.notOk(connectionRefused(new Error("timeout")), "nor one that failed otherwise");
});

t.test("the probe returns once the node's port accepts a connection, long before its time is up", async (t) => {
  const port = await freePort();
  let server: Server | undefined;
  t.teardown(() => server?.close());
  const started = Date.now();
  let listeningAt = 0;
  setTimeout(async () => {
    server = await listen(port);
    listeningAt = Date.now();
  }, 300);
  // Ended by the probe, or by the 20 s the wait allows (the test would then fail on the order below).
  await untilAccepting(`http://127.0.0.1:${port}/some/path`, 20_000, new AbortController().signal);
  const ended = Date.now();
  t.ok(listeningAt > 0 && ended >= listeningAt, "not before the port listened");
  t.ok(ended - started < 10_000, `ended ${ended - started} ms after it began, with 20 s allowed`);
});

t.test("nothing listening: the probe waits its whole time; an abort ends it at once", async (t) => {
  const port = await freePort();
  const started = Date.now();
  await untilAccepting(`http://127.0.0.1:${port}`, 400, new AbortController().signal);
  t.ok(Date.now() - started >= 390, "the whole 400 ms");
  const controller = new AbortController();
  setTimeout(() => controller.abort(), 100);
  const s2 = Date.now();
  await untilAccepting(`http://127.0.0.1:${port}`, 20_000, controller.signal);
  t.ok(Date.now() - s2 < 10_000, "aborted, it returned with 20 s allowed");
});
