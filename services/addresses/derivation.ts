import { Worker } from "node:worker_threads";
import type { DeriveRequest, DeriveResponse } from "./derive-worker.ts";
import { builtinAddresses } from "./keys.ts";

/**
 * Derives built-in Test addresses on a thread of its own (one per process, started on first
 * use, never keeping the process alive): an address costs a point multiplication, which on the
 * event loop was most of a create's CPU. If the thread cannot run, the addresses are derived
 * here instead.
 */
class DerivationThread {
  #worker: Worker | undefined;
  #failed = false;
  #next = 1;
  #pending = new Map<number, { resolve: (a: string[]) => void; reject: (e: Error) => void }>();

  derive(network: string, indices: number[]): Promise<string[]> {
    const worker = this.#start();
    if (!worker) return Promise.resolve(builtinAddresses(network, indices));
    const id = this.#next++;
    return new Promise<string[]>((resolve, reject) => {
      this.#pending.set(id, { resolve, reject });
      // Held open only while an answer is awaited.
      worker.ref();
      worker.postMessage({ id, network, indices } satisfies DeriveRequest);
    }).catch(() => builtinAddresses(network, indices));
  }

  /** False once the thread could not start or has died: derive() then works on the caller's thread. */
  get available(): boolean {
    return !this.#failed;
  }

  /** Starts the thread ahead of its first request (loading it takes a few hundred milliseconds). */
  warm(): void {
    this.#start();
  }

  #start(): Worker | undefined {
    if (this.#worker || this.#failed) return this.#worker;
    try {
      const worker = new Worker(new URL("./derive-worker.ts", import.meta.url));
      worker.on("message", (res: DeriveResponse) => {
        const pending = this.#pending.get(res.id);
        this.#pending.delete(res.id);
        if (this.#pending.size === 0) worker.unref();
        if (res.addresses) pending?.resolve(res.addresses);
        else pending?.reject(new Error(res.error ?? "derivation failed"));
      });
      const fail = (err: Error) => {
        this.#failed = true;
        this.#worker = undefined;
        for (const p of this.#pending.values()) p.reject(err);
        this.#pending.clear();
      };
      worker.on("error", fail);
      worker.on("exit", () => fail(new Error("the derivation thread exited")));
      // After the listeners: adding a message listener refs the worker's port again.
      worker.unref();
      this.#worker = worker;
    } catch {
      this.#failed = true;
    }
    return this.#worker;
  }
}

export const derivationThread = new DerivationThread();
