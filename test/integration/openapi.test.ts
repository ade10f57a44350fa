// The committed OpenAPI document (gen/openapi.json): valid OpenAPI 3.1 by a real validator, in step
// with the routes the gateway serves and with errors.ts, and a contract test: real requests to every
// documented route, each response's status documented and its body valid against the document.
import { readFileSync } from "node:fs";
import path from "node:path";
import { compileErrors, validate } from "@readme/openapi-parser";
import { Ajv2020, type ValidateFunction } from "ajv/dist/2020.js";
import { default as addFormats } from "ajv-formats";
import t from "tap";
import { buildRoutes } from "../../gateway/routes.ts";
import { Credential } from "../../gen/payments/v1/options_pb.ts";
import { readErrorCodes } from "../../scripts/protoc-gen-openapi.ts";
import { createQrConfiguration } from "../../services/qr/admin.ts";
import { errorCodes } from "../../services/platform/errors.ts";
import { services } from "../../services/app/routes.ts";
import { createSiteCredential } from "../../services/site/credentials.ts";
import { createCashierSession } from "../../services/terminal/sessions.ts";
import { call, idemKey, merchantWithKey, sampleIntent, until, type ApiResponse } from "../helpers/harness.ts";
import { reportChainOutput } from "../helpers/lifecycle.ts";
import { finished, hookHost, waitForDelivery, webhookSetup } from "../helpers/webhooks.ts";

type Schema = Record<string, unknown>;
type Ref = { $ref: string };
interface Parameter {
  name: string;
  in: string;
  required?: boolean;
  schema: Schema;
}
interface Response {
  description: string;
  headers?: Record<string, Ref | { required?: boolean }>;
  content?: { "application/json": { schema: Schema } } & { "text/event-stream"?: { schema: Schema } };
}
interface Operation {
  operationId: string;
  parameters?: (Parameter | Ref)[];
  requestBody?: { required: boolean; content: { "application/json": { schema: Schema } } };
  responses: Record<string, Response | Ref>;
  security: Record<string, string[]>[];
  "x-scope"?: string;
  "x-credential": string;
  "x-rate-limited"?: boolean;
}
interface Document {
  openapi: string;
  paths: Record<string, Record<string, Operation>>;
  components: {
    schemas: Record<string, Schema>;
    responses: Record<string, Response>;
    parameters: Record<string, Parameter>;
    headers: Record<string, { required?: boolean }>;
    securitySchemes: Record<string, { type: string; scheme: string }>;
  };
}

const documentPath = path.resolve(import.meta.dirname, "../../gen/openapi.json");
const doc = JSON.parse(readFileSync(documentPath, "utf8")) as Document;

function resolve<T>(value: T | Ref): T {
  if (typeof value === "object" && value !== null && "$ref" in value) {
    const [, ...parts] = (value as Ref).$ref.split("/");
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    return parts.reduce((node: any, part) => node[part], doc) as T;
  }
  return value as T;
}

function operation(method: string, template: string): Operation {
  const op = doc.paths[template]?.[method.toLowerCase()];
  if (!op) throw new Error(`${method} ${template} is not in the document`);
  return op;
}

// The document's component schemas, under ajv's own names: "#/components/schemas/X" becomes a $defs entry.
const ajv = new Ajv2020({ allErrors: true, strict: true });
addFormats.default(ajv);
const rewrite = (schema: unknown): Schema => JSON.parse(JSON.stringify(schema).replaceAll('"#/components/schemas/', '"openapi.json#/$defs/')) as Schema;
ajv.addSchema({ $id: "openapi.json", $defs: rewrite(doc.components.schemas) });
const validators = new Map<string, ValidateFunction>();
function validatorOf(schema: Schema): ValidateFunction {
  const key = JSON.stringify(schema);
  let v = validators.get(key);
  if (!v) validators.set(key, (v = ajv.compile(rewrite(schema))));
  return v;
}

const credentialNames = Object.fromEntries(Object.entries(Credential).map(([name, value]) => [value, name]));
const credentialLabel = (value: number) => (value === Credential.UNSPECIFIED ? "api_key" : String(credentialNames[value]).toLowerCase());

