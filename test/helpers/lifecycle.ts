import { Code, ConnectError, createClient, type Client } from "@connectrpc/connect";
import { ErrorDetailSchema } from "../../gen/payments/v1/options_pb.ts";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { ObservationService } from "../../gen/payments/v1/observations_pb.ts";
import { ChainService } from "../../gen/payments/v1/chains_pb.ts";
import { createInternalCredential } from "../../services/auth/admin.ts";
import type { App } from "../../services/app/app.ts";
import type { Environment } from "../../services/auth/keys.ts";
import { mainnetBlock0, networks as allNetworks } from "../../services/vocabulary/assets.ts";

/**
 * A chain watcher's internal credential (role observe) in `environment`, speaking for `networks`
 * (default: every supported one), and an ObservationService client that sends it (gRPC on RPC_PORT).
 */
export async function watcherClient(
  app: App,
  rpcUrl: string,
  environment: Environment = "live",
  networks: readonly string[] = allNetworks,
): Promise<{ client: Client<typeof ObservationService>; headers: Record<string, string>; credential: string; id: string }> {
  const created = await createInternalCredential(app.db.em.fork(), "test chain watcher", ["observe"], environment, { networks });
  const headers = { authorization: `Bearer ${created.credential}` };
  return { client: createClient(ObservationService, createGrpcTransport({ baseUrl: rpcUrl })), headers, credential: created.credential, id: created.id };
}

let blocks = 0;
/** A fresh 64-hex hash (transactions, blocks). */
export function hash(): string {
  return (Date.now().toString(16) + (++blocks).toString(16) + Math.random().toString(16).slice(2)).padEnd(64, "0").slice(0, 64);
}

/** How a gRPC call was refused: its code and the documented error code; both undefined when it went through. */
export async function refusal(p: Promise<unknown>): Promise<{ code: Code | undefined; detail: string | undefined }> {
  return p.then(
    () => ({ code: undefined, detail: undefined }),
    (e: unknown) => {
      const err = ConnectError.from(e);
      return { code: err.code, detail: err.findDetails(ErrorDetailSchema)[0]?.code };
    },
  );
}

/**
 * A Test ethereum watcher's report of one block holding one output to `toAddress`, through
 * ChainService as a watcher sends it (it takes the lease first); returns the output's tx hash.
 */
export async function reportEthereumOutput(app: App, rpcUrl: string, watcherId: string, output: { toAddress: string; asset: string; amount: string }): Promise<string> {
  return reportChainOutput(app, rpcUrl, watcherId, "ethereum", output);
}

/**
 * reportEthereumOutput on any network a built-in watcher could follow but none does in the test's
 * app, in Test unless told; `confirmations` blocks deep (empty blocks reported on top of its own; default 1).
 */
export async function reportChainOutput(
  app: App,
  rpcUrl: string,
  watcherId: string,
  network: string,
  output: { toAddress: string; asset: string; amount: string },
  o: { confirmations?: number; environment?: Environment } = {},
): Promise<string> {
  const confirmations = o.confirmations ?? 1;
  const { headers } = await watcherClient(app, rpcUrl, o.environment ?? "test", [network]);
  const chains = createClient(ChainService, createGrpcTransport({ baseUrl: rpcUrl }));
  const deadline = Date.now() + 20_000;
  let holder = await chains.claimChain({ network, watcherId, leaseSeconds: 60 }, { headers });
  while (!holder.active) {
    if (Date.now() > deadline) throw new Error(`the ${network} lease: not within 20000 ms`);
    await new Promise((resolve) => setTimeout(resolve, 100));
    holder = await chains.claimChain({ network, watcherId, leaseSeconds: 60 }, { headers });
  }
  const recent = holder.position?.recentBlocks.at(-1);
  const height = BigInt(Number(recent?.height ?? 99n) + 1);
  const txHash = hash();
  // The output's block, then empty ones on it until it is `confirmations` deep.
  const blocks = [{ height, hash: hash(), parentHash: recent?.hash ?? hash(), outputs: [{ ...output, txHash, outputIndex: 0 }] }];
  while (blocks.length < confirmations) {
    const parent = blocks.at(-1) as (typeof blocks)[number];
    blocks.push({ height: parent.height + 1n, hash: hash(), parentHash: parent.hash, outputs: [] });
  }
  // Live counts only on mainnet: a Live report names its block 0.
  const genesisHash = o.environment === "live" ? (mainnetBlock0(network) ?? "") : "";
  await chains.reportBlocks({ network, watcherId, leaseEpoch: holder.epoch, blocks, headHeight: (blocks.at(-1) as (typeof blocks)[number]).height, genesisHash }, { headers });
  return txHash;
}
