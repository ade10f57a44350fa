import { sha256 } from "@noble/hashes/sha2.js";
import { bytesToHex, hexToBytes } from "@noble/hashes/utils.js";
import { BTCArray, RawOldTx, RawTx } from "@scure/btc-signer/script.js";
import type { HeaderFields } from "./bitcoin-checks.ts";
import { BlockRefused } from "./block-refused.ts";

/**
 * Bitcoin blocks and transactions read from their bytes (`getblock <hash> 0`,
 * `getrawtransaction <txid> 0`), never from the node's decoded JSON: every txid is computed here
 * from the transaction's bytes, and the amounts and scripts the watcher counts are parsed from the
 * same bytes, so the merkle root (checked against the header: bitcoin-checks.ts) commits to
 * exactly what is counted. A node that rewrites an output in its JSON changes nothing read here;
 * one that rewrites the bytes changes the txid, and so the merkle root, and the block is refused.
 * @scure/btc-signer's coders parse the transactions (BIP 144's serialization, witness included).
 */

/** A transaction input as its bytes say: the output it spends, and its nSequence. */
export interface TxInput {
  txid: string;
  vout: number;
  sequence: number;
}

/** A transaction output as its bytes say: its index, its value in satoshis, its script (hex). */
export interface TxOutput {
  n: number;
  value: bigint;
  script: string;
}

/** A transaction parsed from its bytes, with its txid (and wtxid) computed from them. */
export interface ParsedTx {
  /** Double SHA-256 of the serialization without witness, as RPC writes it. */
  txid: string;
  /** The serialization without marker, flag and witnesses: what the txid hashes (a PSBT's non-witness UTXO). */
  stripped: Uint8Array;
  /** Double SHA-256 of the whole serialization (the txid where there is no witness). */
  wtxid: string;
  hasWitness: boolean;
  /** The first input's witness stack (the coinbase's carries the witness reserved value). */
  firstWitness: Uint8Array[];
  inputs: TxInput[];
  outputs: TxOutput[];
}

/** A block parsed from its bytes: its header's fields, its hash computed from them, its transactions. */
export interface ParsedBlock extends HeaderFields {
  previousblockhash: string;
  tx: ParsedTx[];
}

const hash256 = (bytes: Uint8Array): Uint8Array => sha256(sha256(bytes));
/** Hashed bytes as RPC writes the hash (byte-reversed hex). */
const display = (bytes: Uint8Array): string => bytesToHex(Uint8Array.from(bytes).reverse());
const txsCoder = BTCArray(RawTx);

type RawTransaction = ReturnType<typeof RawTx.decode>;

function parsedTx(tx: RawTransaction, whole: Uint8Array): ParsedTx {
  const hasWitness = tx.segwitFlag === true;
  // The txid hashes the serialization without the marker, flag and witnesses (BIP 144): written
  // again from what was parsed. The coders read canonical compact sizes only (as Core does), so
  // writing it again gives back the bytes read.
  const stripped = hasWitness ? RawOldTx.encode({ version: tx.version, inputs: tx.inputs, outputs: tx.outputs, lockTime: tx.lockTime }) : whole;
  const txid = display(hash256(stripped));
  return {
    txid,
    stripped,
    // Without a witness the two serializations are the same bytes: hashed once.
    wtxid: hasWitness ? display(hash256(whole)) : txid,
    hasWitness,
    firstWitness: tx.witnesses?.[0] ?? [],
    inputs: tx.inputs.map((i) => ({ txid: bytesToHex(i.txid), vout: i.index, sequence: i.sequence })),
    outputs: tx.outputs.map((o, n) => ({ n, value: o.amount, script: bytesToHex(o.script) })),
  };
}

/** The bytes of hex as a node writes them; a RangeError for anything else. */
function bytesOf(hex: unknown, what: string): Uint8Array {
  if (typeof hex !== "string" || hex.length % 2 !== 0 || !/^[0-9a-f]*$/i.test(hex)) throw new RangeError(`${what} is not hex`);
  return hexToBytes(hex);
}

/**
 * A transaction from its bytes (`getrawtransaction <txid> 0`), with its txid computed; a
 * RangeError where the bytes are not one whole transaction.
 */
export function parseTransaction(hex: unknown): ParsedTx {
  const bytes = bytesOf(hex, "the transaction");
  let tx: RawTransaction;
  try {
    tx = RawTx.decode(bytes);
  } catch (err) {
    throw new RangeError(`the transaction's bytes do not parse: ${(err as Error).message}`);
  }
  return parsedTx(tx, bytes);
}

