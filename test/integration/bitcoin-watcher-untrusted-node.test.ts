// The Bitcoin watcher never trusts its node either: bcoin on regtest (Bitcoin Core's RPC through
// the compat relay) behind a JSON-RPC proxy of ours. A node that names mainnet or is in its
// initial block download while followed is not read until it proves itself again; a node two
// blocks behind un-counts nothing. A block whose header misses its target, or whose transactions
// are not the ones its merkle root commits to (an invented payment added), is refused, named in
// the log and in chain_blocks_refused_total, nothing of it counted; once the node serves the real
// block the chain goes on from it. An answer over WATCHER_MAX_RESPONSE_BYTES (1 MiB here) fails its
// read without the process holding it. Checked through the REST API, /metrics, the log and signed webhooks.
import { Writable } from "node:stream";
import v8 from "node:v8";
import vm from "node:vm";
import { pino } from "pino";
import t from "tap";
import { bitcoinScript } from "../../services/addresses/formats.ts";
import { bitcoinNode, ResponseTooLargeError } from "../../services/watcher/bitcoin-node.ts";
import { hashOfHeader, headerBytes, targetOf, txBytes, type Header } from "../helpers/bitcoin-blocks.ts";
import { startRegtest } from "../helpers/bitcoin-regtest.ts";
import { call, idemKey, until } from "../helpers/harness.ts";
import { startRpcProxy } from "../helpers/rpc-proxy.ts";
import { eventsOnce, notDetected, webhookSetup } from "../helpers/webhooks.ts";

const chain = await startRegtest();
t.teardown(() => chain.stop());
const relay = new URL(chain.url);
const node = await startRpcProxy(t, `http://${relay.host}/`, { bitcoin: true });
const watcherUrl = `http://${relay.username}:${relay.password}@127.0.0.1:${node.port}`;
// The app's log lines, kept: a refused block is named there.
const lines: string[] = [];
const logger = pino({ level: "info", base: undefined }, new Writable({
  write(chunk, _encoding, done) {
    lines.push(...String(chunk).split("\n").filter(Boolean));
    done();
  },
}));
const cap = 1024 * 1024;
const s = await webhookSetup(t, { env: { BITCOIN_TEST_RPC_URL: watcherUrl, WATCHER_POLL_MS: "100", WATCHER_NODE_PROOF_SECONDS: "1", WATCHER_MAX_RESPONSE_BYTES: String(cap) }, logger });
const { base, creds: a } = s;
const endpoint = await s.createEndpoint();
const path = `/api/v1/merchants/${a.merchant}/payment-intents`;

