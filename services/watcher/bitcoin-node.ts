import type { HeaderFields } from "./bitcoin-checks.ts";
import { readCappedText } from "../platform/capped-body.ts";
import { defaultMaxResponseBytes } from "../platform/config.ts";

/** What the watcher asks of a Bitcoin Core node, through its documented JSON-RPC (bitcoind's `-server`). */
export interface BitcoinNode {
  /**
   * `getblockchaininfo`'s chain (main, test, testnet4, signet or regtest), whether the node is
   * still in its initial block download, and its best tip's chainwork (hex; "" when not said).
   */
  info(): Promise<{ chain: string; initialBlockDownload: boolean; chainwork: string }>;
  headHeight(): Promise<number>;
  /** The best chain's block hash at `height`, or undefined past the head. */
  hashAt(height: number): Promise<string | undefined>;
  /**
   * The block's bytes as hex (`getblock <hash> 0`), or undefined if the node does not know the
   * hash. Never the decoded JSON: what counts is parsed from the bytes (bitcoin-bytes.ts).
   */
  block(hash: string): Promise<string | undefined>;
  /** A block's header (`getblockheader <hash>`), or undefined if the node does not know the hash. */
  header(hash: string): Promise<HeaderFields | undefined>;
  /**
   * The best chain's hashes at `heights` (`getblockhash`, one JSON-RPC batch), undefined past the
   * head: many heights in one request, for the header chain (bitcoin-headers.ts).
   */
  hashesAt(heights: readonly number[]): Promise<(string | undefined)[]>;
  /**
   * The 80-byte headers of `hashes` as hex (`getblockheader <hash> false`, one batch), undefined
   * where the node does not know the hash. Bytes, never the decoded JSON: the header chain hashes them.
   */
  rawHeaders(hashes: readonly string[]): Promise<(string | undefined)[]>;
  /** The txids in the node's mempool (`getrawmempool`). */
  mempool(): Promise<string[]>;
  /**
   * Whether the node has loaded its mempool (`getmempoolinfo`'s `loaded`, Bitcoin Core 0.19 and
   * later): a node restarted answers RPC before mempool.dat is read, with an empty or partial
   * mempool. An answer without the field (an older node) is taken as loaded.
   */
  mempoolLoaded(): Promise<boolean>;
  /** A mempool transaction's bytes as hex (`getrawtransaction <txid> 0`: no txindex needed while it is in the mempool), or undefined once it left. */
  transaction(txid: string): Promise<string | undefined>;
}

/** An error object from the node (Bitcoin Core's RPC error codes). */
export class RpcError extends Error {
  readonly code: number;
  constructor(method: string, code: number, message: string) {
    super(`${method}: ${message} (code ${code})`);
    this.code = code;
  }
}

/** An answer longer than the cap (WATCHER_MAX_RESPONSE_BYTES): an error of that read, never the process's memory. */
export class ResponseTooLargeError extends Error {
  constructor(method: string, maxBytes: number) {
    super(`${method}: the node's answer is over ${maxBytes} bytes (WATCHER_MAX_RESPONSE_BYTES); it was not read further`);
    this.name = "ResponseTooLargeError";
  }
}

/** The body of `res` as text, given up as soon as it is longer than `maxBytes` (platform/capped-body.ts). */
export function cappedText(res: Response, maxBytes: number, method: string): Promise<string> {
  return readCappedText(res, maxBytes, () => new ResponseTooLargeError(method, maxBytes));
}

/** RPC_INVALID_PARAMETER: getblockhash past the head. */
const invalidParameter = -8;
/** RPC_INVALID_ADDRESS_OR_KEY: getblock of a hash the node does not know; getrawtransaction of a transaction no longer in the mempool. */
const unknownBlock = -5;

/**
 * A JSON-RPC client of Bitcoin Core over http(s). The URL's user and password (an `rpcauth` user)
 * go in the Authorization header, never in a log: callers log the URL through redactNodeUrl.
 * Every answer is read up to `maxResponseBytes`; a longer one fails its call (ResponseTooLargeError).
 */
