/** The deposit addresses a chain watcher looks for, kept the way its chain's outputs are matched. */
export interface WatchedAddresses {
  add(address: string): void;
  clear(): void;
  readonly size: number;
}
