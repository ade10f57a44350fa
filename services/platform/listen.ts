import { randomInt } from "node:crypto";
import { readFileSync } from "node:fs";
import type http from "node:http";
import net, { type AddressInfo, type Server } from "node:net";

/** Listens and resolves with the bound port (port 0 picks a free one). */
export async function listenOn(server: Server, host: string, port: number): Promise<number> {
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => resolve());
  });
  return (server.address() as AddressInfo).port;
}

/**
 * Starts an HTTP/1.1 server. close() stops accepting connections, lets every request already
 * received finish with its response, and then closes its connection: a keep-alive client's
 * next request goes to a new connection (refused, or another instance) instead of reaching a
 * server that is going away.
 */
export async function listen(server: http.Server, host: string, port: number): Promise<{ port: number; close(): Promise<void> }> {
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
  return {
    port: await listenOn(server, host, port),
    close: () =>
      (closed ??= new Promise<void>((resolve) => {
        closing = true;
        for (const res of open) {
          if (!res.headersSent) res.setHeader("Connection", "close");
          // A stream of events (Server-Sent Events) would never finish: it ends here, and its
          // client reconnects, to another instance or once this one is back.
          else if (String(res.getHeader("content-type") ?? "").startsWith("text/event-stream")) res.end();
        }
        server.close(() => resolve());
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
