// A local HTTPS webhook receiver for tests, with a throwaway CA made by `openssl`.
//
//   const ca = await makeTestCa(t, ["hooks.example.test"]);
//   trustTestCa(ca.caPem);                       // like NODE_EXTRA_CA_CERTS, for this process
//   const rx = await startReceiver(t, { key: ca.key, cert: ca.cert });
//   // POST to https://hooks.example.test:<rx.port>/… while connecting to 127.0.0.1
//   const [req] = await rx.waitFor(1);
import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import type http from "node:http";
import https from "node:https";
import type { AddressInfo, Socket } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import tls from "node:tls";
import { promisify } from "node:util";

const run = promisify(execFile);

interface Teardown {
  teardown(fn: () => unknown): void;
}

export interface TestCa {
  /** PEM of the self-signed CA certificate. */
  caPem: string;
  /** Path of the CA certificate (e.g. for NODE_EXTRA_CA_CERTS of a child process). */
  caFile: string;
  /** PEM of the server's private key. */
  key: string;
  /** PEM of the server certificate, signed by the CA. */
  cert: string;
  /** The temp dir holding all of the above; removed at teardown. */
  dir: string;
}

// Hostnames go into an openssl config file, so allow only plain DNS names
// (optionally a leading wildcard label): no spaces, commas, newlines or quotes.
const dnsName = /^(\*\.)?[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)*$/;

/**
 * Creates, in a fresh temp dir removed at teardown, an EC P-256 CA
 * (basicConstraints CA:TRUE, keyUsage keyCertSign) and a server key plus
 * certificate signed by it: subjectAltName DNS:<each hostname> and
 * IP:127.0.0.1, extendedKeyUsage serverAuth, valid for 3 days.
 */
export async function makeTestCa(t: Teardown, hostnames: string[]): Promise<TestCa> {
  if (hostnames.length === 0) throw new Error("makeTestCa: at least one hostname is needed");
  for (const h of hostnames) {
    if (!dnsName.test(h) || h.length > 253) throw new Error(`makeTestCa: not a plain DNS name: ${JSON.stringify(h)}`);
  }
  const dir = await mkdtemp(path.join(tmpdir(), "test-ca-"));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const f = (name: string) => path.join(dir, name);
  const san = [...hostnames.map((h) => `DNS:${h}`), "IP:127.0.0.1"].join(", ");

  // Our own config, so nothing depends on the system openssl.cnf.
  await writeFile(
    f("openssl.cnf"),
    [
      "[req]",
      "distinguished_name = dn",
      "prompt = no",
      "[dn]",
      "CN = placeholder",
      "[v3_ca]",
      "basicConstraints = critical, CA:TRUE",
      "keyUsage = critical, keyCertSign, cRLSign",
      "subjectKeyIdentifier = hash",
      "[v3_server]",
      "basicConstraints = critical, CA:FALSE",
      "keyUsage = critical, digitalSignature",
      "extendedKeyUsage = serverAuth",
      `subjectAltName = ${san}`,
      "subjectKeyIdentifier = hash",
      "authorityKeyIdentifier = keyid:always",
      "",
    ].join("\n"),
  );
  const cnf = f("openssl.cnf");
  const genkey = (out: string) => run("openssl", ["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", out]);

  await Promise.all([genkey(f("ca.key")), genkey(f("server.key"))]);
  await run("openssl", [
    "req", "-x509", "-new", "-config", cnf, "-extensions", "v3_ca",
    "-key", f("ca.key"), "-subj", `/CN=Test CA ${randomBytes(4).toString("hex")}`,
    "-sha256", "-days", "3", "-out", f("ca.crt"),
  ]);
  await run("openssl", [
    "req", "-new", "-config", cnf, "-key", f("server.key"), "-subj", `/CN=${hostnames[0]}`, "-out", f("server.csr"),
  ]);
  await run("openssl", [
    "x509", "-req", "-in", f("server.csr"), "-CA", f("ca.crt"), "-CAkey", f("ca.key"),
    "-set_serial", `0x${randomBytes(16).toString("hex").replace(/^./, "1")}`,
    "-extfile", cnf, "-extensions", "v3_server", "-sha256", "-days", "3", "-out", f("server.crt"),
  ]);

  const [caPem, key, cert] = await Promise.all([f("ca.crt"), f("server.key"), f("server.crt")].map((p) => readFile(p, "utf8")));
  return { caPem: caPem!, caFile: f("ca.crt"), key: key!, cert: cert!, dir };
}

/**
 * Adds the CA to this process's (this thread's) default TLS trust store, the
 * way NODE_EXTRA_CA_CERTS would: TLS clients that pass no `ca` option,
 * including `https.request` via the global agent, trust it from the next
 * connection on. Call it before the first connection that should use it
 * (the https agent may reuse sessions and keep-alive sockets made earlier).
 */
export function trustTestCa(caPem: string): void {
  tls.setDefaultCACertificates([...tls.getCACertificates("default"), caPem]);
}

