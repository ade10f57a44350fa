/** A block that could not be read even on its own: named by height, so the watcher's log says which (it retries it with backoff, never skips it). */
export class BlockReadError extends Error {
  readonly height: number;
  constructor(height: number, cause: unknown) {
    // A node client's message may run over several lines (viem adds the request); the first says why.
    super(`block ${height} could not be read: ${(cause instanceof Error ? cause.message : String(cause)).split("\n")[0]}`, { cause });
    this.name = "BlockReadError";
    this.height = height;
  }
}

/**
 * Blocks from..to (inclusive) read by `read` in as few parts as fit: the whole range first; a part
 * that fails for a reason `split` accepts (its answer too large, say) is read again in halves, and
 * the rest of the range goes on in parts of the size that worked, down to one block per read. A
 * block that cannot be read on its own is a BlockReadError; any other failure is thrown as it is
 * (the node is down: asking in smaller parts would not help). Parts are read one after another, so
 * that a client that batches requests made together cannot merge them again. Undefined as soon
 * as a part is (the chain changed under the read).
 */
export async function readInParts<T>(
  from: number,
  to: number,
  read: (from: number, to: number) => Promise<T[] | undefined>,
  split: (err: unknown) => boolean,
): Promise<T[] | undefined> {
  const out: T[] = [];
  let span = to - from + 1;
  for (let start = from; start <= to; ) {
    const end = Math.min(to, start + span - 1);
    let part: T[] | undefined;
    try {
      part = await read(start, end);
    } catch (err) {
      if (end === start) throw new BlockReadError(start, err);
      if (!split(err)) throw err;
      span = Math.ceil((end - start + 1) / 2);
      continue;
    }
    if (part === undefined) return undefined;
    out.push(...part);
    start = end + 1;
  }
  return out;
}

/**
 * Like Promise.all, but ends only once every request has: a part that failed leaves none of its
 * requests still running (a node's work queue, a download) when the smaller parts go out.
 */
export async function allSettled<T>(requests: readonly Promise<T>[]): Promise<T[]> {
  const results = await Promise.allSettled(requests);
  const failed = results.find((r) => r.status === "rejected");
  if (failed) throw failed.reason;
  return results.map((r) => (r as PromiseFulfilledResult<T>).value);
}
