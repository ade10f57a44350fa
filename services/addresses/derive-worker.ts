// The derivation thread (derivation.ts): derives the addresses it is asked for, off the event loop.
import { parentPort } from "node:worker_threads";
import { builtinAddress } from "./keys.ts";

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

parentPort?.on("message", (req: DeriveRequest) => {
  let res: DeriveResponse;
  try {
    res = { id: req.id, addresses: req.indices.map((i) => builtinAddress(req.network, i)) };
  } catch (err) {
    res = { id: req.id, error: (err as Error).message };
  }
  parentPort?.postMessage(res);
});
