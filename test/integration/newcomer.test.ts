// What a newcomer trips over first: the start banner's URLs answer, a wrong /api/v1 path hints at
// the merchant prefix, a float amount or a camelCase field is answered with the right form, and a
// delivery's last_attempt_at agrees with its last attempt.
import t from "tap";
import { call, idemKey, merchantWithKey, sampleIntent, startTestApp } from "../helpers/harness.ts";
import { serviceSystem } from "../helpers/processes.ts";
import type { RecordedRequest, Reply } from "../helpers/receiver.ts";
import { finished, waitForDelivery, webhookSetup } from "../helpers/webhooks.ts";

t.test("every URL the start banner prints answers (none is a 404)", async (t) => {
  const system = await serviceSystem(t);
  const banner = system.first.stdout();
  const rest = /REST API\s+(http:\/\/\S+)/.exec(banner)?.[1];
  const health = /health\s+(http:\/\/\S+)/.exec(banner)?.[1];
  t.ok(rest, `the REST API line has a URL (banner: ${banner})`);
  t.ok(health, "the health line has a URL");
  t.notMatch(banner, /\/api\/v1\s/, "no bare /api/v1 prefix");
  t.notMatch(banner, /\/checkout\s/, "no bare checkout URL");
  t.match(rest, /\{merchant\}/, "the REST URL names where the merchant id goes");

  const anonymous = await fetch(rest!);
  t.equal(anonymous.status, 401, "as printed, it is a route that asks for a key");
  const withMerchant = rest!.replace("{merchant}", system.creds.merchant);
  const listed = await fetch(withMerchant, { headers: { authorization: `Bearer ${system.creds.key}` } });
  t.equal(listed.status, 200, "with the merchant id and a key, it lists");
  t.same(((await listed.json()) as { data: unknown[] }).data, [], "the merchant's (empty) list");
  t.equal((await fetch(health!)).status, 200, "the health URL answers");
});

t.test("route_not_found under /api/v1 hints at the merchant prefix, and /openapi.json at the ops port", async (t) => {
  // The checkout pages where they are by default, under /checkout: the rest of the root is the API's to answer.
  const { app, base } = await startTestApp(t, { CHECKOUT_BASE_URL: "http://127.0.0.1:8080/checkout" }, ["rpc", "gateway"]);
  const c = await merchantWithKey(app);
  for (const path of ["/api/v1", "/api/v1/payment-intents", "/api/v1/webhook-endpoints/we_x"]) {
    const res = await call(base, "GET", path, { key: c.key });
    t.equal(res.status, 404, `${path}: 404`);
    t.equal(res.body.error.code, "route_not_found", `${path}: route_not_found`);
    t.match(res.body.error.message, "/api/v1/merchants/{merchant}/", `${path}: the message names the prefix`);
    t.match(res.body.error.message, "GET /api/v1/merchants/{merchant}/payment-intents", `${path}: with an example route`);
    t.ok(res.headers.get("x-request-id"), `${path}: X-Request-Id`);
  }
  const followed = await call(base, "GET", `/api/v1/merchants/${c.merchant}/payment-intents`, { key: c.key });
  t.equal(followed.status, 200, "the example route, filled in, answers");

  const under = await call(base, "GET", `/api/v1/merchants/${c.merchant}/payment-intent`, { key: c.key });
  t.equal(under.body.error.code, "route_not_found", "a wrong path under the prefix is still route_not_found");
  t.notMatch(under.body.error.message, "Merchant routes start", "with no hint: the prefix is right there");
  const other = await call(base, "GET", "/api/v2/payment-intents", { key: c.key });
  t.equal(other.body.error.code, "route_not_found", "another version");
  t.notMatch(other.body.error.message, "Merchant routes start", "is not hinted at /api/v1");

  const openapi = await call(base, "GET", "/openapi.json");
  t.equal(openapi.status, 404, "the OpenAPI document is not served on the API port, which has only the spec's routes");
  t.match(openapi.body.error, { code: "route_not_found", message: /served at \/openapi\.json on the ops port \(OPS_PORT, default 9464\)/ }, "the 404 says where it is");
  const ops = await fetch(`http://127.0.0.1:${app.ports.ops}/openapi.json`);
  t.equal(ops.status, 200, "and there it is");
  await ops.arrayBuffer();
});

