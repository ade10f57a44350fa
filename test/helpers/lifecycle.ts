import { createClient, type Client } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { ObservationService } from "../../gen/payments/v1/observations_pb.ts";
import { createInternalCredential } from "../../services/auth/admin.ts";
import type { App } from "../../services/app/app.ts";
import type { Environment } from "../../services/auth/keys.ts";

/** A chain watcher's internal credential (role observe) in `environment`, and an ObservationService client that sends it (gRPC on RPC_PORT). */
export async function watcherClient(
  app: App,
  rpcUrl: string,
  environment: Environment = "live",
): Promise<{ client: Client<typeof ObservationService>; headers: Record<string, string>; credential: string }> {
  const created = await createInternalCredential(app.db.em.fork(), "test chain watcher", ["observe"], environment);
  const headers = { authorization: `Bearer ${created.credential}` };
  return { client: createClient(ObservationService, createGrpcTransport({ baseUrl: rpcUrl })), headers, credential: created.credential };
}

let blocks = 0;
/** A fresh 64-hex hash (transactions, blocks). */
export function hash(): string {
  return (Date.now().toString(16) + (++blocks).toString(16) + Math.random().toString(16).slice(2)).padEnd(64, "0").slice(0, 64);
}
