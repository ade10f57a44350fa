import { randomBytes } from "node:crypto";

/** A refusal from the server, with its error envelope's code and message. */
export class ApiRefused extends Error {
  readonly status: number;
  readonly code: string;
  constructor(status: number, code: string, message: string) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

/** The public REST API as the command calls it: one base URL and one key. */
export interface Api {
  base: string;
  key: string;
}

export interface CurrentKey {
  id: string;
  merchant: string;
  environment: "test" | "live";
  scopes: string[];
}

/** A REST call; a non-2xx answer throws ApiRefused with the envelope's code and message. */
export async function call<T>(api: Api, method: "GET" | "POST", path: string, body?: unknown, idempotent = false): Promise<T> {
  const headers: Record<string, string> = { authorization: `Bearer ${api.key}` };
  if (body !== undefined) headers["content-type"] = "application/json";
  if (idempotent) headers["idempotency-key"] = `listen-${randomBytes(12).toString("hex")}`;
  let res: Response;
  try {
    res = await fetch(`${api.base}${path}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), signal: AbortSignal.timeout(30_000) });
  } catch (err) {
    const e = err as Error & { cause?: { code?: string } };
    throw new Error(`${api.base} does not answer (${e.cause?.code ?? e.message}): is the server running? Give its address with --api-base.`);
  }
  const text = await res.text();
  let json: { error?: { code?: string; message?: string } } & Record<string, unknown>;
  try {
    json = JSON.parse(text);
  } catch {
    throw new ApiRefused(res.status, "not_json", `${method} ${path} answered ${res.status} with no JSON: is ${api.base} this service's API?`);
  }
  if (!res.ok) throw new ApiRefused(res.status, json.error?.code ?? "unknown", json.error?.message ?? `HTTP ${res.status}`);
  return json as T;
}

export async function currentKey(api: Api): Promise<CurrentKey> {
  return (await call<{ data: CurrentKey }>(api, "GET", "/api/v1/api-key")).data;
}
