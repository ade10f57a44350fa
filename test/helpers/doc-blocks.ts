// Which test runs each ```sh block of the README and docs/, and the blocks no test can run, with
// the reason. test/unit/doc-blocks.test.ts checks that every block is one or the other.
import { readFileSync } from "node:fs";
import path from "node:path";

const root = path.resolve(import.meta.dirname, "../..");

export interface ShBlock {
  /** The nearest heading above the block. */
  heading: string;
  body: string;
}

/** Every ```sh block of a markdown file, with the heading it sits under. */
export function shBlocks(file: string): ShBlock[] {
  const text = readFileSync(path.join(root, file), "utf8");
  const out: ShBlock[] = [];
  let heading = "";
  for (const m of text.matchAll(/^(#{1,6} .+)$|^```sh\n([\s\S]*?)^```$/gm)) {
    if (m[1]) heading = m[1];
    else out.push({ heading, body: (m[2] ?? "").replace(/\n$/, "") });
  }
  return out;
}

/** The README's blocks that test/integration/walkthrough.test.ts runs step by step, by heading (it reads the one block under each). */
export const walkthroughHeadings = {
  walkthrough: "## Walk-through with curl",
  listen: "### Webhooks on your machine",
  webhooks: "### Webhook endpoints on your machine",
  pay: "### Pay a Test intent with a real transaction",
} as const;

/** The guides test/integration/docs-commands.test.ts runs every block of, in this order (a reader's order: later blocks use earlier ones' variables). */
export const docsInOrder = ["docs/api.md", "docs/webhooks.md", "docs/payments.md", "docs/operations.md", "docs/reliability.md", "docs/performance.md", "docs/architecture.md"];

/** A block by its file and first line. */
export const blockId = (file: string, b: ShBlock) => `${file}: ${b.body.split("\n")[0]}`;

/** Blocks not run, by blockId, and why. */
export const notRun: Record<string, string> = {
  "docs/webhooks.md: export PAYMENTS_API_KEY=sk_test_...            # or --api-key; a Test key, or a Live one with webhooks:listen":
    "listen runs until stopped, forwarding to a receiver of the reader's; test/integration/listen.test.ts runs listen, trigger, resend and the stream as a process against a started app, and the README's \"Webhooks on your machine\" (run by test/integration/walkthrough.test.ts) runs --print-secret, listen and trigger as written",
  "README.md: npm ci && npm start      # runs every role in one process, on an embedded database":
    "installs, starts a server that runs until stopped, and runs the whole suite; CI (.ci/run) runs `npm ci`, `npm test` and `npm run bench -- --quick`, and test/integration/start.test.ts starts main.ts as `npm start` does",
  "docs/operations.md: nats stream info <prefix>-webhook-deliveries": "the nats CLI is a separate tool, not a dependency; `npm run ops -- consumers` (run above) shows the same",
  "docs/operations.md: # 1. Every process: the new key, the old one beside it. They open secrets of either key and keep":
    "steps across restarts of every process; test/integration/encryption-key.test.ts runs the same reseal and restarts",
  "docs/payments.md: # bitcoin.conf of a testnet4 node: server=1, testnet4=1, and under [testnet4] rpcbind, rpcallowip and":
    "needs a Bitcoin Core node, which is not installable here; test/integration/bitcoin-watcher-processes.test.ts runs the watcher with BITCOIN_TEST_RPC_URL against a regtest node behind Bitcoin Core's RPC",
  "docs/payments.md: # 1. In a terminal of its own (stop the Ethereum dev chain first, or set another DEVCHAIN_PORT in both).":
    "starts the tron dev chain and a server following it, each running until stopped in a terminal of its own; test/integration/tron-watcher.test.ts follows the same dev chain (startDevChain with network tron) through TRON_TEST_RPC_URL and pays T… addresses with the signPayment that `npm run pay` calls, and test/unit/devchain-pay.test.ts runs `npm run pay` with a T… address",
  "docs/payments.md: ETHEREUM_LIVE_RPC_URL=https://eth.internal:8545,https://mainnet.provider.example/v2/KEY npm start":
    "a server following two Live mainnet nodes, running until stopped; test/integration/evm-witness.test.ts runs the app with ETHEREUM_LIVE_RPC_URL naming two nodes (dev chains passing for mainnet) that agree, then disagree, then agree again",
  "docs/payments.md: npm run -s admin -- internal-credential create --name watcher --roles observe --environment live --networks ethereum":
    "a watcher of a Live mainnet node on another machine; test/integration/evm-watcher-processes.test.ts runs `main.ts watcher` the same way against anvil",
};
