import { keccak256, toRlp, type Hex } from "viem";

/**
 * An EVM block's hash from its header's fields: keccak-256 of the RLP list of them, in the order
 * geth (and Bor, Polygon's) writes them: the 15 of the Frontier header, then each field a later
 * fork appended, present from that fork on (London's baseFeePerGas, Shanghai's withdrawalsRoot,
 * Cancun's blobGasUsed, excessBlobGas and parentBeaconBlockRoot, Prague's requestsHash). A node
 * writes in its JSON exactly the fields its block's header has, so the fields present are the
 * ones hashed. Numbers are RLP's big-endian bytes without leading zeros (zero: the empty string).
 * With the hash recomputed, a block's parent hash is its own (it is one of the hashed fields): a
 * node cannot pass off an invented parent below a real block whose hash a witness agrees with.
 */

/** The header's fields in their RLP order; `number` fields are quantities, the others byte strings. */
const fields: readonly { name: string; number?: true; since?: string }[] = [
  { name: "parentHash" },
  { name: "sha3Uncles" },
  { name: "miner" },
  { name: "stateRoot" },
  { name: "transactionsRoot" },
  { name: "receiptsRoot" },
  { name: "logsBloom" },
  { name: "difficulty", number: true },
  { name: "number", number: true },
  { name: "gasLimit", number: true },
  { name: "gasUsed", number: true },
  { name: "timestamp", number: true },
  { name: "extraData" },
  { name: "mixHash" },
  { name: "nonce" },
  { name: "baseFeePerGas", number: true, since: "London" },
  { name: "withdrawalsRoot", since: "Shanghai" },
  { name: "blobGasUsed", number: true, since: "Cancun" },
  { name: "excessBlobGas", number: true, since: "Cancun" },
  { name: "parentBeaconBlockRoot", since: "Cancun" },
  { name: "requestsHash", since: "Prague" },
];

/** The first of the fields a fork appended; from it on each must be present once one after it is. */
const optionalFrom = fields.findIndex((f) => f.since !== undefined);

/** A quantity (a JSON-RPC hex string, a bigint or a number) as RLP writes it: minimal big-endian bytes. */
function quantity(v: unknown, name: string): Hex {
  let n: bigint;
  if (typeof v === "bigint") n = v;
  else if (typeof v === "number" && Number.isSafeInteger(v)) n = BigInt(v);
  else if (typeof v === "string" && /^0x[0-9a-fA-F]+$/.test(v)) n = BigInt(v);
  else throw new RangeError(`${name} is not a quantity`);
  if (n < 0n) throw new RangeError(`${name} is negative`);
  if (n === 0n) return "0x";
  const hex = n.toString(16);
  return `0x${hex.length % 2 ? "0" : ""}${hex}`;
}

function bytes(v: unknown, name: string): Hex {
  if (typeof v !== "string" || !/^0x([0-9a-fA-F]{2})*$/.test(v)) throw new RangeError(`${name} is not hex bytes`);
  return v.toLowerCase() as Hex;
}

/**
 * The hash a block's header fields hash to (a block as eth_getBlockByNumber writes it, or as viem
 * formats it: quantities as bigints). A RangeError when a field is malformed, or when a fork's
 * field is missing below one that is present (no header has that shape).
 */
export function evmHeaderHash(block: Readonly<Record<string, unknown>>): Hex {
  const present = (name: string) => block[name] !== undefined && block[name] !== null;
  let last = optionalFrom - 1;
  fields.forEach((f, i) => {
    if (i >= optionalFrom && present(f.name)) last = i;
  });
  const list = fields.slice(0, last + 1).map((f) => {
    if (!present(f.name)) throw new RangeError(`the header has no ${f.name}${f.since ? ` (${f.since})` : ""} but fields after it`);
    return f.number ? quantity(block[f.name], f.name) : bytes(block[f.name], f.name);
  });
  return keccak256(toRlp(list));
}
