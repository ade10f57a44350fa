// The drain's baseline (issue 41): the least a correct at-least-once delivery worker does, on the
// same database, receiver and machine as the service. Each process loops: claim up to 64 pending
// rows in one statement (`update … from (select … for update skip locked) returning`, the event's
// payload read in the same statement), sign each body with HMAC-SHA256, POST them all at once over
// kept-alive HTTPS, and record the batch's outcomes in one statement (`update … from unnest(...)`).
// No relay, no queue, no attempt rows, no fairness, no retry schedule: a row a crash leaves in
// processing would need a sweep this worker does not have. The bench runs two of them (as many
// processes as the service's drain) on a table of their own with webhook_deliveries' shape
// (durableRawTable), so that the service's relay never sees their rows.
// Forked with IPC, with DATABASE_URL, RAW_TABLE, RECEIVER_PORT, RECEIVER_HOST, CA_FILE and
// SIGNING_SECRET in the environment: sends { ready } once connected; { run: true } starts the loop
// (polling every 5 ms while there is nothing to claim), { run: false } ends it after the batch in
// hand and is answered { paused }, so the process stays warm between runs and costs nothing while
// the service is measured.
import { readFileSync } from "node:fs";
import https from "node:https";
import pg from "pg";
import { signPayload } from "../../services/delivery/signature.ts";
import { createdAtOfId } from "../../services/platform/time-partitions.ts";

const table = process.env.RAW_TABLE!;
if (!/^[a-z_]+$/.test(table)) throw new Error(`bad RAW_TABLE ${table}`);
const batch = Number(process.env.RAW_BATCH ?? 64);
const port = Number(process.env.RECEIVER_PORT);
const servername = process.env.RECEIVER_HOST!;
const secret = process.env.SIGNING_SECRET!;
const agent = new https.Agent({ keepAlive: true, maxSockets: batch, maxFreeSockets: batch, ca: readFileSync(process.env.CA_FILE!) });
const client = new pg.Client({ connectionString: process.env.DATABASE_URL });
await client.connect();

const claim = {
  name: "raw-claim",
  text: `update ${table} d set status = 'processing', attempt_count = d.attempt_count + 1, last_attempt_at = now(), updated_at = now()
           from (select id from ${table} where status = 'pending' order by updated_at limit $1 for update skip locked) due, webhook_events ev
          where d.id = due.id and ev.id = d.event_id and ${createdAtOfId("ev.created_at", "d.event_id")}
          returning d.id, d.event_id, ev.payload`,
  values: [batch],
};
const recordText = `update ${table} d set status = o.status, last_status_code = o.code, last_error = o.error, updated_at = now()
                      from unnest($1::text[], $2::text[], $3::int[], $4::text[]) as o(id, status, code, error)
                     where d.id = o.id`;

function post(eventId: string, payload: string): Promise<{ status: string; code: number | null; error: string | null }> {
  const body = Buffer.from(payload, "utf8");
  const ts = Math.floor(Date.now() / 1000);
  return new Promise((resolve) => {
    const req = https.request(
      {
        host: "127.0.0.1",
        port,
        servername,
        path: "/hooks",
        method: "POST",
        agent,
        headers: {
          host: servername,
          "content-type": "application/json",
          "content-length": String(body.length),
          "x-service-event-id": eventId,
          "x-service-timestamp": String(ts),
          "x-service-signature": signPayload(secret, ts, body),
        },
      },
      (res) => {
        res.resume();
        res.on("end", () => {
          const ok = res.statusCode !== undefined && res.statusCode >= 200 && res.statusCode < 300;
          resolve({ status: ok ? "delivered" : "pending", code: res.statusCode ?? null, error: ok ? null : `HTTP ${res.statusCode}` });
        });
      },
    );
    req.on("error", (err) => resolve({ status: "pending", code: null, error: err.message }));
    req.end(body);
  });
}

let running = false;
let loop: Promise<void> = Promise.resolve();
async function work(): Promise<void> {
  while (running) {
    const { rows } = await client.query<{ id: string; event_id: string; payload: string }>(claim);
    if (rows.length === 0) {
      await new Promise((r) => setTimeout(r, 5));
      continue;
    }
    const outcomes = await Promise.all(rows.map((r) => post(r.event_id, r.payload)));
    await client.query({
      name: "raw-record",
      text: recordText,
      values: [rows.map((r) => r.id), outcomes.map((o) => o.status), outcomes.map((o) => o.code), outcomes.map((o) => o.error)],
    });
  }
}
process.on("message", (m: { run: boolean }) => {
  if (m.run && !running) {
    running = true;
    loop = work().catch((err) => {
      process.stderr.write(`durable raw worker: ${(err as Error).stack ?? err}\n`);
      process.exit(1);
    });
  } else if (!m.run) {
    running = false;
    void loop.then(() => process.send?.({ paused: true }));
  }
});
process.on("disconnect", () => process.exit(0));
process.send?.({ ready: true });