export function bitcoinNode(url: string, timeoutMs = 20_000, maxResponseBytes = defaultMaxResponseBytes): BitcoinNode {
  const parsed = new URL(url);
  const authorization =
    parsed.username === "" ? undefined : `Basic ${Buffer.from(`${decodeURIComponent(parsed.username)}:${decodeURIComponent(parsed.password)}`).toString("base64")}`;
  parsed.username = "";
  parsed.password = "";
  const endpoint = parsed.toString();
  let id = 0;

  async function call<T>(method: string, params: unknown[]): Promise<T> {
    const res = await fetch(endpoint, {
      method: "POST",
      headers: { "content-type": "application/json", ...(authorization ? { authorization } : {}) },
      body: JSON.stringify({ jsonrpc: "1.0", id: ++id, method, params }),
      signal: AbortSignal.timeout(timeoutMs),
    });
    // bitcoind answers an RPC error with a 404 or 500 and the error in the body; 401 and 403 have no body.
    if (res.status === 401 || res.status === 403) throw new Error(`${method}: the node refused the credentials (HTTP ${res.status}); check the URL's rpcauth user and password`);
    const text = await cappedText(res, maxResponseBytes, method);
    let body: { result?: T; error?: { code: number; message: string } | null };
    try {
      body = JSON.parse(text);
    } catch {
      throw new Error(`${method}: the node answered HTTP ${res.status} with no JSON-RPC body`);
    }
    if (body.error) throw new RpcError(method, body.error.code, body.error.message);
    return body.result as T;
  }

  /**
   * Calls of one method in one JSON-RPC batch (an array: Bitcoin Core answers each in order of its
   * id, errors per call); a call that fails with `missing` is undefined, any other error fails all.
   */
  async function batch<T>(method: string, paramsList: readonly unknown[][], missing: number): Promise<(T | undefined)[]> {
    if (paramsList.length === 0) return [];
    const first = id + 1;
    id += paramsList.length;
    const res = await fetch(endpoint, {
      method: "POST",
      headers: { "content-type": "application/json", ...(authorization ? { authorization } : {}) },
      body: JSON.stringify(paramsList.map((params, i) => ({ jsonrpc: "1.0", id: first + i, method, params }))),
      signal: AbortSignal.timeout(timeoutMs),
    });
    if (res.status === 401 || res.status === 403) throw new Error(`${method}: the node refused the credentials (HTTP ${res.status}); check the URL's rpcauth user and password`);
    const text = await cappedText(res, maxResponseBytes, method);
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch {
      throw new Error(`${method}: the node answered HTTP ${res.status} with no JSON-RPC body`);
    }
    if (!Array.isArray(body)) throw new Error(`${method}: the node answered a batch of ${paramsList.length} with no array (HTTP ${res.status})`);
    const byId = new Map<unknown, { result?: T; error?: { code: number; message: string } | null }>(body.map((r) => [r?.id, r]));
    return paramsList.map((_, i) => {
      const r = byId.get(first + i);
      if (!r) throw new Error(`${method}: the node's batch answer has no reply to call ${first + i}`);
      if (r.error) {
        if (r.error.code === missing) return undefined;
        throw new RpcError(method, r.error.code, r.error.message);
      }
      return r.result;
    });
  }

  return {
    async info() {
      const r = await call<{ chain: string; initialblockdownload?: boolean; chainwork?: unknown }>("getblockchaininfo", []);
      return { chain: r.chain, initialBlockDownload: r.initialblockdownload === true, chainwork: typeof r.chainwork === "string" ? r.chainwork : "" };
    },
    async headHeight() {
      return call<number>("getblockcount", []);
    },
    async hashAt(height) {
      try {
        return await call<string>("getblockhash", [height]);
      } catch (err) {
        if (err instanceof RpcError && err.code === invalidParameter) return undefined;
        throw err;
      }
    },
    async block(hash) {
      try {
        return await call<string>("getblock", [hash, 0]);
      } catch (err) {
        if (err instanceof RpcError && err.code === unknownBlock) return undefined;
        throw err;
      }
    },
    async header(hash) {
      try {
        return await call<HeaderFields>("getblockheader", [hash, true]);
      } catch (err) {
        if (err instanceof RpcError && err.code === unknownBlock) return undefined;
        throw err;
      }
    },
    async hashesAt(heights) {
      return batch<string>("getblockhash", heights.map((h) => [h]), invalidParameter);
    },
    async rawHeaders(hashes) {
      return batch<string>("getblockheader", hashes.map((h) => [h, false]), unknownBlock);
    },
    async mempool() {
      return call<string[]>("getrawmempool", []);
    },
    async mempoolLoaded() {
      const r = await call<{ loaded?: boolean }>("getmempoolinfo", []);
      return r.loaded !== false;
    },
    async transaction(txid) {
      try {
        // false, not 0: Core before 25 takes only a boolean here, and every later one still does.
        return await call<string>("getrawtransaction", [txid, false]);
      } catch (err) {
        if (err instanceof RpcError && err.code === unknownBlock) return undefined;
        throw err;
      }
    },
  };
}