async function createIntent(amount: string) {
  const res = await call(base, "POST", path, { key: a.key, idempotencyKey: idemKey(), body: { network: "bitcoin", asset: "BTC", requested_amount: amount } });
  if (res.status !== 200) throw new Error(`create: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.data as { public_id: string; deposit_address: string };
}
const get = async (id: string) => (await call(base, "GET", `${path}/${id}`, { key: a.key })).body.data;
const pay = (pi: { deposit_address: string }, btc: string) => chain.pay([{ address: pi.deposit_address, btc }]);
const gauge = async (name: string) => {
  const text = await (await fetch(`http://127.0.0.1:${s.app.ports.ops}/metrics`)).text();
  const m = new RegExp(`^${name}\\{network="bitcoin",environment="test"\\} (\\S+)$`, "m").exec(text);
  return m ? Number(m[1]) : undefined;
};
const statusIs = (id: string, status: string) => until(`${id} ${status}`, async () => ((await get(id)).status === status ? true : undefined), 30_000, () => status);
const eventsOf = (id: string) => eventsOnce(s.receiver, endpoint.secret).filter((e) => e.data.payment_intent?.public_id === id && notDetected(e)).map((e) => e.type);

await until("the Test chain followed", async () => (await gauge("chain_watcher_active")) === 1, 30_000);

t.test("a node that names mainnet, or is in its initial block download, is not read until it proves itself again", async (t) => {
  for (const [what, misbehave, behave] of [
    ["names bitcoin mainnet", () => (node.chainName = "main"), () => (node.chainName = undefined)],
    ["is in its initial block download", () => (node.syncing = true), () => (node.syncing = false)],
  ] as const) {
    misbehave();
    await until(`refused once it ${what}`, async () => (await gauge("chain_node_refused")) === 1, 30_000);
    const pi = await createIntent("0.001");
    const { txid } = await pay(pi, "0.001");
    await chain.mine(2);
    const reads = node.calls.get("getblock") ?? 0;
    const proofs = node.calls.get("getblockchaininfo") ?? 0;
    await until("asked again", async () => (node.calls.get("getblockchaininfo") ?? 0) >= proofs + 2, 30_000);
    t.equal(node.calls.get("getblock") ?? 0, reads, `${what}: no block read from it`);
    t.same((await get(pi.public_id)).transactions, [], `${what}: nothing recorded`);
    behave();
    await statusIs(pi.public_id, "confirmed");
    t.equal((await get(pi.public_id)).transactions[0].tx_hash, txid);
    t.equal(await gauge("chain_node_refused"), 0, `${what}: followed again`);
  }
});

t.test("a node two blocks behind for a while un-counts nothing", async (t) => {
  const pi = await createIntent("0.002");
  await pay(pi, "0.002");
  await chain.mine(2);
  await statusIs(pi.public_id, "confirmed");
  const head = await chain.height();
  await until("the head processed", async () => (await gauge("chain_processed_height")) === head, 30_000);
  node.behind = 2;
  const polls = node.calls.get("getblockcount") ?? 0;
  await until("twenty polls of the behind node", async () => (node.calls.get("getblockcount") ?? 0) >= polls + 20, 30_000);
  t.equal(await gauge("chain_node_behind_blocks"), 2);
  node.behind = 0;
  const sentinel = await createIntent("0.0005");
  await pay(sentinel, "0.0005");
  await chain.mine(2);
  await statusIs(sentinel.public_id, "confirmed");
  await until("the sentinel's webhook", async () => eventsOf(sentinel.public_id).includes("payment.confirmed"), 30_000);
  const now = await get(pi.public_id);
  t.equal(now.status, "confirmed");
  t.equal(now.transactions[0].counted, true);
  t.same(eventsOf(pi.public_id).sort(), ["payment.confirmed", "payment.intent.created"], "no payment.reorged");
});

type Json = Record<string, unknown>;
const refusedCount = async (check: string) => {
  const text = await (await fetch(`http://127.0.0.1:${s.app.ports.ops}/metrics`)).text();
  const m = new RegExp(`^chain_blocks_refused_total\\{network="bitcoin",environment="test",check="${check}"\\} (\\S+)$`, "m").exec(text);
  return m ? Number(m[1]) : 0;
};
/** Outputs counted towards an intent (a payment seen in the mempool is listed, not counted). */
const counted = (pi: { transactions: { counted: boolean }[] }) => pi.transactions.filter((x) => x.counted).length;
const refusedLine = (hash: string) => lines.map((l) => JSON.parse(l) as Json).find((l) => l.hash === hash && /fails a check/.test(String(l.msg)));

/** The header fields of a block's bytes (hex), read here from first principles. */
function headerOf(hex: string): Header {
  const b = Buffer.from(hex.slice(0, 160), "hex");
  const hash = (at: number) => Buffer.from(b.subarray(at, at + 32)).reverse().toString("hex");
  return { version: b.readInt32LE(0), previousblockhash: hash(4), merkleroot: hash(36), time: b.readUInt32LE(68), bits: b.readUInt32LE(72).toString(16).padStart(8, "0"), nonce: b.readUInt32LE(76) };
}
const hashOfBytes = (hex: string) => hashOfHeader(headerOf(hex));

/**
 * The node lies about the block holding the transaction `raw` (its bytes: getblock <hash> 0
 * answers `lie` of them, and getblockheader <hash> false the lie's header) until the watcher asked
 * for it `reads` times, or (a watcher that believes it reads it once) `believed` says the lie was
 * taken; the caller then stops it. A lie whose header hashes to another hash is told
 * consistently: getblockhash names that hash at the block's height, and getblockheader and
 * getblock of it answer the lie.
 */
async function lyingAbout(raw: string, lie: (hex: string) => string, believed: () => Promise<boolean> = async () => false, reads = 3) {
  let served = 0;
  let real: string | undefined;
  /** Real hash → the lie told of its block; the lie's hash → the real hash. */
  const lies = new Map<string, string>();
  const named = new Map<string, string>();
  node.intercept = async (method, params, ask) => {
    if (method === "getblockhash") {
      const hash = await ask("getblockhash", params);
      if (typeof hash !== "string") return undefined;
      if (!lies.has(hash)) {
        const hex = await ask("getblock", [hash, 0]);
        if (typeof hex !== "string" || !hex.includes(raw)) return hash;
        real = hex;
        lies.set(hash, lie(hex));
        named.set(hashOfBytes(lie(hex)), hash);
      }
      return hashOfBytes(lies.get(hash) as string);
    }
    const realHash = named.get(String(params[0])) ?? String(params[0]);
    const told = lies.get(realHash);
    if (told === undefined) return undefined;
    if (method === "getblockheader" && params[1] === false) {
      served++;
      return told.slice(0, 160);
    }
    if (method === "getblock" && params[1] === 0) {
      served++;
      return told;
    }
    return undefined;
  };
  await until(`the lying block read ${reads} times`, async () => (served >= reads || (served > 0 && (await believed())) ? true : undefined), 60_000);
  return {
    real: () => real as string,
    stop: () => {
      node.intercept = undefined;
    },
  };
}

t.test("a block whose header misses its target is refused, named, nothing of it counted; the real block then counts", async (t) => {
  const pi = await createIntent("0.003");
  const { txid, raw } = await pay(pi, "0.003");
  const before = await refusedCount("proof_of_work");
  // Another nonce, and the hash it gives: the header is consistent, but its hash is above regtest's target.
  const lie = (hex: string): string => {
    const forged = headerOf(hex);
    do forged.nonce = (forged.nonce + 1) >>> 0;
    while (BigInt(`0x${hashOfHeader(forged)}`) <= targetOf(forged.bits));
    return headerBytes(forged).toString("hex") + hex.slice(160);
  };
  const lying = lyingAbout(raw, lie);
  // The lying block is the tip: a watcher that believed it would record the payment in it.
  await chain.mine(1);
  const height = await chain.height();
  const { real, stop } = await lying;
  const now = await get(pi.public_id);
  t.same([now.status, counted(now)], ["pending", 0], "nothing of the block counted while the node lies");
  t.same(now.transactions.filter((x: { confirmations: number }) => x.confirmations > 0), [], "no block of the payment recorded");
  t.equal(await refusedCount("proof_of_work"), before + 1, "chain_blocks_refused_total{check=proof_of_work}: once for the block, however often served");
  const forgedHash = hashOfBytes(lie(real()));
  t.match(refusedLine(forgedHash), { level: 40, check: "proof_of_work", height, hash: forgedHash }, "one line names the check, height and hash");
  t.equal(lines.filter((l) => (JSON.parse(l) as Json).hash === forgedHash && l.includes("fails a check")).length, 1, "one line for the block");
  stop();
  await chain.mine(1);
  await statusIs(pi.public_id, "confirmed");
  const paid = await get(pi.public_id);
  t.same([paid.transactions.length, paid.transactions[0].tx_hash, paid.amount_received], [1, txid, "0.003"], "the real block's payment, once");
});

/** A block's bytes with `more` (transactions' bytes) after its transactions: a count under 253 is one byte. */
const withTransactions = (hex: string, ...more: string[]) => hex.slice(0, 160) + (Number.parseInt(hex.slice(160, 162), 16) + more.length).toString(16).padStart(2, "0") + hex.slice(162) + more.join("");

t.test("a block whose transactions are not the ones its merkle root commits to (an invented payment added) is refused; the real block then counts, the invented payment never", async (t) => {
  const paid = await createIntent("0.004");
  const invented = await createIntent("0.005");
  const { txid, raw } = await pay(paid, "0.004");
  const before = await refusedCount("merkle_root");
  const script = bitcoinScript(invented.deposit_address) as string;
  const fake = txBytes({ vin: [{ txid: "dd".repeat(32), vout: 0 }], vout: [{ value: 0.005, scriptPubKey: { hex: script } }] });
  const lying = lyingAbout(raw, (hex) => withTransactions(hex, fake.hex), async () => (await get(invented.public_id)).transactions.length > 0);
  await chain.mine(2);
  const { real, stop } = await lying;
  t.same([(await get(invented.public_id)).status, (await get(invented.public_id)).transactions], ["pending", []], "the invented payment is not counted");
  const real1 = await get(paid.public_id);
  t.same([real1.status, counted(real1)], ["pending", 0], "nor the real one in the refused block");
  t.equal(await refusedCount("merkle_root"), before + 1, "chain_blocks_refused_total{check=merkle_root}");
  t.match(refusedLine(hashOfBytes(real())), { check: "merkle_root", hash: hashOfBytes(real()) });
  stop();
  await statusIs(paid.public_id, "confirmed");
  t.equal((await get(paid.public_id)).transactions[0].tx_hash, txid);
  const sentinel = await createIntent("0.0006");
  await pay(sentinel, "0.0006");
  await chain.mine(2);
  await statusIs(sentinel.public_id, "confirmed");
  t.same([(await get(invented.public_id)).status, (await get(invented.public_id)).transactions], ["pending", []], "the invented payment, never");
});

t.test("a real transaction's output rewritten in the block's bytes (txid named, header real) is refused: its bytes hash to another txid; the real amount then counts", async (t) => {
  const pi = await createIntent("0.0041");
  const { txid, raw } = await pay(pi, "0.0041");
  const before = await refusedCount("merkle_root");
  const script = bitcoinScript(pi.deposit_address) as string;
  // The payment's output: 8 bytes of value, the script's length, the script. Rewritten to 4.1 BTC.
  const value = (sats: bigint) => {
    const b = Buffer.alloc(8);
    b.writeBigUInt64LE(sats);
    return b.toString("hex");
  };
  const output = (sats: bigint) => value(sats) + (script.length / 2).toString(16).padStart(2, "0") + script;
  t.ok(raw.includes(output(410_000n)), "the payment's output is in its bytes");
  const lying = lyingAbout(raw, (hex) => hex.replace(output(410_000n), output(410_000_000n)), async () => counted(await get(pi.public_id)) > 0);
  await chain.mine(2);
  const { real, stop } = await lying;
  const now = await get(pi.public_id);
  t.same([now.status, counted(now)], ["pending", 0], "nothing counted while the node serves the rewritten bytes");
  t.equal(await refusedCount("merkle_root"), before + 1, "refused once: chain_blocks_refused_total{check=merkle_root}");
  t.match(refusedLine(hashOfBytes(real())), { check: "merkle_root", hash: hashOfBytes(real()) }, "named in the log");
  stop();
  await statusIs(pi.public_id, "confirmed");
  const paid = await get(pi.public_id);
  t.same([paid.transactions.length, paid.transactions[0].tx_hash, paid.amount_received], [1, txid, "0.0041"], "the real amount, from the real bytes");
});

t.test("a node whose decoded JSON adds an output paying a watched address (txid, header and bytes real) changes nothing: the JSON is never read", async (t) => {
  const paid = await createIntent("0.0042");
  const invented = await createIntent("0.5");
  const { txid } = await pay(paid, "0.0042");
  const script = bitcoinScript(invented.deposit_address) as string;
  let jsonServed = 0;
  // Every decoded answer (getblock 1 or 2, getrawtransaction verbose) tells of a 0.5 BTC output to the invented intent in the payment.
  node.rewrite = (method, result) => {
    const addTo = (tx: Json) => (tx.txid === txid ? { ...tx, vout: [...(tx.vout as Json[]), { value: 0.5, n: (tx.vout as Json[]).length, scriptPubKey: { hex: script } }] } : tx);
    if (method === "getblock" && typeof result === "object" && result !== null && Array.isArray((result as Json).tx)) {
      jsonServed++;
      return { ...(result as Json), tx: ((result as Json).tx as unknown[]).map((x) => (typeof x === "object" ? addTo(x as Json) : x)) };
    }
    if (method === "getrawtransaction" && typeof result === "object" && result !== null) {
      jsonServed++;
      return addTo(result as Json);
    }
    return result;
  };
  t.teardown(() => (node.rewrite = undefined));
  const [mined] = await chain.mine(2);
  await statusIs(paid.public_id, "confirmed");
  const sentinel = await createIntent("0.0007");
  await pay(sentinel, "0.0007");
  await chain.mine(2);
  await statusIs(sentinel.public_id, "confirmed");
  t.equal(jsonServed, 0, "the watcher asked for no decoded block or transaction");
  // The lie is there for whoever asks for JSON: the node does tell it.
  const told = await fetch(watcherUrl.replace(/\/\/[^@]*@/, "//"), {
    method: "POST",
    headers: { authorization: `Basic ${Buffer.from(`${decodeURIComponent(relay.username)}:${decodeURIComponent(relay.password)}`).toString("base64")}`, "content-type": "application/json" },
    body: JSON.stringify({ jsonrpc: "1.0", id: 1, method: "getblock", params: [mined, 2] }),
  }).then((r) => r.json() as Promise<{ result: { tx: { txid: string; vout: { scriptPubKey: { hex: string } }[] }[] } }>);
  t.ok(told.result.tx.find((x) => x.txid === txid)?.vout.some((o) => o.scriptPubKey.hex === script), "getblock 2 tells of the invented output");
  const now = await get(invented.public_id);
  t.same([now.status, now.transactions], ["pending", []], "the invented output never counted, nor listed");
  t.equal((await get(paid.public_id)).amount_received, "0.0042", "the real payment counted at its real amount");
});

t.test("the relay answers getblock and getblockheader as Bitcoin Core writes them: bits in hex, the nonce, fields that hash to the block's hash", async (t) => {
  const authorization = `Basic ${Buffer.from(`${decodeURIComponent(relay.username)}:${decodeURIComponent(relay.password)}`).toString("base64")}`;
  const rpc = async (method: string, params: unknown[]) => {
    const res = await fetch(`http://${relay.host}/`, { method: "POST", headers: { authorization, "content-type": "application/json" }, body: JSON.stringify({ jsonrpc: "1.0", id: 1, method, params }) });
    return ((await res.json()) as { result: Json }).result;
  };
  const hash = (await rpc("getblockhash", [await chain.height()])) as unknown as string;
  for (const [what, h] of [["getblock 2", await rpc("getblock", [hash, 2])], ["getblockheader", await rpc("getblockheader", [hash, true])]] as const) {
    t.match(h.bits, /^[0-9a-f]{8}$/, `${what}: bits`);
    t.type(h.nonce, "number", `${what}: nonce`);
    t.equal(hashOfHeader(h as unknown as Header), hash, `${what}: the fields hash to the block's hash`);
  }
  const genesis = await rpc("getblock", [await rpc("getblockhash", [0]), 1]);
  t.notOk("previousblockhash" in genesis, "block 0 has no previousblockhash");
});

t.test("an answer over the cap fails its read; the process never holds it", async (t) => {
  const counter = async () => Number(/^chain_rpc_errors_total\{network="bitcoin",environment="test"\} (\d+)$/m.exec(await (await fetch(`http://127.0.0.1:${s.app.ports.ops}/metrics`)).text())?.[1] ?? 0);
  const pi = await createIntent("0.0007");
  await pay(pi, "0.0007");
  await chain.mine(2);
  await statusIs(pi.public_id, "confirmed");
  const answer = 100 * 1024 * 1024;
  // The heap and the buffers outside it, sampled while the watcher reads: the answer is 100 times
  // the cap. Garbage collected first, so that the baseline is what is live.
  v8.setFlagsFromString("--expose-gc");
  (vm.runInNewContext("gc") as () => void)();
  const used = () => { const m = process.memoryUsage(); return m.heapUsed + m.arrayBuffers; };
  const before = used();
  let peak = before;
  const sampler = setInterval(() => (peak = Math.max(peak, used())), 5);
  t.teardown(() => clearInterval(sampler));
  const errors = await counter();
  const reads = node.calls.get("getrawmempool") ?? 0;
  node.oversize = { method: "getrawmempool", bytes: answer };
  try {
    // The same read as the watcher's, named: it fails for its size, having read no more than the cap.
    await t.rejects(bitcoinNode(watcherUrl, 20_000, cap).mempool(), ResponseTooLargeError, "a getrawmempool over the cap fails");
    await t.rejects(bitcoinNode(watcherUrl, 20_000, cap).mempool(), { message: `getrawmempool: the node's answer is over ${cap} bytes (WATCHER_MAX_RESPONSE_BYTES); it was not read further` });
    const failed = await until("the watcher's reads of the mempool fail", async () => ((await counter()) >= errors + 2 && (node.calls.get("getrawmempool") ?? 0) >= reads + 4 ? true : undefined), 30_000).catch(() => false);
    t.ok(failed, "the watcher's own reads fail as the node's (chain_rpc_errors_total), and it reads again");
  } finally {
    node.oversize = undefined;
    clearInterval(sampler);
  }
  const grown = peak - before;
  t.ok(grown < answer / 2, `the process grew by ${(grown / 1024 / 1024).toFixed(1)} MiB while answers of ${answer / 1024 / 1024} MiB came (cap ${cap / 1024 / 1024} MiB)`);

  // The node answers within the cap again: the watcher goes on.
  const after = await createIntent("0.0008");
  await pay(after, "0.0008");
  await chain.mine(2);
  await statusIs(after.public_id, "confirmed");
});
