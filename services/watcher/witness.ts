import type { ChainEndpoint } from "../platform/config.ts";
import { chainReader, type ChainReader } from "./chain-reader.ts";
import type { Output } from "./follow.ts";
import { redactNodeUrl } from "./evm-node.ts";
import { refusal } from "./node-check.ts";

/**
 * Other nodes of the chain a watcher follows (<NETWORK>_<ENVIRONMENT>_RPC_URL's further URLs),
 * asked to agree before a batch is reported: an EVM block carries no proof of its own, so one
 * node's word (a compromised provider, a node left on a minority fork) would otherwise be enough
 * to count a payment. A batch's last block must have the hash a witness answers for its height,
 * and every transfer in the batch must be told again by a witness (confirmTransfers): the blocks
 * below the top are tied to it only by the parent hashes the read node wrote, so a transfer in an
 * invented block below a real top would otherwise pass.
 */
export class Witnesses {
  readonly #e: ChainEndpoint;
  readonly #nodes: { url: string; reader: ChainReader; refused: string | undefined }[];

  constructor(e: ChainEndpoint) {
    this.#e = e;
    this.#nodes = e.witnesses.map((url) => ({ url, reader: chainReader({ ...e, url, witnesses: [] }), refused: undefined }));
  }

  get size(): number {
    return this.#nodes.length;
  }

  /**
   * Asks each node which chain it serves, as the node read is asked: one that must not be
   * followed (another chain, still syncing) is not asked to agree until it proves itself. Returns
   * the nodes whose standing changed, for the log.
   */
  async prove(pinned: string | undefined): Promise<{ node: string; refused: string | undefined }[]> {
    const changed: { node: string; refused: string | undefined }[] = [];
    await Promise.all(
      this.#nodes.map(async (n) => {
        let why: string | undefined;
        try {
          why = refusal(this.#e, await n.reader.facts(), pinned);
        } catch (err) {
          why = `it does not answer: ${(err as Error).message.split("\n")[0]}`;
        }
        if (why !== n.refused) changed.push({ node: redactNodeUrl(n.url), refused: why });
        n.refused = why;
      }),
    );
    return changed;
  }

  /** The highest head any node answers (undefined: none answers); a failed call is no answer. */
  async head(): Promise<number | undefined> {
    const heads = await Promise.all(this.#usable().map((n) => n.reader.source.headHeight().catch(() => undefined)));
    return witnessedHead(heads);
  }

  /** What each node answers for the hash at `height` (undefined: no block there, no answer, or not asked). */
  async hashesAt(height: number): Promise<(string | undefined)[]> {
    return Promise.all(this.#nodes.map((n) => (n.refused === undefined ? n.reader.source.hashAt(height).catch(() => undefined) : Promise.resolve(undefined))));
  }

  /**
   * Each transfer of a batch, told again by a second node: the first one that no witness able to
   * tell it agrees with (undefined: each has a witness's word), with what each witness said. The
   * top block's hash vouches for the blocks below it only as far as the read node's parent links
   * go, and those are its own word: a transfer in an invented block below a real top is caught
   * here, since no honest node has its transaction. Witnesses that cannot tell a transfer (TRON)
   * are not asked: there the top block's agreement is all.
   */
  async confirmTransfers(outputs: readonly Output[]): Promise<{ output: Output; answers: string[] } | undefined> {
    const able = this.#usable().filter((n) => n.reader.confirm !== undefined);
    if (able.length === 0 || outputs.length === 0) return undefined;
    const answers = await Promise.all(
      able.map((n) =>
        (n.reader.confirm as NonNullable<ChainReader["confirm"]>)(outputs).catch((err: Error) => outputs.map(() => `it does not answer: ${err.message.split("\n")[0]}`)),
      ),
    );
    const i = outputs.findIndex((_, i) => !answers.some((a) => a[i] === undefined));
    return i < 0 ? undefined : { output: outputs[i] as Output, answers: answers.map((a) => a[i] as string) };
  }

  async close(): Promise<void> {
    await Promise.allSettled(this.#nodes.map((n) => n.reader.close()));
  }

  #usable() {
    return this.#nodes.filter((n) => n.refused === undefined);
  }
}

/** The highest of the heads answered, undefined when none was. */
export function witnessedHead(heads: readonly (number | undefined)[]): number | undefined {
  const answered = heads.filter((h): h is number => h !== undefined);
  return answered.length === 0 ? undefined : Math.max(...answered);
}

/**
 * How far the watcher reads: no further than a witness has seen (a node a block ahead of the
 * others is waited for, not called a liar). With no witness answering, the node's own head: the
 * batch is read, and refused for want of agreement before it is reported.
 */
export function headToRead(nodeHead: number, witnessHead: number | undefined): number {
  return witnessHead === undefined ? nodeHead : Math.min(nodeHead, witnessHead);
}

/** Whether a block's hash, as the node read it, is what a witness answers for its height. */
export function agreed(hash: string, answers: readonly (string | undefined)[]): boolean {
  return answers.some((a) => a !== undefined && a.toLowerCase() === hash.toLowerCase());
}
