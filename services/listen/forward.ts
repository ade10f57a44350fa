import { signPayload, userAgent } from "../delivery/signature.ts";

export interface Forwarded {
  status: number | null;
  /** Why there was no answer (refused, timed out), when there was none. */
  error?: string;
  ms: number;
}

/**
 * POSTs one event to the local receiver exactly as a delivery would: the same body bytes and
 * headers (X-Service-Event-Id, X-Service-Timestamp, X-Service-Signature made with the listen
 * secret). Redirects are not followed, as deliveries do not follow them.
 */
export async function forward(url: string, secret: string, eventId: string, payload: string, timeoutMs: number): Promise<Forwarded> {
  const started = performance.now();
  const timestamp = Math.floor(Date.now() / 1000);
  const body = Buffer.from(payload, "utf8");
  try {
    const res = await fetch(url, {
      method: "POST",
      redirect: "manual",
      body,
      signal: AbortSignal.timeout(timeoutMs),
      headers: {
        "content-type": "application/json",
        "user-agent": userAgent,
        "x-service-event-id": eventId,
        "x-service-timestamp": String(timestamp),
        "x-service-signature": signPayload(secret, timestamp, body),
      },
    });
    await res.body?.cancel();
    return { status: res.status, ms: Math.round(performance.now() - started) };
  } catch (err) {
    const e = err as Error & { cause?: { code?: string } };
    const error = e.name === "TimeoutError" ? `no answer within ${timeoutMs} ms` : (e.cause?.code ?? e.message);
    return { status: null, error, ms: Math.round(performance.now() - started) };
  }
}

/** The line printed for each forwarded event: time, type, id, the local answer and its duration. */
export function line(at: Date, type: string, id: string, result: Forwarded): string {
  const answer = result.status === null ? `failed: ${result.error}` : String(result.status);
  return `${at.toISOString()}  ${type.padEnd(24)} ${id}  -> ${answer} (${result.ms} ms)`;
}