t.test("the committed document is valid OpenAPI 3.1", async (t) => {
  t.match(doc.openapi, /^3\.1\./);
  const result = await validate(documentPath);
  t.ok(result.valid, result.valid ? "valid" : compileErrors(result));
  t.equal(result.specification, "OpenAPI");
  t.same(result.warnings, [], "no warnings");

  // The validator does look: an operation without responses, or a duplicate operationId, fails.
  const broken = structuredClone(doc) as unknown as { paths: Record<string, Record<string, { responses?: unknown; operationId: string }>> };
  const [first, second] = Object.values(broken.paths).flatMap((item) => Object.values(item));
  delete first!.responses;
  second!.operationId = first!.operationId;
  t.notOk((await validate(broken as never)).valid, "a broken copy is refused");
});

t.test("every route the gateway serves is documented as it is served, and nothing else", async (t) => {
  const routes = buildRoutes(services);
  const served = routes.map((r) => `${r.httpMethod} ${r.template}`).sort();
  const documented = Object.entries(doc.paths)
    .flatMap(([p, item]) => Object.keys(item).map((m) => `${m.toUpperCase()} ${p}`))
    .sort();
  t.same(documented, served, "the same routes");
  t.ok(served.length >= 16, `${served.length} routes`);

  for (const route of routes) {
    const where = `${route.httpMethod} ${route.template}`;
    const op = operation(route.httpMethod, route.template);
    t.equal(op.operationId, route.rpc.name, `${where}: operationId`);
    t.equal(op["x-scope"] ?? "", route.option.scope, `${where}: scope`);
    t.equal(op["x-credential"], credentialLabel(route.option.credential), `${where}: credential`);
    const params = (op.parameters ?? []).map((p) => resolve<Parameter>(p));
    t.same(params.filter((p) => p.in === "path").map((p) => p.name), route.params, `${where}: path parameters`);
    const idem = params.find((p) => p.in === "header" && p.name === "Idempotency-Key");
    t.equal(idem?.required ?? false, route.option.idempotencyKeyRequired, `${where}: Idempotency-Key`);
    if (route.httpMethod === "GET") {
      const rest = route.rpc.input.fields.filter((f) => !route.params.includes(f.name)).map((f) => f.name);
      t.same(params.filter((p) => p.in === "query").map((p) => p.name), rest, `${where}: the request's other fields are query parameters`);
    }
    t.equal(op.requestBody !== undefined, route.takesBody, `${where}: a JSON body iff body "*"`);
    if (route.option.credential === Credential.PUBLIC) {
      t.same(op.security, [], `${where}: public`);
      t.notOk(op.responses["401"], `${where}: no 401 on a public route`);
    } else {
      t.equal(op.security.length, 1, `${where}: one security requirement`);
      const [scheme, scopes] = Object.entries(op.security[0] ?? {})[0] ?? [];
      t.match(doc.components.securitySchemes[scheme ?? ""], { type: "http", scheme: "bearer" }, `${where}: a bearer scheme`);
      t.same(scopes, route.option.scope ? [route.option.scope] : [], `${where}: the scope in the requirement`);
    }
    t.equal(op.responses["429"] !== undefined, route.option.rateLimited, `${where}: 429 iff rate-limited`);
    const ok = resolve<Response>(op.responses["200"] as Response);
    if (route.rpc.methodKind === "server_streaming" && route.option.mediaType !== "") {
      // A streamed file (route option media_type): its body a string of that type.
      t.match((ok.content as Record<string, { schema: Schema }> | undefined)?.[route.option.mediaType]?.schema, { type: "string" }, `${where}: a ${route.option.mediaType} file`);
      continue;
    }
    if (route.rpc.methodKind === "server_streaming") {
      // A stream answers Server-Sent Events, each data line one message.
      const message = resolve<Schema>(ok.content?.["text/event-stream"]?.schema as Ref);
      t.match(message, { type: "object" }, `${where}: the stream's message`);
      continue;
    }
    const envelope = resolve<Schema>(ok.content?.["application/json"].schema as Ref);
    t.match(envelope, { type: "object", required: ["data"] }, `${where}: the data envelope`);
  }
});

