import http from "node:http";
import http2 from "node:http2";
import type net from "node:net";
import { createContextValues, type ConnectRouter, type Interceptor } from "@connectrpc/connect";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import { dashboardCallHeader, dashboardCallKey, isProvenDashboardCall } from "../auth/dashboard-sessions.ts";
import { clientAddressKey, type ClientAddresses } from "../platform/client-address.ts";
import { listen } from "../platform/listen.ts";
import { boundary, compressions, jsonBodyDecoder, withDocumentedErrors } from "./documented-errors.ts";
import { sniff } from "./protocol-sniff.ts";
import { addReflection, reflectionServices, type ReflectionGate } from "./reflection.ts";

export interface Listening {
  port: number;
  close(): Promise<void>;
}

export interface RpcServerOptions {
  /** The largest request message accepted (BODY_LIMIT_BYTES, as for REST). */
  bodyLimitBytes: number;
  /** A connection with no traffic for this long is closed (default 60 s). */
  idleTimeoutMs?: number;
  /** Serves gRPC server reflection (v1 and v1alpha), answering while the gate allows. Unset: not served. */
  reflection?: ReflectionGate;
  /** Who a call comes from, for the routes' per-client limits. Unset: the socket's peer. */
  clientAddresses?: ClientAddresses;
  /** The keys a gateway-only process's dashboard proves its calls with (dashboardCallSecret). Unset: no call is the dashboard's. */
  dashboardCallSecrets?: readonly Buffer[];
}

/** How long close() lets in-flight calls finish before it drops the connections left. */
const closeGraceMs = 10_000;

/**
 * The rpc role: gRPC, gRPC-Web and Connect, over h2c and HTTP/1.1 on the same port. Browsers and
 * plain curl speak HTTP/1.1 to an http:// URL, gRPC clients HTTP/2 with prior knowledge; each
 * connection is told apart by its first bytes.
 */
export async function startRpcServer(
  routes: (router: ConnectRouter) => void,
  interceptors: Interceptor[],
  host: string,
  port: number,
  options: RpcServerOptions,
): Promise<Listening> {
  const limit = options.bodyLimitBytes;
  const handler = connectNodeAdapter({
    routes: (router) => {
      routes(router);
      if (options.reflection) addReflection(router, [...new Set(router.handlers.map((h) => h.service))], options.reflection, [boundary]);
      // connectNodeAdapter builds its path table from this array after routes() returns.
      // Reflection is gRPC's own protocol, not the payments API: its errors are plain statuses.
      router.handlers.forEach((h, i) => {
        if (!reflectionServices.includes(h.service)) router.handlers[i] = withDocumentedErrors(h, limit);
      });
    },
    interceptors: [boundary, ...interceptors],
    contextValues: (req) => {
      const forwarded = req.headers["x-forwarded-for"];
      const peer = req.socket.remoteAddress;
      const address = options.clientAddresses ? options.clientAddresses.of(peer, Array.isArray(forwarded) ? forwarded.join(",") : forwarded) : (peer ?? "unknown");
      const values = createContextValues().set(clientAddressKey, address);
      const header = (name: string) => (typeof req.headers[name] === "string" ? (req.headers[name] as string) : undefined);
      const secrets = options.dashboardCallSecrets;
      if (secrets && isProvenDashboardCall(secrets, header("authorization"), header(dashboardCallHeader))) values.set(dashboardCallKey, true);
      return values;
    },
    acceptCompression: compressions,
    // Connect checks the declared size (Content-Length, or a gRPC envelope's length prefix) before
    // buffering, and stops reading once a body without one passes the limit.
    readMaxBytes: limit,
    // REST refuses unknown fields; so do Connect and gRPC JSON.
    // textDecoder is missing from the adapter's type, yet Connect's JSON serialization reads it
    // (createJsonSerialization, @connectrpc/connect 2.1.2); the tests of invalid_json catch a change.
    jsonOptions: { ignoreUnknownFields: false, textDecoder: jsonBodyDecoder } as { ignoreUnknownFields: boolean },
  });
  const idleMs = options.idleTimeoutMs ?? 60_000;
  const h2 = http2.createServer(handler);
  // A client that stops mid-upload after a refusal leaves its stream half open, and the session
  // would never close; an idle connection of a well-behaved client is simply made again.
  h2.setTimeout(idleMs);
  let closing = false;
  const sessions = new Set<http2.Http2Session>();
  h2.on("session", (session) => {
    sessions.add(session);
    session.once("close", () => sessions.delete(session));
    // Its preface came during close(): it gets the GOAWAY the others got.
    if (closing) session.close();
  });
  // The HTTP/1.1 server owns the listening socket, so Node's own HTTP/1.1 connection tracking
  // (idle keep-alive, header and request timeouts, closeIdleConnections) holds for its share.
  const h1 = http.createServer(handler);
  h1.setTimeout(idleMs);
  const h1Connection = h1.listeners("connection");
  if (h1Connection.length !== 1) throw new Error("node:http changed: expected one connection listener on a new server");
  h1.removeAllListeners("connection");
  const undecided = new Set<net.Socket>();
  h1.on("connection", (socket: net.Socket) => {
    undecided.add(socket);
    sniff(socket, idleMs, (isH2) => {
      undecided.delete(socket);
      // The HTTP/2 session reads the bytes put back by itself; the HTTP/1.1 parser gets them once
      // the socket flows again.
      if (isH2) h2.emit("connection", socket);
      else {
        h1Connection[0]!.call(h1, socket);
        socket.resume();
      }
    });
  });
  const server = await listen(h1, host, port);
  return {
    port: server.port,
    close: () => {
      closing = true;
      // Nothing sent yet, so nothing in flight.
      for (const socket of undecided) socket.destroy();
      // GOAWAY: in-flight calls finish, new ones go elsewhere. HTTP/1.1: listen() answers what it has
      // received with Connection: close and drops idle keep-alive connections.
      for (const session of sessions) session.close();
      // A session whose client stopped mid-body after its answer (a refused upload, say) never
      // closes by itself: it stops reading its socket and so never sees the client leave.
      const grace = setTimeout(() => {
        for (const session of sessions) session.destroy();
        h1.closeAllConnections();
      }, closeGraceMs);
      return server.close().finally(() => clearTimeout(grace));
    },
  };
}