export interface RecordedRequest {
  /** Date.now() when the request (its headers) arrived. */
  at: number;
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  /** The exact raw body bytes. */
  body: Buffer;
  /** Date.now() when its exchange ended (answered, or the client gave up): unset while it is open. */
  closedAt?: number;
}

export interface Reply {
  status: number;
  body?: string | Buffer;
  headers?: Record<string, string>;
  /** Wait this long before answering. */
  delayMs?: number;
  /** Never answer (the connection is destroyed at teardown). */
  hang?: boolean;
  /** Destroy the socket without any response. */
  destroy?: boolean;
}

/** `n` is the 1-based index of this request in `receiver.requests`. */
export type Responder = (req: RecordedRequest, n: number) => Reply | Promise<Reply>;

export interface Receiver {
  port: number;
  /** Every request, in the order its body finished arriving. */
  requests: RecordedRequest[];
  setResponder(fn: Responder): void;
  /** Resolves with a copy of `requests` once at least `count` were recorded. */
  waitFor(count: number, timeoutMs?: number): Promise<RecordedRequest[]>;
}

/**
 * The most requests open at once among `requests` (each open from `at` to `closedAt`, or still
 * open): how many the receiver was made to wait on together.
 */
export function mostOpenAtOnce(requests: readonly RecordedRequest[]): number {
  const edges = requests.flatMap((r) => [
    { t: r.at, d: 1 },
    { t: r.closedAt ?? Infinity, d: -1 },
  ]);
  // A close at the same moment as an open comes first: the two did not overlap.
  edges.sort((a, b) => a.t - b.t || a.d - b.d);
  let open = 0;
  let most = 0;
  for (const e of edges) most = Math.max(most, (open += e.d));
  return most;
}

const defaultResponder: Responder = () => ({ status: 200, body: "ok" });

/**
 * An HTTPS server on 127.0.0.1 with an ephemeral port, closed at teardown
 * (all connections, including hanging ones, are destroyed). A responder that
 * throws produces a 500 whose body is the error message.
 */
export async function startReceiver(t: Teardown, opts: { key: string; cert: string; respond?: Responder }): Promise<Receiver> {
  let responder = opts.respond ?? defaultResponder;
  const requests: RecordedRequest[] = [];
  const waiters = new Set<() => void>();
  const sockets = new Set<Socket>();
  const timers = new Set<NodeJS.Timeout>();
  let closed = false;

  const sleep = (ms: number) =>
    new Promise<void>((resolve) => {
      const timer = setTimeout(() => {
        timers.delete(timer);
        resolve();
      }, ms);
      timers.add(timer);
    });

  const server = https.createServer({ key: opts.key, cert: opts.cert }, (req, res) => {
    const at = Date.now();
    let closedAt: number | undefined;
    let recorded: RecordedRequest | undefined;
    res.on("close", () => {
      closedAt = Date.now();
      if (recorded) recorded.closedAt = closedAt;
    });
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("error", () => {});
    req.on("end", () => {
      recorded = {
        at,
        method: req.method ?? "",
        url: req.url ?? "",
        headers: req.headers,
        body: Buffer.concat(chunks),
        ...(closedAt === undefined ? {} : { closedAt }),
      };
      requests.push(recorded);
      const n = requests.length;
      for (const w of [...waiters]) w();
      void answer(recorded, n, req, res);
    });
  });

  async function answer(recorded: RecordedRequest, n: number, req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    let reply: Reply;
    try {
      reply = await responder(recorded, n);
    } catch (err) {
      reply = { status: 500, body: `responder error: ${err instanceof Error ? err.message : String(err)}` };
    }
    if (reply.delayMs) await sleep(reply.delayMs);
    if (closed || res.destroyed) return;
    if (reply.destroy) {
      req.socket.destroy();
      return;
    }
    if (reply.hang) return;
    res.writeHead(reply.status, reply.headers);
    res.end(reply.body);
  }

  server.on("connection", (s: Socket) => {
    sockets.add(s);
    s.on("close", () => sockets.delete(s));
  });
  server.on("tlsClientError", () => {}); // e.g. a client rejecting our cert

  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      server.off("error", reject);
      resolve();
    });
  });

  t.teardown(async () => {
    closed = true;
    for (const timer of timers) clearTimeout(timer);
    timers.clear();
    const done = new Promise<void>((resolve) => server.close(() => resolve()));
    server.closeAllConnections();
    for (const s of sockets) s.destroy();
    await done;
  });

  return {
    port: (server.address() as AddressInfo).port,
    requests,
    setResponder(fn) {
      responder = fn;
    },
    waitFor(count, timeoutMs = 15000) {
      if (requests.length >= count) return Promise.resolve(requests.slice());
      return new Promise((resolve, reject) => {
        const check = () => {
          if (requests.length < count) return;
          waiters.delete(check);
          clearTimeout(timer);
          resolve(requests.slice());
        };
        const timer = setTimeout(() => {
          waiters.delete(check);
          reject(new Error(`receiver.waitFor(${count}): only ${requests.length} request(s) arrived within ${timeoutMs} ms`));
        }, timeoutMs);
        waiters.add(check);
      });
    },
  };
}
