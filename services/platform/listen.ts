import { randomInt } from "node:crypto";
import { readFileSync } from "node:fs";
import type http from "node:http";
import net, { type AddressInfo, type Server } from "node:net";

/** Listens and resolves with the bound port (port 0 picks a free one). */
export async function listenOn(server: Server, host: string, port: number, o: { reusePort?: boolean } = {}): Promise<number> {
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen({ port, host, ...(o.reusePort ? { reusePort: true } : {}) }, () => resolve());
  });
  return (server.address() as AddressInfo).port;
}

/**
 * How many listening sockets a server that takes many new connections (the merchants' API) binds
 * on its port, on Linux. Node's event loop accepts one connection per listening socket per turn
 * (libuv's "don't accept() connections in a loop", 2022), so while the loop is busy, new
 * connections wait in the kernel's queue a turn each: at a burst of creates on a busy machine
 * (the merchant-path bench at 300 a second), a client's pool opened 256 connections within 2 s
 * and the service accepted them 10–12 a second, so requests on its new connections waited up to
 * 12 s before the service read them, while those on open connections were read within 20 ms at
 * the p50. Each socket bound with SO_REUSEPORT has its own queue, which the kernel fills by a hash
 * of the client's address and port, and each is accepted from once a turn.
 */
export const apiAcceptors = 32;

/**
 * Listens on `acceptors` sockets bound together to the port (SO_REUSEPORT; one socket where the
 * platform has no such option), each handing what it accepts to `server`. A port given (not 0)
 * must be free first, as for one socket: a second instance started on it fails with EADDRINUSE
 * rather than joining this one's sockets and taking part of its connections.
 */
async function listenShared(server: http.Server, host: string, port: number, acceptors: number): Promise<{ port: number; more: Server[] }> {
  if (acceptors <= 1 || process.platform !== "linux") return { port: await listenOn(server, host, port), more: [] };
  if (port !== 0) {
    const probe = net.createServer();
    await listenOn(probe, host, port);
    await new Promise((resolve) => probe.close(resolve));
  }
  const bound = await listenOn(server, host, port, { reusePort: true });
  const more: Server[] = [];
  try {
    for (let i = 1; i < acceptors; i++) {
      const acceptor = net.createServer((socket) => server.emit("connection", socket));
      await listenOn(acceptor, host, bound, { reusePort: true });
      more.push(acceptor);
    }
  } catch (err) {
    for (const acceptor of more) acceptor.close();
    server.close();
    throw err;
  }
  return { port: bound, more };
}

/**
 * Starts an HTTP/1.1 server. close() stops accepting connections, lets every request already
 * received finish with its response, and then closes its connection: a keep-alive client's
 * next request goes to a new connection (refused, or another instance) instead of reaching a
 * server that is going away.
 */
export async function listen(server: http.Server, host: string, port: number, o: { acceptors?: number } = {}): Promise<{ port: number; close(): Promise<void> }> {
  let closing = false;
  const open = new Set<http.ServerResponse>();
  // Runs before the application's handler, so a request that arrives on a kept-alive
  // connection during close() is answered, and its connection closed after the answer.
  server.prependListener("request", (_req: http.IncomingMessage, res: http.ServerResponse) => {
    if (closing) res.setHeader("Connection", "close");
    open.add(res);
    res.once("close", () => open.delete(res));
    res.once("finish", () => {
      open.delete(res);
      // A response that went out with keep-alive (it began before close()) leaves its
      // connection idle: server.close() alone would wait for the client's keep-alive timeout,
      // and meanwhile serve whatever that client sends next, without end under steady load.
      if (closing) setImmediate(() => server.closeIdleConnections());
    });
  });
  let closed: Promise<void> | undefined;
  const bound = await listenShared(server, host, port, o.acceptors ?? 1);
  return {
    port: bound.port,
    close: () =>
      (closed ??= new Promise<void>((resolve) => {
        closing = true;
        for (const res of open) {
          if (!res.headersSent) res.setHeader("Connection", "close");
          // A stream of events (Server-Sent Events) would never finish: it ends here, and its
          // client reconnects, to another instance or once this one is back.
          else if (String(res.getHeader("content-type") ?? "").startsWith("text/event-stream")) res.end();
        }
        // Each acceptor counts the connections it accepted: closed, it calls back once they have ended too.
        const stopped = Promise.all(bound.more.map((acceptor) => new Promise((ended) => acceptor.close(ended))));
        server.close(() => void stopped.then(() => resolve()));
        server.closeIdleConnections();
      })),
  };
}

/**
 * A loopback port nothing listened on a moment ago, for a process started next to listen on. Taken
 * below the kernel's ephemeral range where it is known (Linux): a port from listen(0) is an
 * ephemeral one, which any outgoing connection may take as its source port before that process
 * listens on it (seen in CI, with many tests connecting at once: EADDRINUSE at start).
 */
export async function freePort(): Promise<number> {
  const below = ephemeralStart();
  for (let i = 0; below !== undefined && i < 50; i++) {
    const port = await portIfFree(lowestPicked + randomInt(below - lowestPicked));
    if (port !== undefined) return port;
  }
  return (await portIfFree(0)) as number;
}

/** Ports picked from here up to the ephemeral range: above the well-known services'. */
const lowestPicked = 10_000;

/** Where the kernel's ephemeral ports start, if it says and leaves room below for ours. */
function ephemeralStart(): number | undefined {
  try {
    const start = Number(readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8").trim().split(/\s+/)[0]);
    return Number.isInteger(start) && start > lowestPicked + 1000 ? start : undefined;
  } catch {
    return undefined;
  }
}

/** The port if it can be listened on on the loopback (0: one the kernel picks), else undefined. */
function portIfFree(port: number): Promise<number | undefined> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once("error", (err: NodeJS.ErrnoException) => (port !== 0 && (err.code === "EADDRINUSE" || err.code === "EACCES") ? resolve(undefined) : reject(err)));
    server.listen(port, "127.0.0.1", () => {
      const bound = (server.address() as AddressInfo).port;
      server.close(() => resolve(bound));
    });
  });
}