/**
 * A block from its bytes (`getblock <hash> 0`): its 80-byte header's fields, the hash they hash
 * to, and every transaction with its txid and wtxid computed. `height` is the caller's (the
 * height it asked the hash of): the bytes do not say it. A block whose bytes do not parse is a
 * BlockRefused ("header") named by the hash asked for.
 */
export function parseBlock(hex: unknown, asked: { height: number; hash: string }): ParsedBlock {
  let bytes: Uint8Array;
  let txs: RawTransaction[];
  try {
    bytes = bytesOf(hex, "the block");
    if (bytes.length < 81) throw new RangeError(`${bytes.length} bytes is shorter than a header and a transaction count`);
    txs = txsCoder.decode(bytes.subarray(80));
  } catch (err) {
    throw new BlockRefused("header", asked, `its bytes do not parse as a block: ${(err as Error).message}`);
  }
  const h = readHeader(bytes.subarray(0, 80));
  // Each transaction's own bytes, for its wtxid: written again (canonical, as read).
  const tx = txs.map((t) => parsedTx(t, RawTx.encode(t)));
  return { ...h, height: asked.height, bits: h.bits.toString(16).padStart(8, "0"), tx };
}

/** An 80-byte header's fields, and the hash they hash to (as RPC writes hashes; bits as a number). */
function readHeader(header: Uint8Array) {
  const view = new DataView(header.buffer, header.byteOffset, 80);
  return {
    hash: display(hash256(header)),
    version: view.getInt32(0, true),
    previousblockhash: display(header.subarray(4, 36)),
    merkleroot: display(header.subarray(36, 68)),
    time: view.getUint32(68, true),
    bits: view.getUint32(72, true),
    nonce: view.getUint32(76, true),
  };
}

/**
 * A header from its 80 bytes as hex (`getblockheader <hash> false`): the hash its bytes hash to, its
 * parent's, its time and bits. A BlockRefused ("header") named by `asked` when it is not 80 bytes.
 */
export function parseHeader(hex: unknown, asked: { height: number; hash: string }): { hash: string; previous: string; time: number; bits: number } {
  if (typeof hex !== "string" || !/^[0-9a-f]{160}$/i.test(hex)) throw new BlockRefused("header", asked, "its header is not 80 bytes of hex");
  const h = readHeader(hexToBytes(hex));
  return { hash: h.hash, previous: h.previousblockhash, time: h.time, bits: h.bits };
}

/** BIP 141's commitment output: OP_RETURN, a 36-byte push, 0xaa21a9ed, then the 32-byte commitment. */
const commitmentPrefix = "6a24aa21a9ed";

/**
 * BIP 141: a block with any witness data commits to it in its coinbase: the last output whose
 * script begins 6a24aa21a9ed holds double SHA-256 of the witness merkle root (the wtxids, the
 * coinbase's taken as zero) and the coinbase's witness reserved value (its one 32-byte witness
 * item). A block with witnesses and no such commitment, or another value, is refused: the node
 * served witnesses no miner committed to. A block without witness data needs none.
 */
export function checkWitnessCommitment(b: ParsedBlock, merkleRoot: (ids: readonly string[]) => string): void {
  if (!b.tx.some((t) => t.hasWitness)) return;
  const coinbase = b.tx[0] as ParsedTx;
  const commitment = coinbase.outputs.filter((o) => o.script.length >= 76 && o.script.startsWith(commitmentPrefix)).at(-1);
  if (!commitment) throw new BlockRefused("witness_commitment", b, "it carries witness data but its coinbase commits to none");
  const reserved = coinbase.firstWitness;
  if (reserved.length !== 1 || reserved[0]?.length !== 32) throw new BlockRefused("witness_commitment", b, "its coinbase's witness is not one 32-byte reserved value");
  const root = merkleRoot(["00".repeat(32), ...b.tx.slice(1).map((t) => t.wtxid)]);
  const expected = bytesToHex(hash256(new Uint8Array([...hexToBytes(root).reverse(), ...(reserved[0] as Uint8Array)])));
  const named = commitment.script.slice(12, 76);
  if (named !== expected) throw new BlockRefused("witness_commitment", b, `its witnesses hash to commitment ${expected}, not the coinbase's ${named}`);
}