t.test("error messages show the expected form", async (t) => {
  const { app, base } = await startTestApp(t, {}, ["rpc", "gateway"]);
  const c = await merchantWithKey(app);
  const create = (body: unknown) => call(base, "POST", `/api/v1/merchants/${c.merchant}/payment-intents`, { key: c.key, idempotencyKey: idemKey(), body });

  const float = await create({ ...sampleIntent, requested_amount: 12.5 });
  t.equal(float.status, 400, "a JSON number amount is refused");
  t.equal(float.body.error.code, "validation_failed");
  t.equal(float.body.error.param, "requested_amount");
  t.match(float.body.error.message, 'a decimal string such as "12.50"', "the message shows the expected form");
  t.match(float.body.error.message, 'send "12.5"', "and the value as a string");

  const fine = await create({ ...sampleIntent, requested_amount: "12.1234567" });
  t.equal(fine.body.error.param, "requested_amount", "too many decimals for USDC");
  t.match(fine.body.error.message, "more than 6 decimal places", "says why");
  t.match(fine.body.error.message, 'such as "12.50"', "and shows the form");

  const camel = await create({ ...sampleIntent, merchantReference: "order-1" });
  t.equal(camel.status, 400, "a camelCase field is refused");
  t.equal(camel.body.error.param, "merchantReference", "naming the field as sent");
  t.match(camel.body.error.message, 'did you mean "merchant_reference"?', "and suggesting its snake_case name");
  const unrelated = await create({ ...sampleIntent, colour: "blue" });
  t.equal(unrelated.body.error.message, 'Unknown field "colour".', "no suggestion for a field that is no spelling of ours");

  const query = await call(base, "GET", `/api/v1/merchants/${c.merchant}/payment-intents?pageSize=10`, { key: c.key });
  t.equal(query.body.error.param, "pageSize", "an unknown query parameter");
  t.notMatch(query.body.error.message, "did you mean", "(page_size is not ours: no suggestion)");
  const deliveries = await call(base, "GET", `/api/v1/merchants/${c.merchant}/webhook-deliveries?endpointId=we_x`, { key: c.key });
  t.equal(deliveries.body.error.param, "endpointId", "a camelCase query parameter");
  t.match(deliveries.body.error.message, 'did you mean "endpoint_id"?', "suggests its snake_case name");

  const intent = await create(sampleIntent);
  t.equal(intent.status, 200, "the form the messages show is accepted");
  const simulated = await call(base, "POST", `/api/v1/sandbox/merchants/${c.merchant}/payment-intents/${intent.body.data.public_id}/simulate`, {
    key: c.key,
    body: { outcome: "underpaid", amount: 6.25 },
  });
  t.equal(simulated.body.error?.param, "amount", "the simulator's amount as a JSON number");
  t.match(simulated.body.error.message, 'send "6.25"', "gets the same hint");
});

t.test("a delivery's last_attempt_at is never earlier than its last attempt's started_at", async (t) => {
  // Every other request fails, so deliveries have one or two attempts.
  let n = 0;
  const respond = (_req: RecordedRequest): Reply => (++n % 2 === 1 ? { status: 503, body: "try later" } : { status: 200, body: "ok" });
  const s = await webhookSetup(t, { respond });
  const endpoint = await s.createEndpoint();
  const ids: string[] = [];
  for (let i = 0; i < 6; i++) {
    const res = await call(s.base, "POST", `/api/v1/merchants/${s.creds.merchant}/webhook-endpoints/${endpoint.id}/test`, { key: s.creds.key });
    t.equal(res.status, 200, `test event ${i}`);
    ids.push(res.body.data.id);
  }
  for (const id of ids) {
    const d = await waitForDelivery(s, id, (x) => finished(x) && x.attempts.length === x.attempt_count);
    const last = d.attempts.at(-1);
    t.ok(last, `${id}: has attempts`);
    t.ok(Date.parse(d.last_attempt_at) >= Date.parse(last.started_at), `${id}: last_attempt_at ${d.last_attempt_at} >= started_at ${last.started_at}`);
  }
});
