// A JSON-RPC proxy between a chain watcher and its node (anvil, or bcoin behind its Bitcoin Core
// relay with `bitcoin: true`), misbehaving on demand as real
// nodes do: down (connections refused), answering for another chain, lagging some blocks behind,
// still syncing, serving blocks padded with a thousand transactions, or (bitcoin) answering an
// empty mempool, or one not loaded yet as a node just restarted does. Requests it does not
// change pass through untouched; batches are answered as batches.
import http from "node:http";
import type net from "node:net";

interface Teardown {
  teardown(fn: () => unknown): void;
}

type Json = Record<string, unknown>;

export interface RpcProxy {
  readonly url: string;
  readonly port: number;
  /** eth_chainId (and net_version) answered with this id instead of the node's. */
  chainId: number | undefined;
  /** Block 0 read by number answered with this hash (a dev chain passing for mainnet, with chainId). */
  genesisHash: string | undefined;
  /** Answers as a node this many blocks behind: a lower head, blocks and logs above it unknown. */
  behind: number;
  /** eth_syncing answers a sync in progress instead of false; getblockchaininfo says initialblockdownload. */
  syncing: boolean;
  /** getblockchaininfo's chain answered with this name (bitcoin: main, test, regtest…). */
  chainName: string | undefined;
  /** Transactions (to no watched address) added to every block read with its transactions. */
  padTransactions: number;
  /** Bitcoin: getrawmempool answers an empty mempool (another node behind a balancer, one restarted without its mempool). */
  emptyMempool: boolean;
  /** Bitcoin: getmempoolinfo answers `loaded: false` (a node restarted, still reading mempool.dat). */
  mempoolUnloaded: boolean;
  /**
   * Answers every request for this method (alone, not in a batch) with a JSON-RPC result of about
   * `bytes` bytes, an array of made-up txids written as it is sent, a piece at a time, so the
   * proxy never holds it (a hostile node answering without end); undefined: as the node answers.
   */
  oversize: { method: string; bytes: number } | undefined;
  /** Rewrites what the node answered to a method (a node that lies); undefined: as it answered. */
  rewrite: ((method: string, result: unknown) => unknown) | undefined;
  /** Rewrites a request's params before it is relayed (a lying node answering for a hash it made up with a real block's); undefined: as asked. */
  rewriteParams: ((method: string, params: unknown[]) => unknown[]) | undefined;
  /**
   * Answers a request itself where this returns a result other than undefined (a node telling of
   * what it made up), with `ask` to ask the node it relays to first; else the request goes on as
   * set above. Its answer is the node's, as the rest of the proxy then sees it.
   */
  intercept: ((method: string, params: unknown[], ask: (method: string, params: unknown[]) => Promise<unknown>) => Promise<unknown>) | undefined;
  /**
   * Answers `[]` to the next eth_getLogs over a range (fromBlock..toBlock, not by blockHash) that
   * holds this height, once, as a replica that lags the one that served the blocks; then undefined.
   */
  emptyLogsAt: number | undefined;
  /** Requests for which this answers true are held, unanswered, until release() (a read that hangs, as under a stalled provider). */
  hold: ((method: string, params: unknown[]) => boolean) | undefined;
  /** Requests held now. */
  readonly held: number;
  /** Relays every held request (as the node answers now) and stops holding. */
  release(): void;
  /** Requests relayed, by method. */
  readonly calls: Map<string, number>;
  /** Called as each HTTP request arrives, before anything else (a bench's clock of the node's first call after up()). */
  onRequest: (() => void) | undefined;
  /** Stops listening and cuts open connections: the node's port refuses connections. */
  down(): Promise<void>;
  /** Listens again on the same port. */
  up(): Promise<void>;
  /** Relays to another node from now on (a node replaced behind a load balancer). */
  retarget(upstreamUrl: string): void;
}

const hex = (n: number) => `0x${n.toString(16)}`;

