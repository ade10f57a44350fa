import http from "node:http";
import type { Database } from "../platform/db.ts";
import type { Nats } from "../platform/nats.ts";

/** Health and readiness, apart from the merchant API so that it has only the documented routes. */
export function createOpsServer(db: Database, nats: Nats): http.Server {
  return http.createServer(async (req, res) => {
    const reply = (status: number, body: unknown) => {
      res.writeHead(status, { "Content-Type": "application/json" });
      res.end(JSON.stringify(body));
    };
    const path = (req.url ?? "/").split("?")[0];
    if (req.method !== "GET") return reply(405, { status: "method_not_allowed" });
    if (path === "/healthz") return reply(200, { status: "ok" });
    if (path === "/readyz") {
      const [database, broker] = await Promise.all([
        db.em
          .fork()
          .execute("select 1")
          .then(() => true)
          .catch(() => false),
        nats.ready(),
      ]);
      const ok = database && broker;
      return reply(ok ? 200 : 503, { status: ok ? "ready" : "not_ready", database, nats: broker });
    }
    reply(404, { status: "not_found" });
  });
}
