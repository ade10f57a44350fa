import http2 from "node:http2";
import type { ConnectRouter, Interceptor } from "@connectrpc/connect";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import { listenOn } from "../platform/listen.ts";

export interface Listening {
  port: number;
  close(): Promise<void>;
}

/** The rpc role: gRPC, gRPC-Web and Connect over h2c. */
export async function startRpcServer(
  routes: (router: ConnectRouter) => void,
  interceptors: Interceptor[],
  host: string,
  port: number,
): Promise<Listening> {
  const server = http2.createServer(connectNodeAdapter({ routes, interceptors }));
  const sessions = new Set<http2.Http2Session>();
  server.on("session", (session) => {
    sessions.add(session);
    session.once("close", () => sessions.delete(session));
  });
  return {
    port: await listenOn(server, host, port),
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        // GOAWAY: in-flight calls finish, new ones go elsewhere.
        for (const session of sessions) session.close();
      }),
  };
}
