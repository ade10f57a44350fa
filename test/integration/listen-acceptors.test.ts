import http from "node:http";
import net from "node:net";
import t from "tap";
import { apiAcceptors, freePort, listen } from "../../services/platform/listen.ts";

/**
 * The API's listening sockets (platform/listen.ts): new connections accepted while the event loop
 * is busy, many per turn, not one; everything they carry answered; the port not shared with
 * another instance; close() closing every socket.
 */

const host = "127.0.0.1";

/** A server answering every request with its path, and every connection it was handed. */
function pathServer() {
  const connections: net.Socket[] = [];
  const server = http.createServer((req, res) => res.end(req.url));
  server.on("connection", (socket: net.Socket) => connections.push(socket));
  return { server, connections };
}

/**
 * Keeps the event loop busy, each turn 2 ms of work as a loaded service's turn has, and counts the
 * turns until `done` holds (at most `limit`).
 */
async function turnsUntil(done: () => boolean, limit: number): Promise<number> {
  let turns = 0;
  await new Promise<void>((resolve) => {
    const turn = () => {
      const until = performance.now() + 2;
      while (performance.now() < until);
      turns++;
      if (done() || turns >= limit) resolve();
      else setImmediate(turn);
    };
    setImmediate(turn);
  });
  return turns;
}

/** Opens `n` connections at once; the kernel completes each before the server accepts it. */
function connectMany(port: number, n: number): net.Socket[] {
  return Array.from({ length: n }, () => net.connect(port, host).on("error", () => {}));
}

/** A request on a raw connection, and the body of its answer. */
function ask(socket: net.Socket, path: string): Promise<string> {
  return new Promise((resolve, reject) => {
    let text = "";
    socket.setEncoding("utf8");
    socket.on("data", (d: string) => {
      text += d;
      const body = text.split("\r\n\r\n")[1];
      if (body !== undefined && body.length >= path.length) resolve(body);
    });
    socket.on("error", reject);
    socket.write(`GET ${path} HTTP/1.1\r\nHost: x\r\n\r\n`);
  });
}

t.test("a burst of new connections to a busy server is accepted many a turn, and each is answered", async (t) => {
  const { server, connections } = pathServer();
  const api = await listen(server, host, 0, { acceptors: apiAcceptors });
  t.teardown(() => api.close());
  const clients = connectMany(api.port, 200);
  t.teardown(() => clients.forEach((c) => c.destroy()));
  const turns = await turnsUntil(() => connections.length >= 200, 1_000);
  t.equal(connections.length, 200, "every connection accepted");
  // One listening socket accepts one a turn: 200 turns at least. The kernel spreads the
  // connections over the sockets by a hash, so some take more than their share.
  t.ok(turns <= 60, `accepted within ${turns} busy turns of the event loop (at most 60)`);
  const answers = await Promise.all(clients.map((c, i) => ask(c, `/c${i}`)));
  t.same(answers, clients.map((_, i) => `/c${i}`), "each connection's request answered on it");
});

t.test("one listening socket: one new connection a busy turn (why the API binds more)", async (t) => {
  const { server, connections } = pathServer();
  const api = await listen(server, host, 0);
  t.teardown(() => api.close());
  const clients = connectMany(api.port, 50);
  t.teardown(() => clients.forEach((c) => c.destroy()));
  const turns = await turnsUntil(() => connections.length >= 50, 1_000);
  t.equal(connections.length, 50);
  t.ok(turns >= 45, `50 connections took ${turns} busy turns`);
});

t.test("a port in use is refused, and a second instance does not join the first's sockets", async (t) => {
  // Another program's listener, without SO_REUSEPORT.
  const other = net.createServer();
  await new Promise<void>((resolve) => other.listen(0, host, resolve));
  t.teardown(() => other.close());
  const taken = (other.address() as net.AddressInfo).port;
  await t.rejects(listen(pathServer().server, host, taken, { acceptors: apiAcceptors }), { code: "EADDRINUSE" });

  // Two instances given the same port: the first listens, the second is refused, and every
  // connection reaches the first.
  const port = await freePort();
  const first = pathServer();
  const api = await listen(first.server, host, port, { acceptors: apiAcceptors });
  t.teardown(() => api.close());
  const second = pathServer();
  await t.rejects(listen(second.server, host, port, { acceptors: apiAcceptors }), { code: "EADDRINUSE" });
  const clients = connectMany(port, 64);
  t.teardown(() => clients.forEach((c) => c.destroy()));
  await Promise.all(clients.map((c, i) => ask(c, `/${i}`)));
  t.equal(second.connections.length, 0, "the second instance was handed nothing");
});

t.test("close() stops every socket and ends the connections they accepted", async (t) => {
  const { server, connections } = pathServer();
  const api = await listen(server, host, 0, { acceptors: apiAcceptors });
  // Kept-alive connections, idle after their answer, over many of the sockets.
  const clients = connectMany(api.port, 64);
  await Promise.all(clients.map((c, i) => ask(c, `/${i}`)));
  t.equal(connections.length, 64);
  const ended = clients.map((c) => new Promise<void>((resolve) => c.once("close", () => resolve())));
  await api.close();
  await Promise.all(ended);
  t.pass("close() resolved, and every idle connection was closed");
  const refused = await Promise.all(
    connectMany(api.port, 32).map((c) => new Promise<string>((resolve) => c.once("error", (err: NodeJS.ErrnoException) => resolve(err.code ?? "")).once("connect", () => resolve("connected")))),
  );
  t.same([...new Set(refused)], ["ECONNREFUSED"], "no socket left listening");
});
