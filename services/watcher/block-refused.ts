/**
 * A block a node served that fails a check of what it says of itself (bitcoin: its header, proof
 * of work, merkle root, witness commitment, target; EVM: its header's fields hash to another hash
 * than it names, or a log the node tells of in it is not in its logs bloom): nothing of it is believed, and the read fails whole (role.ts counts it in
 * chain_blocks_refused_total and names it once in the log).
 */

/** Which check a block failed: a label of chain_blocks_refused_total and a word of the log line. */
export type BlockCheck = "header" | "proof_of_work" | "merkle_root" | "duplicate_tx" | "witness_commitment" | "target" | "checkpoint" | "logs_bloom";

/** A block that failed a check: nothing of it is believed. */
export class BlockRefused extends Error {
  readonly check: BlockCheck;
  readonly height: number;
  readonly hash: string;
  constructor(check: BlockCheck, block: { height: number; hash: string }, reason: string) {
    super(`block ${block.height} (${block.hash}) refused, ${check}: ${reason}`);
    this.name = "BlockRefused";
    this.check = check;
    this.height = block.height;
    this.hash = block.hash;
  }
}

