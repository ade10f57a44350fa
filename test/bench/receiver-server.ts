// The webhook receiver for the delivery benchmarks, as its own process (forked, with IPC):
// HTTPS on 127.0.0.1:<port>, answers at once; with FAIL_FIRST=n it answers 503 to the
// first n requests of each event; with SLOW_PREFIX and SLOW_MS it answers requests to paths
// under that prefix only after SLOW_MS (an endpoint that hangs past the attempt timeout); with
// DOWN_PREFIX it answers 503 to every request under that prefix (an endpoint that is down). The parent asks for { arrivals } over IPC: for each
// event id, the wall-clock times (ms) its requests arrived.
import { readFileSync } from "node:fs";
import https from "node:https";

const [port, keyFile, certFile] = process.argv.slice(2);
const failFirst = Number(process.env.FAIL_FIRST ?? 0);
const slowPrefix = process.env.SLOW_PREFIX;
const slowMs = Number(process.env.SLOW_MS ?? 0);
const downPrefix = process.env.DOWN_PREFIX;
const arrivals = new Map<string, number[]>();

const server = https.createServer({ key: readFileSync(keyFile!), cert: readFileSync(certFile!), keepAliveTimeout: 60_000 }, (req, res) => {
  const at = performance.timeOrigin + performance.now();
  const id = String(req.headers["x-service-event-id"]);
  req.resume();
  req.on("end", () => {
    const seen = arrivals.get(id) ?? [];
    seen.push(at);
    arrivals.set(id, seen);
    if (downPrefix && req.url?.startsWith(downPrefix)) res.writeHead(503).end("down");
    else if (slowPrefix && req.url?.startsWith(slowPrefix)) setTimeout(() => res.writeHead(200).end("late"), slowMs).unref();
    else if (seen.length <= failFirst) res.writeHead(503).end("later");
    else res.writeHead(200).end("ok");
  });
});
server.listen(Number(port), "127.0.0.1", () => process.send?.({ listening: true }));

process.on("message", (m: { type: string }) => {
  if (m.type === "arrivals") process.send?.({ arrivals: [...arrivals] });
  if (m.type === "reset") {
    arrivals.clear();
    process.send?.({ reset: true });
  }
});
process.on("disconnect", () => process.exit(0));
