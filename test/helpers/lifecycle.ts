import { Code, ConnectError, createClient, type Client } from "@connectrpc/connect";
import { ErrorDetailSchema } from "../../gen/payments/v1/options_pb.ts";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { ObservationService } from "../../gen/payments/v1/observations_pb.ts";
import { ChainService } from "../../gen/payments/v1/chains_pb.ts";
import { createInternalCredential } from "../../services/auth/admin.ts";
import type { App } from "../../services/app/app.ts";
import type { Environment } from "../../services/auth/keys.ts";
import { networks as allNetworks } from "../../services/vocabulary/assets.ts";

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
  const { headers } = await watcherClient(app, rpcUrl, "test", ["ethereum"]);
  const chains = createClient(ChainService, createGrpcTransport({ baseUrl: rpcUrl }));
  const deadline = Date.now() + 20_000;
  let holder = await chains.claimChain({ network: "ethereum", watcherId, leaseSeconds: 60 }, { headers });
  while (!holder.active) {
    if (Date.now() > deadline) throw new Error("the ethereum lease: not within 20000 ms");
    await new Promise((resolve) => setTimeout(resolve, 100));
    holder = await chains.claimChain({ network: "ethereum", watcherId, leaseSeconds: 60 }, { headers });
  }
  const recent = holder.position?.recentBlocks.at(-1);
  const height = BigInt(Number(recent?.height ?? 99n) + 1);
  const txHash = hash();
  await chains.reportBlocks(
    {
      network: "ethereum",
      watcherId,
      leaseEpoch: holder.epoch,
      blocks: [{ height, hash: hash(), parentHash: recent?.hash ?? hash(), outputs: [{ ...output, txHash, outputIndex: 0 }] }],
      headHeight: height,
    },
    { headers },
  );
  return txHash;
}
