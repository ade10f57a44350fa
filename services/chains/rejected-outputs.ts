import type { EntityManager } from "../platform/db.ts";
import type { Environment } from "../auth/keys.ts";

/** The only writer of chain_rejected_observations: the outputs the core refused, kept for operators (ops rejected-outputs); retention deletes them. */

/** What was reported of an output the core refused, as sent (cut to fit), and why. */
export interface Rejection {
  network: string;
  environment: Environment;
  txHash: string;
  outputIndex: number;
  asset: string;
  toAddress: string;
  amount: string;
  blockHash: string | null;
  reason: string;
}

const cut = (s: string, n: number) => (s.length > n ? `${s.slice(0, n - 1)}…` : s);

/** Keeps a refused output for operators: once per output, counting how often it was reported. */
export async function recordRejection(em: EntityManager, r: Rejection): Promise<void> {
  await em.execute(
    `insert into chain_rejected_observations (network, environment, tx_hash, output_index, asset, to_address, amount, block_hash, reason, first_at, last_at)
     values (?, ?, ?, ?, ?, ?, ?, ?, ?, now(), now())
     on conflict (network, environment, tx_hash, output_index) do update set
       reason = excluded.reason, amount = excluded.amount, block_hash = excluded.block_hash, last_at = now(),
       reports = chain_rejected_observations.reports + 1`,
    [r.network, r.environment, cut(r.txHash, 200), r.outputIndex, cut(r.asset, 32), cut(r.toAddress, 200), cut(r.amount, 200), r.blockHash && cut(r.blockHash, 200), cut(r.reason, 500)],
  );
}

/** Refused outputs for operators, the most recently reported first. */
export async function listRejections(em: EntityManager, limit: number) {
  return em.execute<
    { network: string; environment: string; tx_hash: string; output_index: number; asset: string; to_address: string; amount: string; block_hash: string | null; reason: string; reports: number; first_at: Date; last_at: Date }[]
  >(
    `select network, environment, tx_hash, output_index, asset, to_address, amount, block_hash, reason, reports, first_at, last_at
       from chain_rejected_observations order by last_at desc, tx_hash, output_index limit ?`,
    [limit],
  );
}
