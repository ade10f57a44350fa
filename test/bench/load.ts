import autocannon from "autocannon";
import { meterCpu, type CpuPerRequest, type CpuSubject } from "./cpu.ts";

export interface LoadResult {
  rps: number;
  p50: number;
  p99: number;
  requests: number;
  /** With `cpu`: what each request cost in CPU, by process and thread (Linux only). */
  cpu?: CpuPerRequest;
}

/** Closed-loop load with autocannon; throws if any request failed. `idempotencyKeys` gives each request its own key. */
export async function load(o: {
  url: string;
  method?: "GET" | "POST";
  headers?: Record<string, string>;
  body?: string;
  connections: number;
  seconds: number;
  idempotencyKeys?: boolean;
  cpu?: CpuSubject;
}): Promise<LoadResult> {
  let n = 0;
  const run = `${process.pid}-${Date.now()}`;
  const meter = o.cpu && meterCpu(o.cpu);
  const result = await autocannon({
    url: o.url,
    method: o.method ?? "GET",
    headers: o.headers,
    body: o.body,
    connections: o.connections,
    duration: o.seconds,
    requests: o.idempotencyKeys
      ? [
          {
            setupRequest: (req) => {
              req.headers = { ...req.headers, "idempotency-key": `bench-${run}-${n++}` };
              return req;
            },
          },
        ]
      : undefined,
  });
  const failed = result.errors + result.timeouts + result.non2xx;
  if (failed > 0) throw new Error(`${failed} of ${result.requests.total} requests failed (errors ${result.errors}, timeouts ${result.timeouts}, non-2xx ${result.non2xx})`);
  return {
    rps: result.requests.total / o.seconds,
    p50: result.latency.p50,
    p99: result.latency.p99,
    requests: result.requests.total,
    cpu: meter?.stop(result.requests.total),
  };
}
