// A real Bitcoin regtest chain for the tests: bcoin full nodes in memory (a second one mines the
// competing chains that make reorgs), a payer that signs real transactions spending coinbase
// outputs, and the node's RPC reached through bcoin-compat.ts, where bcoin's differences from
// Bitcoin Core are translated.
import net from "node:net";
import { bech32, bech32m } from "@scure/base";
import bcoin from "bcoin";
import { startBcoinCompat } from "./bcoin-compat.ts";

export interface Regtest {
  /** The node as the watcher is given it: Bitcoin Core's RPC, user and password in the URL. */
  url: string;
  port: number;
  /** A call straight to the node (bcoin's own dialect). */
  rpc<T = unknown>(method: string, params?: unknown[]): Promise<T>;
  height(): Promise<number>;
  /** Mines `blocks` blocks on the node; their hashes. */
  mine(blocks?: number): Promise<string[]>;
  /**
   * Signs and sends one transaction paying each output (an address as the service hands it out,
   * tb1… or m…/n…/2…; an amount in BTC), with change back to the payer. Its txid and raw hex.
   */
  pay(outputs: readonly { address: string; btc: string }[], o?: PayOptions): Promise<{ txid: string; raw: string; coinbase: number }>;
  /**
   * Mines a block on the competing node holding `raw` (a transaction the first node's mempool
   * may not have, e.g. a double spend of one it has), on top of the first node's tip, and hands
   * the block to the first node as from a peer. The block's hash.
   */
  mineElsewhere(raw: string): Promise<string>;
  /**
   * A longer competing chain: the blocks above `forkHeight` replaced by `blocks` new ones (the
   * first holding `include`, raw transactions), arriving through submitblock as from a peer.
   */
  reorg(forkHeight: number, blocks: number, include?: readonly string[]): Promise<string[]>;
  stop(): Promise<void>;
}

const apiKey = "regtest-password";

export interface PayOptions {
  /** Signal replace-by-fee (BIP 125: the input's nSequence 0xfffffffd). */
  rbf?: boolean;
  /** Spend this block's coinbase again (a double spend of an earlier payment's `coinbase`) instead of the next one. */
  coinbase?: number;
  /** Only sign it, do not send it. */
  send?: boolean;
  /** The fee in satoshis (default 10 000). */
  fee?: number;
}

async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

async function startNode(): Promise<{ node: bcoin.FullNode; rpc: Regtest["rpc"]; port: number }> {
  const port = await freePort();
  // replaceByFee: the mempool takes transactions that signal BIP 125 (bcoin refuses them by
  // default); bcoin 1.0 never replaces one, though: a second spend of an input is refused.
  const node = new bcoin.FullNode({ network: "regtest", memory: true, workers: false, listen: false, httpHost: "127.0.0.1", httpPort: port, apiKey, logLevel: "none", replaceByFee: true });
  await node.open();
  const authorization = `Basic ${Buffer.from(`watcher:${apiKey}`).toString("base64")}`;
  const rpc = async <T,>(method: string, params: unknown[] = []): Promise<T> => {
    const res = await fetch(`http://127.0.0.1:${port}/`, { method: "POST", headers: { authorization }, body: JSON.stringify({ method, params, id: 1 }) });
    const body = (await res.json()) as { result: T; error: { message: string } | null };
    if (body.error) throw new Error(`${method}: ${body.error.message}`);
    return body.result;
  };
  return { node, rpc, port };
}

/**
 * The regtest form of a bech32 address (tb1… as the service hands out for Test, or bc1…): the same
 * script under bcoin's regtest prefix. Base58 ones need no change: regtest shares testnet's
 * version bytes.
 */
export function regtestAddress(address: string): string {
  const lower = address.toLowerCase();
  if (!lower.startsWith("tb1") && !lower.startsWith("bc1")) return address;
  const coder = lower[3] === "q" ? bech32 : bech32m;
  const { words } = coder.decode(address as `${string}1${string}`, 90);
  return coder.encode("rb", words, 90);
}

const satsOf = (btc: string) => {
  const [whole, fraction = ""] = btc.split(".");
  return Number(BigInt(whole as string) * 100_000_000n + BigInt(fraction.padEnd(8, "0")));
};

