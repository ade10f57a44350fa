import { Code, ConnectError, createClient, type Client } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { AdminService } from "../../gen/payments/v1/admin_pb.ts";
import type { Config } from "../platform/config.ts";

/** A failure of a CLI command that calls the running service: one line on stderr, then the exit code. */
export class RemoteError extends Error {
  exitCode: number;
  constructor(message: string, exitCode: number) {
    super(message);
    this.exitCode = exitCode;
  }
}

/**
 * The running service's AdminService (RPC_URL), called with the internal credential in
 * INTERNAL_CREDENTIAL (`admin internal-credential create` makes one). The CLI goes through the
 * service rather than the database because the rpc role holds the key the signing secrets are
 * sealed with, and a recovery's deliveries reach the outbox relay of the running workers.
 */
export function adminClient(config: Config, env: Record<string, string | undefined> = process.env): { client: Client<typeof AdminService>; headers: Record<string, string> } {
  const credential = env.INTERNAL_CREDENTIAL?.trim();
  if (!credential) throw new RemoteError("INTERNAL_CREDENTIAL must hold an internal credential (admin internal-credential create --name NAME)", 2);
  return {
    client: createClient(AdminService, createGrpcTransport({ baseUrl: config.rpcUrl })),
    headers: { authorization: `Bearer ${credential}` },
  };
}

/** The service's refusal as one line (its message names the problem, never the credential); bad input exits 2, anything else 1. */
export function remoteError(err: unknown, rpcUrl: string): RemoteError {
  if (!(err instanceof ConnectError)) return new RemoteError(`failed: ${(err as Error).message}`, 1);
  if (err.code === Code.Unavailable) return new RemoteError(`the service is not reachable at RPC_URL ${rpcUrl} (${err.rawMessage})`, 1);
  const input = [Code.InvalidArgument, Code.NotFound, Code.FailedPrecondition, Code.Unauthenticated, Code.PermissionDenied].includes(err.code);
  return new RemoteError(`${Code[err.code]}: ${err.rawMessage}`, input ? 2 : 1);
}

/** An RFC 3339 time with its offset (a bare date or local time would be read in the machine's zone); undefined if it is not one. */
export function parseTime(text: string | undefined): Date | undefined {
  const t = text?.trim() ?? "";
  const at = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/i.test(t) ? new Date(t) : new Date(NaN);
  return Number.isNaN(at.getTime()) ? undefined : at;
}
