import type http from "node:http";
import type { AddressInfo } from "node:net";

/** Starts an HTTP/1.1 server; close() finishes in-flight requests and drops idle connections. */
export async function listen(server: http.Server, host: string, port: number): Promise<{ port: number; close(): Promise<void> }> {
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => resolve());
  });
  return {
    port: (server.address() as AddressInfo).port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeIdleConnections();
      }),
  };
}
