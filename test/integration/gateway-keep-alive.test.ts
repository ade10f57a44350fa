// A merchant's connection to the REST port stays open while it is idle for HTTP_KEEP_ALIVE_SECONDS
// (75 s by default; Node adds its keepAliveTimeoutBuffer, 1 s, before it closes), not Node's own
// 5 s: a client that sends on a connection as the server closes it gets a reset, and the
// merchant-path bench saw a create fail with ECONNRESET on a connection reused after 5 988 ms idle.
// The server says how long in each answer's Keep-Alive header. Raw sockets, so that what is tested
// is the server's behaviour, not a client agent's; the service with every role.
import net from "node:net";
import t, { type Test } from "tap";
import { merchantWithKey, startTestApp, until } from "../helpers/harness.ts";

/** A connection to the REST port that collects what the server sends, and when it closes its side. */
async function connection(t: { teardown(fn: () => unknown): void }, base: string) {
  const socket = net.connect(Number(new URL(base).port), "127.0.0.1");
  t.teardown(() => socket.destroy());
  const state = { text: "", answers: [] as number[], endedAt: undefined as number | undefined, error: undefined as Error | undefined };
  socket.on("data", (d: Buffer) => {
    state.text += d.toString("utf8");
    // Each answer's time, as it completes (the list of intents is one JSON body ending the answer).
    const complete = state.text.split(/HTTP\/1\.1 /).filter((a) => a.includes('"data"')).length;
    while (state.answers.length < complete) state.answers.push(Date.now());
  });
  socket.on("end", () => (state.endedAt = Date.now()));
  socket.on("error", (err) => (state.error = err));
  await new Promise<void>((resolve, reject) => {
    socket.once("connect", () => resolve());
    socket.once("error", reject);
  });
  return { socket, state };
}

const listRequest = (merchant: string, key: string) =>
  `GET /api/v1/merchants/${merchant}/payment-intents HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${key}\r\n\r\n`;

/** The service started with `env`, a merchant, and a connection that has had one answer to a list of its intents. */
async function answeredOnce(t: Test, env: Record<string, string> = {}) {
  const { app, base } = await startTestApp(t, env);
  const a = await merchantWithKey(app);
  const { socket, state } = await connection(t, base);
  const ask = () => socket.write(listRequest(a.merchant, a.key));
  ask();
  await until("the first answer", async () => state.answers.length === 1, 10_000, () => state.text.slice(0, 300));
  t.match(state.text, /^HTTP\/1\.1 200 /, "answered");
  return { state, ask };
}

t.test("by default a connection idle past Node's own 5 s (6 s with its buffer) still answers", async (t) => {
  const { state, ask } = await answeredOnce(t);
  t.match(state.text, /\r\nKeep-Alive: timeout=75\r\n/i, "the answer says 75 s");
  // Idle past the moment Node's default closes (5 s, and its 1 s buffer), then a second request
  // on the same connection: it is answered, where at the default it met a closed connection.
  await new Promise((r) => setTimeout(r, 6500));
  ask();
  await until("the second answer on the same connection", async () => state.answers.length === 2 || state.endedAt !== undefined || state.error !== undefined, 10_000);
  t.equal(state.answers.length, 2, `the second request was answered (the server ${state.endedAt === undefined ? "kept" : "closed"} the connection${state.error ? `; ${state.error.message}` : ""})`);
});

t.test("HTTP_KEEP_ALIVE_SECONDS sets it: the server closes a connection idle that long, and not much later", async (t) => {
  const { state } = await answeredOnce(t, { HTTP_KEEP_ALIVE_SECONDS: "1" });
  t.match(state.text, /\r\nKeep-Alive: timeout=1\r\n/i, "the answer says 1 s");
  // 1 s, and Node's 1 s buffer: well before the 6 s of Node's default.
  await until("the server closed the idle connection", async () => state.endedAt !== undefined, 4_000, () => "still open 4 s after the answer");
  const idle = state.endedAt! - state.answers[0]!;
  t.ok(idle >= 900 && idle < 4000, `closed ${idle} ms after the answer`);
  t.equal(state.error, undefined, "closed cleanly, not reset");
});
