import https from "node:https";
import type { ErrorClass } from "./classify.ts";
import { storableExcerpt } from "./excerpt.ts";
import type { Target } from "./url-policy.ts";

/** At most this much of a response is read; the rest is discarded with the connection. */
export const maxResponseBytes = 64 * 1024;
/** The part of the response kept with the attempt (made storable: see storableExcerpt). */
export const excerptBytes = 1024;

export interface Request {
  url: URL;
  /** The checked address to connect to: the connection is pinned to it, never resolved again. */
  target: Target;
  body: Buffer;
  headers: Record<string, string>;
  timeoutMs: number;
  /** The worker's connections (deliveryAgent). */
  agent: https.Agent;
}

export type Response =
  | { statusCode: number; excerpt: string }
  | { error: ErrorClass; detail: string };

/**
 * A worker's connections. The agent keys them by address, port and server name, so a kept-alive
 * connection is only ever reused for the address that was checked. It keeps as many idle
 * connections per endpoint as the worker runs attempts: with fewer, every attempt past that number
 * would close its connection after the response and the next would open one again (a TCP and TLS
 * handshake per attempt under load).
 */
export function deliveryAgent(concurrency: number): https.Agent {
  return new https.Agent({ keepAlive: true, maxSockets: concurrency, maxFreeSockets: concurrency, scheduling: "lifo" });
}

/** Why a request failed, from Node's error codes. */
export function errorClassOf(err: NodeJS.ErrnoException): ErrorClass {
  const code = err.code ?? "";
  if (["ENOTFOUND", "EAI_AGAIN", "EAI_FAIL", "EAI_NONAME"].includes(code)) return "dns";
  if (["ECONNREFUSED", "EHOSTUNREACH", "ENETUNREACH", "EADDRNOTAVAIL", "ETIMEDOUT"].includes(code)) return "connect";
  if (/^(ERR_TLS_|ERR_SSL_|CERT_|UNABLE_TO_|DEPTH_ZERO_|SELF_SIGNED_|HOSTNAME_MISMATCH)/.test(code) || /certificate|SSL|TLS/.test(err.message)) return "tls";
  return "transport";
}

/** One POST with a hard deadline over connect, headers and the (capped) body; redirects are not followed. */
export function send(req: Request): Promise<Response> {
  return new Promise((resolve) => {
    let settled = false;
    const done = (r: Response) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve(r);
    };
    const request = https.request(
      {
        host: req.target.address,
        port: req.target.port,
        servername: req.target.servername,
        path: req.url.pathname + req.url.search,
        method: "POST",
        headers: { ...req.headers, host: req.url.host, "content-length": String(req.body.length) },
        agent: req.agent,
      },
      (res) => {
        const chunks: Buffer[] = [];
        let size = 0;
        const finish = () => done({ statusCode: res.statusCode ?? 0, excerpt: storableExcerpt(Buffer.concat(chunks), excerptBytes) });
        res.on("data", (chunk: Buffer) => {
          if (size < excerptBytes) chunks.push(chunk);
          size += chunk.length;
          if (size > maxResponseBytes) {
            finish();
            res.destroy();
          }
        });
        res.on("end", finish);
        // The status is known; a body cut short does not change the outcome.
        res.on("error", finish);
        res.on("aborted", finish);
      },
    );
    const timer = setTimeout(() => {
      done({ error: "timeout", detail: `no complete response within ${req.timeoutMs} ms` });
      request.destroy();
    }, req.timeoutMs);
    request.on("error", (err: NodeJS.ErrnoException) => done({ error: errorClassOf(err), detail: err.code ?? err.message }));
    request.end(req.body);
  });
}
