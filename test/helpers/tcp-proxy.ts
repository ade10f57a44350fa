// A loopback TCP relay that counts what passes through it: give each client process its own
// relay to a shared server, and the counts show which process sent what. It forwards
// bytes untouched, so TLS (and certificate checks) are end to end.
import net from "node:net";

interface Teardown {
  teardown(fn: () => unknown): void;
}

export interface TcpProxy {
  port: number;
  /** Connections accepted so far. */
  connections: number;
  /** Bytes the clients sent through it. */
  bytesFromClients: number;
  /**
   * The connections open now go silent both ways, as over a network that drops everything:
   * nothing is relayed, not even a close. Connections made later are relayed as before.
   */
  freeze(): void;
}

/** Listens on 127.0.0.1 (ephemeral port) and relays every connection to 127.0.0.1:targetPort; closed at teardown. */
export async function startTcpProxy(t: Teardown, targetPort: number): Promise<TcpProxy> {
  const sockets = new Set<net.Socket>();
  const track = (s: net.Socket) => {
    sockets.add(s);
    s.on("close", () => sockets.delete(s));
    s.on("error", () => undefined);
  };
  const stats = { connections: 0, bytesFromClients: 0 };
  const pairs = new Set<[net.Socket, net.Socket]>();
  const server = net.createServer((client) => {
    stats.connections++;
    const upstream = net.connect(targetPort, "127.0.0.1");
    track(client);
    track(upstream);
    const pair: [net.Socket, net.Socket] = [client, upstream];
    pairs.add(pair);
    client.on("close", () => pairs.delete(pair));
    client.on("data", (d: Buffer) => (stats.bytesFromClients += d.length));
    client.pipe(upstream);
    upstream.pipe(client);
    client.on("close", () => upstream.destroy());
    upstream.on("close", () => client.destroy());
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => resolve());
  });
  t.teardown(async () => {
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    for (const s of sockets) s.destroy();
    await closed;
  });
  const port = (server.address() as net.AddressInfo).port;
  return {
    port,
    get connections() {
      return stats.connections;
    },
    get bytesFromClients() {
      return stats.bytesFromClients;
    },
    freeze() {
      for (const [client, upstream] of pairs) {
        client.unpipe(upstream);
        upstream.unpipe(client);
        // Unread, the data and the end of each side wait in the kernel.
        client.pause();
        upstream.pause();
      }
      pairs.clear();
    },
  };
}
