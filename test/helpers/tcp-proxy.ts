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
  /** As freeze(), and connections made later are accepted but go silent too: a database host gone from the network. */
  blackhole(): void;
  /**
   * Relays new connections to 127.0.0.1:port from now on and cuts the open ones, as a virtual IP
   * or a DNS name moved to another server does (ends a blackhole).
   */
  retarget(port: number): void;
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
  let target = targetPort;
  let silent = false;
  const server = net.createServer((client) => {
    stats.connections++;
    if (silent) {
      track(client);
      client.pause();
      return;
    }
    const upstream = net.connect(target, "127.0.0.1");
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
  const proxy: TcpProxy = {
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
    blackhole() {
      silent = true;
      proxy.freeze();
    },
    retarget(port: number) {
      target = port;
      silent = false;
      for (const s of sockets) s.destroy();
    },
  };
  return proxy;
}
