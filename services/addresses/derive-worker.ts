// The derivation thread (derivation.ts): derives the addresses it is asked for, off the event loop.
import { parentPort } from "node:worker_threads";
import { secp256k1 } from "@noble/curves/secp256k1.js";
import { builtinAddresses } from "./keys.ts";

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

// A child address costs one multiplication of the base point. A table at 10-bit windows (about
// 10 MB, a quarter of a second of CPU to build) does it in 26 additions instead of the default
// 6-bit table's 43. It pays for itself after a couple of thousand addresses, so it is built
// once this thread has derived a few blocks: a process that makes a handful of intents never
// builds it. Only this thread's copy of the curve gets the bigger table.
const tableAfter = 1024;
let derived = 0;

parentPort?.on("message", (req: DeriveRequest) => {
  let res: DeriveResponse;
  try {
    if (derived < tableAfter && derived + req.indices.length >= tableAfter) secp256k1.Point.BASE.precompute(10, false);
    derived += req.indices.length;
    res = { id: req.id, addresses: builtinAddresses(req.network, req.indices) };
  } catch (err) {
    res = { id: req.id, error: (err as Error).message };
  }
  parentPort?.postMessage(res);
});