t.test("the error envelope documents errors.ts: every code, each under its status", async (t) => {
  const statusOf = Object.fromEntries(Object.entries(errorCodes).map(([code, e]) => [code, e.status]));
  t.same(Object.fromEntries(readErrorCodes()), statusOf, "the plugin reads errors.ts as it is");
  const envelope = doc.components.schemas.Error as { properties: { error: { properties: { code: { enum: string[] } } } } };
  t.same(envelope.properties.error.properties.code.enum, Object.keys(errorCodes), "every code");
  for (const response of Object.values(doc.components.responses)) {
    const schema = response.content?.["application/json"].schema as { allOf: [Ref, { properties: { error: { properties: { code: { enum: string[] } } } } }] };
    const codes = schema.allOf[1].properties.error.properties.code.enum;
    const statuses = new Set(codes.map((c) => statusOf[c]));
    t.equal(statuses.size, 1, `${response.description}: one status`);
    const [status] = statuses;
    t.same(codes, Object.keys(errorCodes).filter((c) => statusOf[c] === status), `${status}: all its codes`);
  }
});

t.test("contract: real responses of every documented route match the document", async (t) => {
  const s = await webhookSetup(t, { env: { PUBLIC_RATE_LIMIT_PER_MINUTE: "3" } });
  const em = () => s.app.db.em.fork();
  const a = s.creds;
  const other = await merchantWithKey(s.app);
  const readOnly = await merchantWithKey(s.app, "test", ["webhooks:read"], a.merchant);
  const live = await merchantWithKey(s.app, "live");
  const site = await createSiteCredential(em(), a.merchant, "test", ["https://shop.example"]);
  const cashier = await createCashierSession(em(), { merchantId: a.merchant, environment: "test", cashier: "Ana", terminal: "Till 2" });
  const qr = await createQrConfiguration(em(), { merchantId: a.merchant, environment: "test", label: "Counter 1" });

  /** Per documented operation, the statuses its checked responses had. */
  const seen = new Map<string, Set<number>>();

  async function api(
    method: "GET" | "POST",
    template: string,
    params: Record<string, string>,
    options: { key?: string; body?: unknown; query?: Record<string, string>; idempotencyKey?: string; headers?: Record<string, string> } = {},
  ): Promise<ApiResponse> {
    const op = operation(method, template);
    const where = `${method} ${template}`;
    const target = template.replace(/\{([a-z_]+)\}/g, (_, name: string) => encodeURIComponent(params[name] ?? ""));
    const query = options.query ? `?${new URLSearchParams(options.query)}` : "";
    const res = await call(s.base, method, target + query, options);
    const requestId = res.headers.get("x-request-id");
    t.ok(requestId, `${where} ${res.status}: X-Request-Id`);
    const documented = op.responses[String(res.status)];
    t.ok(documented, `${where}: ${res.status} is documented (${JSON.stringify(res.body)})`);
    if (!documented) return res;
    const response = resolve<Response>(documented);
    const schema = response.content?.["application/json"].schema;
    t.ok(schema, `${where} ${res.status}: a JSON schema`);
    const check = validatorOf(schema as Schema);
    t.ok(check(res.body), `${where} ${res.status}: the body matches (${ajv.errorsText(check.errors)}): ${JSON.stringify(res.body)}`);
    for (const [name, header] of Object.entries(response.headers ?? {})) {
      if (resolve<{ required?: boolean }>(header).required) t.ok(res.headers.get(name), `${where} ${res.status}: ${name}`);
    }
    if (res.status !== 200) t.equal(res.body.error?.request_id, requestId, `${where} ${res.status}: request_id is the header's`);
    if (res.status === 200 && options.body !== undefined && op.requestBody) {
      const body = validatorOf(op.requestBody.content["application/json"].schema);
      t.ok(body(options.body), `${where}: the body sent matches the documented request (${ajv.errorsText(body.errors)})`);
    }
    const statuses = seen.get(where) ?? new Set<number>();
    statuses.add(res.status);
    seen.set(where, statuses);
    return res;
  }

  const m = { merchant: a.merchant };
  const intents = "/api/v1/merchants/{merchant}/payment-intents";
  const intent = `${intents}/{public_id}`;

  // Payment Intents.
  const key = idemKey();
  const created = await api("POST", intents, m, { key: a.key, idempotencyKey: key, body: { ...sampleIntent, merchant_reference: "order-1", metadata: { cart: "7" } } });
  t.equal(created.status, 200);
  const pi: string = created.body.data.public_id;
  const replayed = await api("POST", intents, m, { key: a.key, idempotencyKey: key, body: { ...sampleIntent, merchant_reference: "order-1", metadata: { cart: "7" } } });
  t.equal(replayed.headers.get("idempotent-replayed"), "true", "a replay says so");
  t.equal((await api("POST", intents, m, { key: a.key, idempotencyKey: key, body: sampleIntent })).body.error?.code, "idempotency_conflict");
  t.equal((await api("POST", intents, m, { key: a.key, body: sampleIntent })).body.error?.code, "idempotency_key_required");
  t.equal((await api("POST", intents, m, { key: a.key, idempotencyKey: idemKey(), body: { ...sampleIntent, requested_amount: 12.5 } })).body.error?.code, "validation_failed");
  t.equal((await api("POST", intents, m, { key: a.key, idempotencyKey: idemKey(), body: "{" })).body.error?.code, "invalid_json");
  t.equal((await api("POST", intents, m, { key: a.key, idempotencyKey: idemKey(), body: "x", headers: { "content-type": "text/plain" } })).status, 415);
  t.equal((await api("POST", intents, m, { idempotencyKey: idemKey(), body: sampleIntent })).body.error?.code, "unauthenticated");
  t.equal((await api("POST", intents, { merchant: other.merchant }, { key: a.key, idempotencyKey: idemKey(), body: sampleIntent })).body.error?.code, "merchant_mismatch");

  t.equal((await api("GET", intent, { ...m, public_id: pi }, { key: a.key })).status, 200);
  t.equal((await api("GET", intent, { ...m, public_id: "pi_000000000000000000000000" }, { key: a.key })).body.error?.code, "not_found");
  t.equal((await api("GET", intent, { ...m, public_id: pi }, { key: "sk_test_nope" })).body.error?.code, "invalid_api_key");

  const second = await api("POST", intents, m, { key: a.key, idempotencyKey: idemKey(), body: sampleIntent });
  const page = await api("GET", intents, m, { key: a.key, query: { limit: "1" } });
  t.equal(page.status, 200);
  t.equal(page.body.has_more, true, "a first page of two");
  t.type(page.body.next_cursor, "string");
  const last = await api("GET", intents, m, { key: a.key, query: { limit: "1", cursor: page.body.next_cursor } });
  t.equal(last.body.next_cursor, null, "the last page's cursor is null");
  t.equal((await api("GET", intents, m, { key: a.key, query: { cursor: "garbage" } })).body.error?.code, "invalid_cursor");
  t.equal((await api("GET", intents, m, { key: a.key, query: { created_after: "2026-02-30T00:00:00Z" } })).status, 400);
  t.equal((await api("GET", intents, m, { key: readOnly.key })).body.error?.code, "insufficient_scope");

  const cancel = `${intent}/cancel`;
  t.equal((await api("POST", cancel, { ...m, public_id: second.body.data.public_id }, { key: a.key })).body.data?.status, "cancelled");
  t.equal((await api("POST", cancel, { ...m, public_id: second.body.data.public_id }, { key: a.key })).body.error?.code, "invalid_state");
  t.equal((await api("POST", cancel, { ...m, public_id: "pi_000000000000000000000000" }, { key: a.key })).status, 404);

  // The sandbox: a paid intent carries its transactions.
  const simulate = "/api/v1/sandbox/merchants/{merchant}/payment-intents/{public_id}/simulate";
  const paid = await api("POST", simulate, { ...m, public_id: pi }, { key: a.key, body: { outcome: "underpaid" } });
  t.equal(paid.body.data?.transactions?.length, 1, "a transaction");
  t.equal((await api("POST", simulate, { ...m, public_id: pi }, { key: a.key, body: { outcome: "sideways" } })).status, 400);
  t.equal((await api("POST", simulate, { merchant: live.merchant, public_id: pi }, { key: live.key, body: { outcome: "confirmed" } })).body.error?.code, "test_mode_only");

  // Refunds of the underpaid intent: made, listed, read, paid by the simulator; refused past what it received.
  const refunds = `${intent}/refunds`;
  const made = await api("POST", refunds, { ...m, public_id: pi }, { key: a.key, idempotencyKey: idemKey(), body: { amount: "1", address: "0x8ba1f109551bD432803012645Ac136ddd64DBA72", reason: "returned" } });
  t.equal(made.status, 200, JSON.stringify(made.body));
  t.equal((await api("POST", refunds, { ...m, public_id: pi }, { key: a.key, idempotencyKey: idemKey(), body: { amount: "1000" } })).body.error?.code, "refund_exceeds_refundable");
  t.equal((await api("GET", refunds, { ...m, public_id: pi }, { key: a.key })).body.data?.length, 1);
  t.equal((await api("GET", refunds, { ...m, public_id: "pi_000000000000000000000000" }, { key: a.key })).status, 404);
  const oneRefund = "/api/v1/merchants/{merchant}/refunds/{refund_id}";
  t.equal((await api("GET", oneRefund, { ...m, refund_id: made.body.data.id }, { key: a.key })).body.data?.status, "awaiting_payment");
  t.equal((await api("GET", oneRefund, { ...m, refund_id: "rf_000000000000000000000000" }, { key: a.key })).status, 404);
  const simulateRefund = "/api/v1/sandbox/merchants/{merchant}/refunds/{refund_id}/simulate";
  t.equal((await api("POST", simulateRefund, { ...m, refund_id: made.body.data.id }, { key: a.key })).body.data?.status, "completed");
  t.equal((await api("POST", simulateRefund, { ...m, refund_id: made.body.data.id }, { key: a.key })).body.error?.code, "invalid_state");
  t.equal((await api("POST", `${oneRefund}/cancel`, { ...m, refund_id: made.body.data.id }, { key: a.key })).body.error?.code, "invalid_state", "a completed refund is not cancelled");
  const toCancel = await api("POST", refunds, { ...m, public_id: pi }, { key: a.key, idempotencyKey: idemKey(), body: { amount: "0.5" } });
  t.equal((await api("POST", `${oneRefund}/cancel`, { ...m, refund_id: toCancel.body.data.id }, { key: a.key })).body.data?.status, "cancelled");

  // A bitcoin refund's PSBT: an output on the chain (a watcher's report, not the simulator's) to a BTC intent.
  const btcIntent = (await api("POST", intents, m, { key: a.key, idempotencyKey: idemKey(), body: { network: "bitcoin", asset: "BTC", requested_amount: "0.001" } })).body.data;
  await reportChainOutput(s.app, s.rpcUrl, "openapi-bitcoin-watcher", "bitcoin", { toAddress: btcIntent.deposit_address, asset: "BTC", amount: "0.002" }, { confirmations: 6 });
  const btcRefund = await until("the BTC intent's refund", async () => {
    const r = await call(s.base, "POST", `/api/v1/merchants/${a.merchant}/payment-intents/${btcIntent.public_id}/refunds`, { key: a.key, idempotencyKey: idemKey(), body: { address: "tb1qw508d6qejxtdg4y5r3zarvary0c5xw7kxpjzsx" } });
    return r.status === 200 ? r.body.data : undefined;
  }, 20_000);
  const psbt = "/api/v1/merchants/{merchant}/refunds/{refund_id}/psbt";
  const built = await api("GET", psbt, { ...m, refund_id: btcRefund.id }, { key: a.key, query: { fee_rate: "2" } });
  t.equal(built.status, 200, JSON.stringify(built.body));
  t.equal(built.body.data?.outputs?.[0]?.amount, "0.001");
  t.equal((await api("GET", psbt, { ...m, refund_id: btcRefund.id }, { key: a.key })).body.error?.param, "fee_rate");
  t.equal((await api("GET", psbt, { ...m, refund_id: made.body.data.id }, { key: a.key, query: { fee_rate: "2" } })).body.error?.code, "invalid_state", "an ETH refund has no PSBT");

  // Readiness.
  t.equal((await api("GET", "/api/v1/merchants/{merchant}/go-live/readiness", m, { key: a.key })).status, 200);
  t.equal((await api("GET", "/api/v1/merchants/{merchant}/go-live/readiness", m, {})).status, 401);

  // The Site Gateway and the terminal.
  const sitePath = "/api/v1/site-payment-intents";
  const siteIntent = await api("POST", sitePath, {}, { key: site.credential, idempotencyKey: idemKey(), body: sampleIntent });
  t.equal(siteIntent.status, 200);
  t.equal((await api("POST", sitePath, {}, { key: site.credential, body: sampleIntent })).status, 400);
  t.equal((await api("POST", sitePath, {}, { key: a.key, idempotencyKey: idemKey(), body: sampleIntent })).status, 401);
  t.equal((await api("GET", `${sitePath}/{public_id}`, { public_id: siteIntent.body.data.public_id }, { key: site.credential })).status, 200);
  t.equal((await api("GET", `${sitePath}/{public_id}`, { public_id: "pi_000000000000000000000000" }, { key: site.credential })).status, 404);
  t.equal((await api("GET", `${sitePath}/{public_id}`, { public_id: pi }, {})).status, 401);

  const pos = "/api/v1/terminal/pos/payment";
  t.equal((await api("POST", pos, {}, { key: cashier.session, idempotencyKey: idemKey(), body: { ...sampleIntent, merchant_reference: "table-4" } })).body.data?.source, "pos");
  t.equal((await api("POST", pos, {}, { key: cashier.session, idempotencyKey: idemKey(), body: { ...sampleIntent, cashier: "Mallory" } })).status, 400);
  t.equal((await api("POST", pos, {}, { key: a.key, idempotencyKey: idemKey(), body: sampleIntent })).status, 401);

  // Public QR configurations, to the rate limit (3 a minute here).
  const qrPath = "/api/v1/qr/{qr_public_id}";
  t.equal((await api("GET", qrPath, { qr_public_id: qr.qr_public_id })).status, 200);
  t.equal((await api("GET", qrPath, { qr_public_id: "qr_000000000000000000000000" })).status, 404);
  let limited: ApiResponse | undefined;
  for (let i = 0; i < 5 && limited?.status !== 429; i++) limited = await api("GET", qrPath, { qr_public_id: qr.qr_public_id });
  t.equal(limited?.status, 429, "over the limit");

  // Webhook endpoints, deliveries and events, with a real delivery and its attempt.
  const endpoints = "/api/v1/merchants/{merchant}/webhook-endpoints";
  const endpoint = `${endpoints}/{endpoint_id}`;
  const ep = await api("POST", endpoints, m, { key: a.key, body: { url: `https://${hookHost}/hooks/contract`, description: "contract" } });
  t.match(ep.body.data?.signing_secret, /^whsec_/);
  const we: string = ep.body.data.id;
  t.equal((await api("POST", endpoints, m, { key: a.key, body: { url: "http://10.0.0.5/x" } })).body.error?.param, "url");
  t.equal((await api("GET", endpoints, m, { key: a.key })).status, 200);
  t.equal((await api("GET", endpoints, m, { key: a.key, query: { limit: "201" } })).body.error?.param, "limit");
  t.equal((await api("GET", endpoint, { ...m, endpoint_id: we }, { key: a.key })).status, 200);
  t.equal((await api("GET", endpoint, { ...m, endpoint_id: "we_000000000000000000000000" }, { key: a.key })).status, 404);
  t.equal((await api("GET", endpoint, { ...m, endpoint_id: we }, { key: other.key })).status, 403, "another merchant's key on this merchant's path");
  t.same((await api("POST", endpoint, { ...m, endpoint_id: we }, { key: a.key, body: { enabled_events: ["webhook_endpoint.disabled", "payment.confirmed"], description: "updated" } })).body.data?.enabled_events, ["webhook_endpoint.disabled", "payment.confirmed"]);
  t.equal((await api("POST", endpoint, { ...m, endpoint_id: we }, { key: a.key, body: { enabled_events: ["payment.sideways"] } })).body.error?.param, "enabled_events");
  t.equal((await api("POST", endpoint, { ...m, endpoint_id: "we_000000000000000000000000" }, { key: a.key, body: { description: "x" } })).status, 404);

  const tested = await api("POST", `${endpoint}/test`, { ...m, endpoint_id: we }, { key: a.key });
  t.equal(tested.status, 200);
  const delivery = await waitForDelivery(s, tested.body.data.id, finished);
  t.equal(delivery.status, "delivered");
  const deliveries = "/api/v1/merchants/{merchant}/webhook-deliveries";
  const listed = await api("GET", deliveries, m, { key: a.key, query: { endpoint_id: we } });
  t.ok(listed.body.data?.[0]?.attempts?.length >= 1, "a delivery with its attempt");
  t.equal((await api("GET", deliveries, m, { key: a.key, query: { limit: "0" } })).status, 400);

  const replay = `${deliveries}/{delivery_id}/replay`;
  const replayKey = idemKey();
  const replayedDelivery = await api("POST", replay, { ...m, delivery_id: delivery.id }, { key: a.key, idempotencyKey: replayKey });
  t.equal(replayedDelivery.body.data?.replay_of, delivery.id);
  t.equal((await api("POST", replay, { ...m, delivery_id: delivery.id }, { key: a.key, idempotencyKey: replayKey })).headers.get("idempotent-replayed"), "true");
  t.equal((await api("POST", replay, { ...m, delivery_id: replayedDelivery.body.data.id }, { key: a.key, idempotencyKey: replayKey })).status, 409);
  t.equal((await api("POST", replay, { ...m, delivery_id: "wd_000000000000000000000000" }, { key: a.key, idempotencyKey: idemKey() })).status, 404);

  const events = "/api/v1/merchants/{merchant}/webhook-events/{event_id}";
  const event = await api("GET", events, { ...m, event_id: delivery.event_id }, { key: a.key });
  t.equal(event.body.data?.type, "webhook.test");
  t.equal((await api("GET", events, { ...m, event_id: "evt_000000000000000000000000" }, { key: a.key })).status, 404);

  const disabled = await api("POST", `${endpoint}/disable`, { ...m, endpoint_id: we }, { key: a.key });
  t.equal(disabled.body.data?.status, "disabled");
  t.type(disabled.body.data?.disabled_at, "string");
  t.equal((await api("POST", `${endpoint}/disable`, { ...m, endpoint_id: "we_000000000000000000000000" }, { key: a.key })).status, 404);
  t.equal((await api("POST", `${endpoint}/test`, { ...m, endpoint_id: we }, { key: a.key })).body.error?.code, "invalid_state");

  // The calling key.
  t.equal((await api("GET", "/api/v1/api-key", {}, { key: a.key })).body.data?.merchant, a.merchant);
  t.equal((await api("GET", "/api/v1/api-key", {}, {})).status, 401);

  // The merchant's API keys: create (the secret once), list, get, revoke.
  const apiKeys = "/api/v1/merchants/{merchant}/api-keys";
  const apiKey = `${apiKeys}/{api_key_id}`;
  const madeKey = await api("POST", apiKeys, m, { key: a.key, body: { scopes: ["payment_intents:read"] } });
  t.match(madeKey.body.data?.api_key, /^sk_test_/);
  t.equal((await api("POST", apiKeys, m, { key: a.key, body: { scopes: ["everything"] } })).body.error?.param, "scopes");
  t.ok((await api("GET", apiKeys, m, { key: a.key })).body.data?.length >= 2);
  t.equal((await api("GET", apiKeys, m, { key: a.key, query: { limit: "0" } })).status, 400);
  t.equal((await api("GET", apiKey, { ...m, api_key_id: madeKey.body.data.id }, { key: a.key })).body.data?.id, madeKey.body.data.id);
  t.equal((await api("GET", apiKey, { ...m, api_key_id: "key_000000000000000000000000" }, { key: a.key })).status, 404);
  t.type((await api("POST", `${apiKey}/revoke`, { ...m, api_key_id: madeKey.body.data.id }, { key: a.key })).body.data?.revoked_at, "string");
  t.equal((await api("POST", `${apiKey}/revoke`, { ...m, api_key_id: "key_000000000000000000000000" }, { key: a.key })).status, 404);

  // The shop's name and look: read, changed, a bad colour refused.
  const look = "/api/v1/merchants/{merchant}/profile";
  t.equal((await api("GET", look, m, { key: a.key })).body.data?.id, a.merchant);
  t.equal((await api("POST", look, m, { key: a.key, body: { brand_color: "#1d4ed8" } })).body.data?.brand_text_color, "#ffffff");
  t.equal((await api("POST", look, m, { key: a.key, body: { brand_color: "blue" } })).body.error?.param, "brand_color");
  t.equal((await api("GET", look, { merchant: "mer_000000000000000000000000" }, { key: a.key })).status, 403);

  // The event stream: its refusals are JSON like any other; a success is Server-Sent Events, whose
  // first message (sent when the stream is accepted) matches the document.
  const stream = "/api/v1/merchants/{merchant}/webhook-events/stream";
  t.equal((await api("GET", stream, m, { key: a.key, query: { after: "pi_1" } })).body.error?.param, "after");
  t.equal((await api("GET", stream, m, { key: a.key, query: { types: "payment.sideways" } })).body.error?.param, "types");
  const abort = new AbortController();
  const opened = await fetch(`${s.base}/api/v1/merchants/${a.merchant}/webhook-events/stream`, { headers: { authorization: `Bearer ${a.key}` }, signal: abort.signal });
  t.equal(opened.status, 200);
  t.match(opened.headers.get("content-type"), /^text\/event-stream/);
  t.ok(opened.headers.get("x-request-id"), "X-Request-Id");
  const reader = opened.body!.getReader();
  let text = "";
  while (!text.includes("\n\n")) text += new TextDecoder().decode((await reader.read()).value);
  const first = JSON.parse(/^data: (.*)$/m.exec(text)![1]!);
  const check = validatorOf(resolve<Response>(operation("GET", stream).responses["200"] as Response).content!["text/event-stream"]!.schema);
  t.ok(check(first), `the first message matches (${ajv.errorsText(check.errors)}): ${JSON.stringify(first)}`);
  abort.abort();
  seen.get(`GET ${stream}`)?.add(200);

  // The export: its refusals are JSON like any other; a success is the documented CSV file.
  const exportPath = `${intents}/export`;
  t.equal((await api("GET", exportPath, m, { key: a.key, query: { status: "paidish" } })).body.error?.param, "status");
  const csv = await fetch(`${s.base}/api/v1/merchants/${a.merchant}/payment-intents/export`, { headers: { authorization: `Bearer ${a.key}` } });
  t.equal(csv.status, 200);
  t.ok(resolve<Response>(operation("GET", exportPath).responses["200"] as Response).content, "a documented success");
  t.match(csv.headers.get("content-type"), /^text\/csv; charset=utf-8$/);
  t.ok(csv.headers.get("x-request-id"), "X-Request-Id");
  t.match(await csv.text(), /^intent_id,created_at,/);
  seen.get(`GET ${exportPath}`)?.add(200);

  // Coverage: every documented operation answered a success and an error, and the typical errors all came up.
  for (const [p, item] of Object.entries(doc.paths)) {
    for (const method of Object.keys(item)) {
      const statuses = [...(seen.get(`${method.toUpperCase()} ${p}`) ?? [])];
      t.ok(statuses.includes(200), `${method.toUpperCase()} ${p}: a success was checked`);
      t.ok(statuses.some((st) => st >= 400), `${method.toUpperCase()} ${p}: an error was checked`);
    }
  }
  const all = new Set([...seen.values()].flatMap((x) => [...x]));
  for (const status of [400, 401, 403, 404, 409, 415, 429]) t.ok(all.has(status), `a ${status} was checked`);

  // The schemas do constrain: a success with a field more, or one less, or an error under another status's code, fails.
  const intentSchema = validatorOf({ $ref: "#/components/schemas/GetPaymentIntentResponse" });
  t.ok(intentSchema(created.body), "the real body passes");
  t.notOk(intentSchema({ data: { ...created.body.data, extra: 1 } }), "an undocumented field fails");
  const { status: _, ...missing } = created.body.data;
  t.notOk(intentSchema({ data: missing }), "a missing field fails");
  const notFound = validatorOf(resolve<Response>(doc.components.responses.NotFound as Response).content!["application/json"].schema);
  t.notOk(notFound({ error: { code: "invalid_state", message: "x", request_id: "req_x" } }), "a 409 code under 404 fails");
});

t.test("the running service serves the document on its ops port, the same bytes as gen/openapi.json", async (t) => {
  const s = await webhookSetup(t);
  const res = await fetch(`http://127.0.0.1:${s.app.ports.ops}/openapi.json`);
  t.equal(res.status, 200);
  t.match(res.headers.get("content-type"), /^application\/json/);
  t.ok(Buffer.from(await res.arrayBuffer()).equals(readFileSync(documentPath)), "byte for byte");
  const api = await fetch(`${s.base}/openapi.json`);
  t.equal(api.status, 404, "not on the merchant API's port, which has only the documented routes");
});
