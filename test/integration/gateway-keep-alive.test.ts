// A merchant's pooled connection to the REST port stays usable while it is idle for up to
// HTTP_KEEP_ALIVE_SECONDS (75 s by default), not Node's own 5 s: a client that sends on a
// connection as the server closes it gets a reset, and the merchant-path bench saw a create fail
// with ECONNRESET on a connection reused after 5 988 ms idle. The server says how long in each
// answer's Keep-Alive header, and closes the connection once that time has passed idle. Real HTTP
// against the service with every role.
import http from "node:http";
import net from "node:net";
import t from "tap";
import { merchantWithKey, startTestApp, until } from "../helpers/harness.ts";

interface Answer {
  status: number;
  keepAlive: string | undefined;
  reused: boolean;
  localPort: number | undefined;
}

/** A GET of the merchant's intents through `agent`. */
function get(base: string, path: string, key: string, agent: http.Agent): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = http.get(new URL(path, base), { agent, headers: { authorization: `Bearer ${key}` } }, (res) => {
      res.resume();
      res.on("end", () =>
        resolve({ status: res.statusCode ?? 0, keepAlive: [res.headers["keep-alive"]].flat()[0], reused: req.reusedSocket, localPort: req.socket?.localPort }),
      );
    });
    req.on("error", reject);
  });
}

t.test("by default an idle connection is kept 75 s: one idle past Node's 5 s is used again", async (t) => {
  const { app, base } = await startTestApp(t);
  const a = await merchantWithKey(app);
  const path = `/api/v1/merchants/${a.merchant}/payment-intents`;
  // One connection, kept between requests as a merchant's client pool keeps it.
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  t.teardown(() => agent.destroy());
  const first = await get(base, path, a.key, agent);
  t.equal(first.status, 200);
  t.equal(first.keepAlive, "timeout=75", "the answer says how long the server keeps the connection idle");
  // Idle past Node's own 5 s (and its agent's margin under it), then used again.
  await new Promise((r) => setTimeout(r, 6500));
  const second = await get(base, path, a.key, agent);
  t.equal(second.status, 200);
  t.ok(second.reused, "the second request went over the first one's connection");
  t.equal(second.localPort, first.localPort, "the same connection");
});

t.test("HTTP_KEEP_ALIVE_SECONDS sets it: the server closes a connection idle that long", async (t) => {
  const { app, base } = await startTestApp(t, { HTTP_KEEP_ALIVE_SECONDS: "1" });
  const a = await merchantWithKey(app);
  const { port } = new URL(base);
  // A raw connection: a client's agent would close it itself on the header's word.
  const socket = net.connect(Number(port), "127.0.0.1");
  t.teardown(() => socket.destroy());
  let text = "";
  let closedAt: number | undefined;
  socket.on("data", (d: Buffer) => (text += d.toString("utf8")));
  socket.on("end", () => (closedAt = Date.now()));
  await new Promise<void>((resolve) => socket.once("connect", () => resolve()));
  socket.write(`GET /api/v1/merchants/${a.merchant}/payment-intents HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${a.key}\r\n\r\n`);
  await until("the answer", async () => /\r\n\r\n/.test(text) && /"data"/.test(text), 10_000);
  const answeredAt = Date.now();
  t.match(text, /^HTTP\/1\.1 200 /, "answered");
  t.match(text, /\r\nKeep-Alive: timeout=1\r\n/i, "the answer says 1 s");
  await until("the server closed the idle connection", async () => closedAt !== undefined, 10_000);
  t.ok(closedAt! - answeredAt >= 900, `closed ${closedAt! - answeredAt} ms after the answer, once idle for the second`);
});
