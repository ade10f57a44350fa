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

/** Starts an HTTP/1.1 server; close() finishes in-flight requests and drops idle connections. */
export async function listen(server: http.Server, host: string, port: number): Promise<{ port: number; close(): Promise<void> }> {
  return {
    port: await listenOn(server, host, port),
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeIdleConnections();
      }),
  };
}

/** A loopback port nothing listened on a moment ago. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as AddressInfo;
      server.close(() => resolve(port));
    });
  });
}
