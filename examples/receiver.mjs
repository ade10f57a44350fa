// examples/receiver.mjs: node examples/receiver.mjs (WEBHOOK_SECRET=whsec_... in the environment; HOOK_PORT,
// default 8443). HTTPS from a directory that holds hook.key and hook.crt (deliveries to an endpoint);
// plain HTTP elsewhere, for `npm run -s listen -- --forward-to http://localhost:8443/webhooks`.
import { createHmac, timingSafeEqual } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import http from "node:http";
import https from "node:https";

const secret = process.env.WEBHOOK_SECRET;
const toleranceSeconds = 5 * 60; // how far X-Service-Timestamp may be from this clock: a replay defence
const seen = new Set(); // use your database in production: deduplicate by event id

function handle(req, res) {
  const chunks = [];
  req.on("data", (c) => chunks.push(c));
  req.on("end", () => {
    const body = Buffer.concat(chunks); // the raw bytes: verify before parsing
    const timestamp = req.headers["x-service-timestamp"] ?? "";
    const expected = createHmac("sha256", secret).update(`${timestamp}.`).update(body).digest();
    // X-Service-Signature-Next is there only during a secret rotation: either header may match.
    const valid = ["x-service-signature", "x-service-signature-next"].some((name) => {
      const given = Buffer.from(String(req.headers[name] ?? "").toLowerCase(), "hex");
      return given.length === expected.length && timingSafeEqual(given, expected);
    });
    if (!valid) {
      res.writeHead(400).end("bad signature");
      return;
    }
    // The timestamp is signed with the body: a request captured and sent again later still
    // verifies, so one older (or newer) than the tolerance is refused.
    if (!/^\d{1,12}$/.test(timestamp) || Math.abs(Date.now() / 1000 - Number(timestamp)) > toleranceSeconds) {
      res.writeHead(400).end("timestamp outside the tolerance");
      return;
    }
    const event = JSON.parse(body.toString("utf8"));
    if (seen.has(event.id)) {
      console.log("duplicate", event.id, "(a retry or a replay), skipped"); // still 2xx: it was handled
    } else {
      seen.add(event.id);
      console.log(event.type, event.id); // hand the work to a queue; answer quickly
    }
    res.writeHead(200).end("ok");
  });
}

const tls = existsSync("hook.key") && existsSync("hook.crt");
const server = tls ? https.createServer({ key: readFileSync("hook.key"), cert: readFileSync("hook.crt") }, handle) : http.createServer(handle);
server.listen(Number(process.env.HOOK_PORT ?? 8443), "127.0.0.1");
