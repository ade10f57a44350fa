// The derivation thread (derivation.ts): derives the addresses it is asked for, off the event loop.
import { parentPort } from "node:worker_threads";
import { BaseTable } from "./base-table.ts";
import { builtinAddresses, useBaseTable } from "./keys.ts";

export interface DeriveRequest {
  id: number;
  network: string;
  indices: number[];
}

export interface DeriveResponse {
  id: number;
  addresses?: string[];
  error?: string;
}

// A child address costs one multiplication of the base point. A comb table of 10-bit windows
// (26 rows of 1 023 points, about 12 MB, under half a second of CPU to build) does it in 26
// additions, affine ones for a block of addresses (see BaseTable.multiplyMany); noble with a
// table of the same windows takes 54 projective ones (its constant-time kernel adds a fake point
// per window too), with its default table 88. It pays for itself after a thousand or
// so addresses, so it is built once this thread has derived a few blocks: a process that makes a
// handful of intents never builds it. It is built a row at a time between requests, which are
// answered with noble's multiplication meanwhile: built in one go, it held up every request for
// its half second (seconds on a busy machine), while creates waited for their addresses.
const tableAfter = 1024;
let derived = 0;

function buildTableBetweenRequests(): void {
  const build = BaseTable.build(10);
  const step = () => {
    const next = build.next();
    if (next.done) useBaseTable(next.value);
    else setImmediate(step);
  };
  setImmediate(step);
}

parentPort?.on("message", (req: DeriveRequest) => {
  let res: DeriveResponse;
  try {
    if (derived < tableAfter && derived + req.indices.length >= tableAfter) buildTableBetweenRequests();
    derived += req.indices.length;
    res = { id: req.id, addresses: builtinAddresses(req.network, req.indices) };
  } catch (err) {
    res = { id: req.id, error: (err as Error).message };
  }
  parentPort?.postMessage(res);
});