/** Starts the chain with 110 blocks mined to the payer (ten coinbase outputs to spend, more as blocks are mined). */
export async function startRegtest(): Promise<Regtest> {
  const a = await startNode();
  const b = await startNode();
  const compat = await startBcoinCompat(a.port);
  const payer = bcoin.KeyRing.generate();
  const payerAddress = payer.getAddress("string", "regtest");
  // Coinbase outputs spent so far, by height: each payment spends the next mature one.
  let nextCoinbase = 1;
  const mine = (blocks = 1) => a.rpc<string[]>("generatetoaddress", [blocks, payerAddress]);
  await mine(110);

  const regtest: Regtest = {
    url: `http://watcher:${apiKey}@127.0.0.1:${compat.port}/`,
    port: compat.port,
    rpc: a.rpc,
    height: () => a.rpc<number>("getblockcount"),
    mine,
    async pay(outputs, o = {}) {
      const tip = await a.rpc<number>("getblockcount");
      if (o.coinbase === undefined && nextCoinbase + 100 > tip) throw new Error("no mature coinbase output left: mine more blocks first");
      const height = o.coinbase ?? nextCoinbase++;
      type Vout = { value: number; n: number; scriptPubKey: { hex: string } };
      const block = await a.rpc<{ tx: { txid: string; vout: Vout[] }[] }>("getblock", [await a.rpc<string>("getblockhash", [height]), true, true]);
      const coinbase = block.tx[0] as { txid: string; vout: Vout[] };
      const out = coinbase.vout[0] as Vout;
      const coin = new bcoin.Coin({
        version: 1,
        height,
        value: Math.round(out.value * 1e8),
        script: bcoin.Script.fromRaw(Buffer.from(out.scriptPubKey.hex, "hex")),
        // bcoin 1.0 keeps hashes as little-endian hex strings.
        hash: Buffer.from(coinbase.txid, "hex").reverse().toString("hex"),
        index: 0,
        coinbase: true,
      });
      const mtx = new bcoin.MTX();
      mtx.addCoin(coin);
      let paid = 0;
      for (const o of outputs) {
        mtx.addOutput(bcoin.Address.fromString(regtestAddress(o.address), "regtest"), satsOf(o.btc));
        paid += satsOf(o.btc);
      }
      mtx.addOutput(payer.getAddress(), coin.value - paid - (o.fee ?? 10_000));
      if (o.rbf) ((mtx as unknown as { inputs: { sequence: number }[] }).inputs[0] as { sequence: number }).sequence = 0xfffffffd;
      mtx.sign(payer);
      const tx = mtx.toTX();
      const raw = tx.toRaw().toString("hex");
      const txid = o.send === false ? (tx as unknown as { txid(): string }).txid() : await a.rpc<string>("sendrawtransaction", [raw]);
      return { txid, raw, coinbase: height };
    },
    async mineElsewhere(raw) {
      const tip = await a.rpc<number>("getblockcount");
      const [hash] = await regtest.reorg(tip, 1, [raw]);
      return hash as string;
    },
    async reorg(forkHeight, blocks, include = []) {
      // The competitor learns the chain up to the fork, then mines its own.
      for (let h = (await b.rpc<number>("getblockcount")) + 1; h <= forkHeight; h++) {
        await b.rpc("submitblock", [await a.rpc("getblock", [await a.rpc<string>("getblockhash", [h]), false])]);
      }
      if ((await b.rpc<number>("getblockcount")) !== forkHeight) throw new Error("the competing node is past the fork height");
      for (const raw of include) await b.rpc("sendrawtransaction", [raw]);
      const hashes = await b.rpc<string[]>("generatetoaddress", [blocks, payerAddress]);
      for (const h of hashes) await a.rpc("submitblock", [await b.rpc("getblock", [h, false])]);
      if ((await a.rpc<string>("getbestblockhash")) !== hashes.at(-1)) throw new Error("the node did not take the longer chain");
      // The competitor forgets its chain by being replaced at the next reorg: start it again from scratch.
      await b.node.close();
      Object.assign(b, await startNode());
      return hashes;
    },
    async stop() {
      await compat.close();
      await a.node.close();
      await b.node.close();
    },
  };
  return regtest;
}
