// bcoin speaks a bitcoind-style RPC, not quite Bitcoin Core's. Every difference the watcher would
// meet is handled here, in an HTTP relay in front of the node, so the watcher speaks Bitcoin
// Core's documented RPC and is tested through it unchanged:
//
//   Bitcoin Core                              bcoin 1.0                                here
//   getblock <hash> 0 | 1 | 2 (verbosity)     getblock <hash> <verbose> <details>     0 → false, 1 → true, 2 → true true
//   getblock of an unknown hash: code -5      code -1 "Block not found"              code -5
//   getrawtransaction of a txid in neither    code -1 "Transaction not found."       code -5
//     the mempool nor (txindex) a block: -5
//   getmempoolinfo's `loaded` (0.19 and       no `loaded` (its mempool is in memory   loaded: true
//     later: false until mempool.dat is read)   from the start)
//   getblock <hash> 1|2, getblockheader        bits a number (486604799), no nonce,    bits "1d00ffff"; nonce read from the
//     <hash>: bits a hex string ("1d00ffff"),   previousblockhash null for block 0      raw header (getblockheader <hash>
//     nonce a number, no previousblockhash                                              false, bytes 76..80); null dropped
//     for block 0
//
// JSON-RPC batches (an array of calls) are answered here call by call, each translated, as an array.
//
// Relayed as they are (bcoin answers them as Core does): getrawmempool (an array of txids), and
// getrawtransaction <txid> 1 of a mempool transaction without txindex (bcoin's Validator takes
// Core's 1 for true), with vin[].sequence and vout[] as Core writes them.
//
// Not relayed differences the watcher never meets: regtest bech32 addresses begin rb1 (Core:
// bcrt1); script types are named PUBKEYHASH, WITNESSPUBKEYHASH… (Core: pubkeyhash,
// witness_v0_keyhash…); invalidateblock leaves bcoin's mempool out of step with its tip without
// peers (reorgs in the tests come from a longer competing chain through submitblock instead);
// segwit activates after 432 regtest blocks (nothing here spends a segwit output).
import http from "node:http";
import type { AddressInfo } from "node:net";

interface RpcRequest {
  method: string;
  params?: unknown[];
  id?: unknown;
  jsonrpc?: string;
}

function translate(req: RpcRequest): RpcRequest {
  if (req.method === "getblock" && typeof req.params?.[1] === "number") {
    const [hash, verbosity] = req.params as [string, number];
    return { ...req, params: verbosity === 0 ? [hash, false] : verbosity === 1 ? [hash, true] : [hash, true, true] };
  }
  return req;
}

interface RpcReply {
  result: unknown;
  error: { code: number; message: string } | null;
  id: unknown;
}

/** Block and header JSON as Core writes it: bits in hex, the nonce (bcoin leaves it out: read from the raw header), no previousblockhash on block 0. */
async function coreHeader(result: Record<string, unknown>, ask: (req: RpcRequest) => Promise<RpcReply>): Promise<Record<string, unknown>> {
  const raw = await ask({ method: "getblockheader", params: [result.hash, false], id: 0 });
  const out = { ...result };
  if (typeof out.bits === "number") out.bits = out.bits.toString(16).padStart(8, "0");
  if (typeof raw.result === "string" && raw.result.length >= 160) out.nonce = Buffer.from(raw.result.slice(0, 160), "hex").readUInt32LE(76);
  if (out.previousblockhash === null) delete out.previousblockhash;
  return out;
}

async function translateReply(req: RpcRequest, reply: RpcReply, ask: (req: RpcRequest) => Promise<RpcReply>): Promise<RpcReply> {
  const verbose = (req.method === "getblock" && typeof req.params?.[1] === "number" && req.params[1] > 0) || (req.method === "getblockheader" && req.params?.[1] !== false);
  if (verbose && reply.result && typeof reply.result === "object") return { ...reply, result: await coreHeader(reply.result as Record<string, unknown>, ask) };
  if (req.method === "getmempoolinfo" && reply.result && typeof reply.result === "object" && !("loaded" in reply.result)) return { ...reply, result: { loaded: true, ...reply.result } };
  if (req.method === "getblock" && reply.error?.code === -1 && /not found/i.test(reply.error.message)) return { ...reply, error: { code: -5, message: "Block not found" } };
  if (req.method === "getrawtransaction" && reply.error?.code === -1 && /not found/i.test(reply.error.message)) {
    return { ...reply, error: { code: -5, message: "No such mempool or blockchain transaction" } };
  }
  return reply;
}

/** Listens on 127.0.0.1 (ephemeral port) and relays Bitcoin Core RPC calls to bcoin's RPC at `target`, translated. */
export async function startBcoinCompat(target: number): Promise<{ port: number; close(): Promise<void> }> {
  const server = http.createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    let body: RpcRequest | RpcRequest[];
    try {
      body = JSON.parse(Buffer.concat(chunks).toString());
    } catch {
      res.writeHead(400).end();
      return;
    }
    try {
      const post = (body: RpcRequest) =>
        fetch(`http://127.0.0.1:${target}/`, {
          method: "POST",
          headers: { "content-type": "application/json", ...(req.headers.authorization ? { authorization: req.headers.authorization } : {}) },
          body: JSON.stringify(body),
        });
      let denied: number | undefined;
      const one = async (call: RpcRequest): Promise<RpcReply> => {
        const upstream = await post(translate(call));
        if (upstream.status === 401 || upstream.status === 403) denied = upstream.status;
        if (denied !== undefined) return { result: null, error: null, id: call.id };
        return translateReply(call, (await upstream.json()) as RpcReply, async (r) => (await (await post(r)).json()) as RpcReply);
      };
      // A batch (an array) is answered as Core does: an array of replies, HTTP 200 whatever each says.
      const reply = Array.isArray(body) ? await Promise.all(body.map(one)) : await one(body);
      if (denied !== undefined) {
        res.writeHead(denied).end();
        return;
      }
      res.writeHead(!Array.isArray(reply) && reply.error ? 500 : 200, { "content-type": "application/json" }).end(JSON.stringify(reply));
    } catch {
      res.writeHead(502).end();
    }
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    port: (server.address() as AddressInfo).port,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
