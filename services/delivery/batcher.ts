/**
 * Gathers calls made in the same turn of the event loop (e.g. the messages of
 * one pull) into one call of `run`, so a batch costs one database round trip
 * instead of one per item. `run` returns one result per item, in order.
 * When a batch fails with an error `isolate` accepts (one item's fault, not the
 * database's), each item is run again on its own, so one bad item fails alone.
 */
export class Batcher<I, O> {
  private items: { item: I; resolve(o: O): void; reject(err: unknown): void }[] = [];
  private scheduled = false;
  private readonly run: (items: I[]) => Promise<O[]>;
  private readonly max: number;
  private readonly isolate: (err: unknown) => boolean;

  constructor(run: (items: I[]) => Promise<O[]>, opts: { max?: number; isolate?: (err: unknown) => boolean } = {}) {
    this.run = run;
    this.max = opts.max ?? 100;
    this.isolate = opts.isolate ?? (() => false);
  }

  add(item: I): Promise<O> {
    return new Promise((resolve, reject) => {
      this.items.push({ item, resolve, reject });
      if (this.items.length >= this.max) this.flush();
      else if (!this.scheduled) {
        this.scheduled = true;
        setImmediate(() => this.flush());
      }
    });
  }

  private flush(): void {
    this.scheduled = false;
    const batch = this.items;
    this.items = [];
    if (batch.length === 0) return;
    this.run(batch.map((b) => b.item)).then(
      (results) => batch.forEach((b, i) => b.resolve(results[i]!)),
      (err) => {
        if (batch.length === 1 || !this.isolate(err)) return batch.forEach((b) => b.reject(err));
        for (const b of batch) this.run([b.item]).then((results) => b.resolve(results[0]!), b.reject);
      },
    );
  }
}