/** A syntactically valid legacy transaction of about 1 KB (its input is filler), as a node writes it in a full block. */
function fillerTransaction(block: Json, index: number): Json {
  const n = Number.parseInt(String(block.number), 16) || 0;
  const tag = `${n.toString(16).padStart(8, "0")}${index.toString(16).padStart(8, "0")}`;
  return {
    blockHash: block.hash,
    blockNumber: block.number,
    chainId: "0x1",
    from: "0x00000000000000000000000000000000000f1115",
    gas: "0x5208",
    gasPrice: "0x3b9aca00",
    hash: `0x${"f1".repeat(24)}${tag}`,
    input: `0x${"ab".repeat(400)}`,
    nonce: hex(index),
    r: `0x${"11".repeat(32)}`,
    s: `0x${"22".repeat(32)}`,
    to: "0x00000000000000000000000000000000000f1117",
    transactionIndex: hex(1_000_000 + index),
    type: "0x0",
    v: "0x25",
    value: "0x1",
  };
}

/** Listens on 127.0.0.1 (ephemeral port) and relays to `upstreamUrl`; closed at teardown. */
export async function startRpcProxy(t: Teardown, upstreamUrl: string, o: { bitcoin?: boolean } = {}): Promise<RpcProxy> {
  let upstream = upstreamUrl;
  // Bitcoin Core's RPC takes Basic auth: the watcher's header is passed on.
  let authorization: string | undefined;
  const sockets = new Set<net.Socket>();
  const calls = new Map<string, number>();

  async function relay(body: unknown): Promise<unknown> {
    const res = await fetch(upstream, { method: "POST", headers: { "content-type": "application/json", ...(authorization ? { authorization } : {}) }, body: JSON.stringify(body) });
    return res.json();
  }

  /** The node's own head, asked once per incoming request. */
  async function realHead(): Promise<number> {
    if (o.bitcoin) return ((await relay({ jsonrpc: "1.0", id: 1, method: "getblockcount", params: [] })) as { result: number }).result;
    const r = (await relay({ jsonrpc: "2.0", id: 1, method: "eth_blockNumber", params: [] })) as { result: string };
    return Number.parseInt(r.result, 16);
  }

  /** Bitcoin Core's methods, misbehaving as set; undefined: relay as they are. */
  async function answerBitcoin(req: Json, method: string, params: unknown[], limit: () => Promise<number>): Promise<Json | undefined> {
    const reply = (result: unknown) => ({ result, error: null, id: req.id });
    const error = (code: number, message: string) => ({ result: null, error: { code, message }, id: req.id });
    if (method === "getblockchaininfo") {
      const res = (await relay(req)) as Json;
      const info = { ...(res.result as Json) };
      if (proxy.chainName !== undefined) info.chain = proxy.chainName;
      if (proxy.syncing) info.initialblockdownload = true;
      if (proxy.behind > 0) info.blocks = await limit();
      return { ...res, result: info };
    }
    if (method === "getrawmempool" && proxy.emptyMempool) return reply([]);
    if (method === "getmempoolinfo" && proxy.mempoolUnloaded) {
      const res = (await relay(req)) as Json;
      return { ...res, result: { ...(res.result as Json), loaded: false, ...(proxy.emptyMempool ? { size: 0, bytes: 0 } : {}) } };
    }
    if (proxy.behind === 0) return undefined;
    const top = await limit();
    if (method === "getblockcount") return reply(top);
    if (method === "getblockhash" && Number(params[0]) > top) return error(-8, "Block height out of range");
    if (method === "getblock") {
      const res = (await relay(req)) as Json;
      if (res.result && Number((res.result as Json).height) > top) return error(-5, "Block not found");
      return res;
    }
    return undefined;
  }

  /** True while nothing is set to change what the node answers. */
  const honest = () =>
    proxy.chainId === undefined && proxy.genesisHash === undefined && proxy.behind === 0 && !proxy.syncing && proxy.chainName === undefined &&
    proxy.padTransactions === 0 && !proxy.emptyMempool && !proxy.mempoolUnloaded && proxy.rewrite === undefined && proxy.rewriteParams === undefined &&
    proxy.intercept === undefined && proxy.emptyLogsAt === undefined && proxy.hold === undefined;

  let waiting: (() => void)[] = [];
  async function answer(req: Json, limit: () => Promise<number>): Promise<Json> {
    const method = String(req.method);
    calls.set(method, (calls.get(method) ?? 0) + 1);
    if (proxy.rewriteParams) req = { ...req, params: proxy.rewriteParams(method, (req.params ?? []) as unknown[]) };
    const params = (req.params ?? []) as unknown[];
    if (proxy.hold?.(method, params)) await new Promise<void>((resolve) => waiting.push(resolve));
    const reply = (result: unknown) => ({ jsonrpc: "2.0", id: req.id, result });
    if (proxy.intercept) {
      const ask = async (m: string, p: unknown[]) => ((await relay({ jsonrpc: "2.0", id: 1, method: m, params: p })) as Json).result;
      const own = await proxy.intercept(method, params, ask);
      if (own !== undefined) return reply(own);
    }
    if (o.bitcoin) {
      const res = (await answerBitcoin(req, method, params, limit)) ?? ((await relay(req)) as Json);
      return proxy.rewrite && res.result !== undefined && res.result !== null ? { ...res, result: proxy.rewrite(method, res.result) } : res;
    }
    if ((method === "eth_chainId" || method === "net_version") && proxy.chainId !== undefined) {
      return reply(method === "eth_chainId" ? hex(proxy.chainId) : String(proxy.chainId));
    }
    if (method === "eth_syncing" && proxy.syncing) return reply({ startingBlock: "0x0", currentBlock: "0x1", highestBlock: "0xffffff" });
    if (proxy.behind > 0) {
      const top = await limit();
      if (method === "eth_blockNumber") return reply(hex(top));
      if (method === "eth_getBlockByNumber") {
        const tag = params[0];
        const n = tag === "latest" || tag === "pending" || tag === "safe" || tag === "finalized" ? top : Number.parseInt(String(tag), 16);
        if (n > top) return reply(null);
        req = { ...req, params: [hex(n), ...params.slice(1)] };
      }
      if (method === "eth_getLogs") {
        const filter = { ...(params[0] as Json) };
        const to = filter.toBlock === undefined || filter.toBlock === "latest" ? top : Number.parseInt(String(filter.toBlock), 16);
        const from = filter.fromBlock === undefined || filter.fromBlock === "latest" ? top : Number.parseInt(String(filter.fromBlock), 16);
        if (from > top) return reply([]);
        req = { ...req, params: [{ ...filter, fromBlock: hex(from), toBlock: hex(Math.min(to, top)) }] };
      }
    }
    if (method === "eth_getLogs" && proxy.emptyLogsAt !== undefined) {
      const filter = params[0] as Json;
      const [from, to] = [Number.parseInt(String(filter.fromBlock), 16), Number.parseInt(String(filter.toBlock), 16)];
      if (filter.blockHash === undefined && from <= proxy.emptyLogsAt && proxy.emptyLogsAt <= to) {
        proxy.emptyLogsAt = undefined;
        return reply([]);
      }
    }
    let res = (await relay(req)) as Json;
    if (proxy.rewrite) res = { ...res, result: proxy.rewrite(method, res.result) };
    const result = res.result as Json | null | undefined;
    if (method === "eth_getBlockByNumber" && result && proxy.genesisHash !== undefined && Number.parseInt(String(result.number), 16) === 0) {
      return { ...res, result: { ...result, hash: proxy.genesisHash } };
    }
    if ((method === "eth_getBlockByNumber" || method === "eth_getBlockByHash") && result) {
      if (proxy.behind > 0 && Number.parseInt(String(result.number), 16) > (await limit())) return reply(null);
      if (params[1] === true && proxy.padTransactions > 0) {
        const txs = [...(result.transactions as unknown[])];
        for (let i = 0; i < proxy.padTransactions; i++) txs.push(fillerTransaction(result, i));
        return { ...res, result: { ...result, transactions: txs } };
      }
    }
    return res;
  }

  /** A made-up answer of `bytes` bytes, written a piece at a time as the reader takes it; stops when the reader hangs up. */
  async function writeOversize(res: http.ServerResponse, bytes: number, id: unknown): Promise<void> {
    const piece = Buffer.from(`"${"ab".repeat(32)}",`.repeat(1000));
    res.writeHead(200, { "content-type": "application/json" });
    res.write(`{"result":[`);
    for (let sent = 0; sent < bytes && !res.destroyed; sent += piece.length) {
      if (!res.write(piece)) await new Promise<void>((resolve) => { res.once("drain", resolve); res.once("close", resolve); });
    }
    if (!res.destroyed) res.end(`"${"cd".repeat(32)}"],"error":null,"id":${JSON.stringify(id ?? null)}}`);
  }

  const server = http.createServer((req, res) => {
    authorization = req.headers.authorization;
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", async () => {
      try {
        const body = JSON.parse(Buffer.concat(chunks).toString()) as Json | Json[];
        const big = proxy.oversize;
        if (big && !Array.isArray(body) && body.method === big.method) {
          calls.set(big.method, (calls.get(big.method) ?? 0) + 1);
          return await writeOversize(res, big.bytes, body.id);
        }
        proxy.onRequest?.();
        let head: Promise<number> | undefined;
        const limit = async () => (await (head ??= realHead())) - proxy.behind;
        // Nothing set to misbehave: a batch goes to the node whole, as a plain relay sends it (one
        // request per item would make the proxy, not the watcher, what a bench measures).
        if (Array.isArray(body) && honest()) {
          for (const r of body) calls.set(String(r.method), (calls.get(String(r.method)) ?? 0) + 1);
          const out = await relay(body);
          res.writeHead(200, { "content-type": "application/json" });
          return res.end(JSON.stringify(out));
        }
        const out = Array.isArray(body) ? await Promise.all(body.map((r) => answer(r, limit))) : await answer(body, limit);
        res.writeHead(200, { "content-type": "application/json" });
        res.end(JSON.stringify(out));
      } catch (err) {
        // The node itself is unreachable: as a dead upstream behind a proxy answers.
        res.writeHead(502, { "content-type": "text/plain" });
        res.end(`bad gateway: ${(err as Error).message}`);
      }
    });
  });
  server.on("connection", (s: net.Socket) => {
    sockets.add(s);
    s.on("close", () => sockets.delete(s));
  });
  const listen = (port: number) => new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, "127.0.0.1", () => {
      server.off("error", reject);
      resolve();
    });
  });
  // Below the kernel's ephemeral range (32768–60999 here): a port this proxy gives up while "down"
  // is not handed to another process's connection or listen(0) meanwhile, so up() gets it back
  // (CI once saw EADDRINUSE there). Another test's proxy picking the same port is tried again.
  for (let attempt = 0; ; attempt++) {
    try {
      await listen(20_000 + Math.floor(Math.random() * 12_000));
      break;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "EADDRINUSE" || attempt >= 50) throw err;
    }
  }
  const port = (server.address() as net.AddressInfo).port;
  let listening = true;

  const proxy: RpcProxy = {
    url: `http://127.0.0.1:${port}`,
    port,
    chainId: undefined,
    genesisHash: undefined,
    chainName: undefined,
    rewrite: undefined,
    rewriteParams: undefined,
    intercept: undefined,
    oversize: undefined,
    emptyLogsAt: undefined,
    hold: undefined,
    get held() {
      return waiting.length;
    },
    release() {
      proxy.hold = undefined;
      const all = waiting;
      waiting = [];
      for (const go of all) go();
    },
    behind: 0,
    syncing: false,
    padTransactions: 0,
    emptyMempool: false,
    mempoolUnloaded: false,
    calls,
    onRequest: undefined,
    async down() {
      if (!listening) return;
      listening = false;
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      for (const s of sockets) s.destroy();
      await closed;
    },
    async up() {
      if (listening) return;
      await listen(port);
      listening = true;
    },
    retarget(url) {
      upstream = url;
    },
  };
  t.teardown(() => {
    proxy.release();
    return proxy.down();
  });
  return proxy;
}
