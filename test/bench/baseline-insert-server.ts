// The raw baseline for "create intent": a minimal node:http server that inserts one
// equivalent payment_intents row with `pg` per request, and nothing else (no auth,
// no validation, no event, no idempotency). Usage: node baseline-insert-server.ts <port>
// with DATABASE_URL and MERCHANT_ID in the environment.
import http from "node:http";
import pg from "pg";
import { newId } from "../../services/platform/ids.ts";

const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL, max: Number(process.env.DB_POOL_SIZE ?? 10) });
const merchant = process.env.MERCHANT_ID;

http
  .createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", async () => {
      try {
        const body = JSON.parse(Buffer.concat(chunks).toString("utf8"));
        const id = newId("pi");
        const now = new Date();
        await pool.query(
          `insert into payment_intents (id, merchant_id, environment, status, merchant_reference, network, asset,
             requested_amount, metadata, created_at, expires_at, updated_at)
           values ($1, $2, 'test', 'pending', $3, $4, $5, $6, '{}', $7, $8, $7)`,
          [id, merchant, body.merchant_reference ?? null, body.network, body.asset, body.requested_amount, now, new Date(now.getTime() + 900_000)],
        );
        res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ data: { public_id: id } }));
      } catch (err) {
        res.writeHead(500).end(String(err));
      }
    });
  })
  .listen(Number(process.argv[2]), "127.0.0.1", () => process.stdout.write("listening\n"));
