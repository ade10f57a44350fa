// The OpenAPI document and the validators hold each other, both ways: for every constrained field of
// every REST route (a field whose schema has a bound, a set, a pattern or a format), values at and
// beyond each documented bound, and a property's random ones, are sent to the running service in an
// otherwise valid request, and the service refuses the request (400) exactly when the document's
// schema refuses it. A
// constrained field this test has no request for fails it, so a new rule cannot go untested.
//
// What the document cannot say and is not compared: where a webhook URL points (the URL policy
// refuses private and reserved addresses, found by DNS; the candidates here are public IP
// literals), a simulated amount's decimal places (they are the intent's asset's, not the request's),
// and a cursor's validity (it is opaque).
import { readFileSync } from "node:fs";
import path from "node:path";
import { Ajv2020, type ValidateFunction } from "ajv/dist/2020.js";
import { default as addFormats } from "ajv-formats";
import fc from "fast-check";
import t from "tap";
import { createSiteCredential } from "../../services/site/credentials.ts";
import { createCashierSession } from "../../services/terminal/sessions.ts";
import { findAsset, offeredIn } from "../../services/vocabulary/assets.ts";
import { httpsUrlPattern } from "../../services/vocabulary/formats.ts";
import { call, idemKey, merchantWithKey, sampleIntent, startTestApp, type ApiResponse } from "../helpers/harness.ts";

type Schema = Record<string, unknown>;
interface Parameter {
  name: string;
  in: string;
  required?: boolean;
  schema: Schema;
}
interface Operation {
  operationId: string;
  parameters?: (Parameter | { $ref: string })[];
  requestBody?: { content: { "application/json": { schema: { $ref: string } } } };
}
interface Document {
  paths: Record<string, Record<string, Operation>>;
  components: { schemas: Record<string, Schema & { properties?: Record<string, Schema> }>; parameters: { IdempotencyKey: { schema: { pattern: string } } } };
}

const doc = JSON.parse(readFileSync(path.resolve(import.meta.dirname, "../../gen/openapi.json"), "utf8")) as Document;

const ajv = new Ajv2020({ allErrors: true, strict: true });
addFormats.default(ajv);
const rewrite = (schema: unknown): Schema => JSON.parse(JSON.stringify(schema).replaceAll('"#/components/schemas/', '"rules.json#/$defs/')) as Schema;
ajv.addSchema({ $id: "rules.json", $defs: rewrite(doc.components.schemas) });

const constraintKeywords = ["minLength", "maxLength", "minimum", "maximum", "enum", "pattern", "format", "maxProperties", "propertyNames", "maxItems", "minItems"];
const isConstrained = (schema: Schema) =>
  constraintKeywords.some((k) => k in schema) ||
  (typeof schema.additionalProperties === "object" && "maxLength" in (schema.additionalProperties as Schema)) ||
  (typeof schema.items === "object" && "enum" in (schema.items as Schema));

/** Not sent at all. */
const absent = Symbol("absent");
type Candidate = unknown;

const x = (n: number, c = "a") => c.repeat(Math.max(0, n));

/** Values at and around each documented bound of a field, and the usual wrong ones. */
function candidatesFor(schema: Schema): Candidate[] {
  const out: Candidate[] = [absent];
  if (schema.type === "integer") {
    const min = schema.minimum as number | undefined;
    const max = schema.maximum as number | undefined;
    for (const v of [min, max]) if (v !== undefined) out.push(v - 1, v, v + 1);
    out.push(0, -1, 1.5);
    return out;
  }
  if (schema.type === "array") {
    const values = ((schema.items as Schema).enum ?? []) as string[];
    const maxItems = schema.maxItems as number;
    out.push([], ...values.map((v) => [v]), values.slice(0, 3), [values[0], values[0]], ["x"], [values[1]?.toUpperCase()], [` ${values[1]}`], [1], [null], "x", {});
    out.push(Array.from({ length: maxItems }, (_, i) => values[i % values.length]), Array.from({ length: maxItems + 1 }, (_, i) => values[i % values.length]));
    return out;
  }
  if (schema.type === "object") {
    const pairs = (n: number) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`k${i}`, "v"]));
    const maxPairs = schema.maxProperties as number;
    const names = (schema.propertyNames ?? {}) as Schema;
    const valueMax = (schema.additionalProperties as Schema).maxLength as number;
    const keyMax = names.maxLength as number;
    out.push({}, pairs(maxPairs), pairs(maxPairs + 1));
    out.push({ "": "v" }, { [x(keyMax)]: "v" }, { [x(keyMax + 1)]: "v" }, { [x(keyMax, "😀")]: "v" }, { [x(keyMax + 1, "é")]: "v" });
    out.push({ k: "" }, { k: x(valueMax) }, { k: x(valueMax + 1) }, { k: x(valueMax, "😀") }, { k: x(valueMax + 1, "😀") });
    return out;
  }
  // Strings.
  out.push("", " ");
  if (schema.pattern === httpsUrlPattern) {
    out.push(...urls(schema.maxLength as number));
  } else if (typeof schema.pattern === "string" && schema.format === undefined) {
    out.push(...amounts);
  }
  if (schema.format === "date-time") {
    out.push("2026-01-01T00:00:00Z", "2026-01-01T00:00:00.123+02:00", "2026-01-01t00:00:00z", "2026-02-30T00:00:00Z", "2026-01-01T24:00:00Z");
    out.push("2026-01-01", "2026-01-01T00:00:00", "2026-01-01 00:00:00Z", "yesterday", "1767225600");
  }
  if (Array.isArray(schema.enum)) {
    for (const v of schema.enum as string[]) out.push(v, v.toUpperCase(), ` ${v}`, `${v}x`);
    out.push("x", "all");
  }
  const { minLength: min, maxLength: max } = schema as { minLength?: number; maxLength?: number };
  if (schema.pattern === undefined && schema.enum === undefined) {
    for (const n of [min, max]) if (n !== undefined) out.push(x(n - 1), x(n), x(n + 1));
    // Length is in characters: astral ones are two UTF-16 units but one character.
    if (max !== undefined) out.push(x(max, "😀"), x(max + 1, "😀"), x(max, "é"), `${x(max - 1)} `);
  }
  return out;
}

const amounts = [
  "1", "0", "0.0", "00", "01", "1.", ".5", "-1", "+1", "1e3", " 1", "1 ", "1,5", "12.50", "0.5", "0.000001", "0.0000001", "0.00000001",
  "0.000000001", "1.123456789012345678", "1.1234567890123456789", "999999999999999", "1000000000000000", "999999999999999.999999",
  `0.${x(57, "0")}1`, `0.${x(58, "0")}1`, "１", "٣", "0x10", "Infinity", "NaN",
];

/** Webhook URLs: public IP literals (no DNS), so only what the document says decides. */
function urls(maxLength: number): string[] {
  const base = "https://93.184.216.34/";
  return [
    base, "https://93.184.216.34", "https://93.184.216.34:443/h", "https://93.184.216.34:8443/h", "http://93.184.216.34/",
    "ftp://93.184.216.34/", "https://user:pw@93.184.216.34/", "https://user@93.184.216.34/", "https://[2606:2800:220:1:248:1893:25c8:1946]/h",
    "https://93.184.216.34/a b", "https:/93.184.216.34/", "93.184.216.34/hooks", "https://93.184.216.34/h?x=1#f", "//93.184.216.34/",
    base + x(maxLength - base.length), base + x(maxLength - base.length + 1),
  ];
}

/** Whether the document's schema takes a candidate: the body's whole schema, or a query parameter's. */
function documentTakes(validate: ValidateFunction, body: Record<string, unknown> | undefined, field: string, candidate: Candidate, type: unknown, requiredParam = false): boolean {
  if (body) {
    const sent = { ...body };
    if (candidate === absent) delete sent[field];
    else sent[field] = candidate;
    return validate(sent) as boolean;
  }
  if (candidate === absent) return !requiredParam;
  // A query string carries text; a client would send an integer parameter's digits.
  const text = String(candidate);
  return validate(type === "integer" && /^-?[0-9]+$/.test(text) ? Number(text) : text) as boolean;
}

interface Probe {
  operation: string;
  field: string;
  candidate: Candidate;
  documented: boolean;
  refused: boolean;
  answer: string;
}

const show = (c: Candidate) => (c === absent ? "(absent)" : JSON.stringify(c).slice(0, 80));

t.test("every documented constraint is the validators' own, both ways", async (t) => {
  const app = await startTestApp(t, { SITE_RATE_LIMIT_PER_MINUTE: "100000", PUBLIC_RATE_LIMIT_PER_MINUTE: "100000", CHECKOUT_RATE_LIMIT_PER_MINUTE: "100000", TERMINAL_RATE_LIMIT_PER_MINUTE: "100000", TERMINAL_ADDRESS_RATE_LIMIT_PER_MINUTE: "100000" });
  const a = await merchantWithKey(app.app);
  const em = () => app.app.db.em.fork();
  const site = await createSiteCredential(em(), a.merchant, "test", ["https://shop.example"]);
  const cashier = await createCashierSession(em(), { merchantId: a.merchant, environment: "test", cashier: "Ana", terminal: "Till 2" });
  const m = `/api/v1/merchants/${a.merchant}`;

  /** An ETH intent to simulate on: 18 decimal places, more than any candidate the comparison sends it. */
  async function newIntent(): Promise<string> {
    const res = await call(app.base, "POST", `${m}/payment-intents`, { key: a.key, idempotencyKey: idemKey(), body: { network: "ethereum", asset: "ETH", requested_amount: "1" } });
    if (res.status !== 200) throw new Error(`setup: ${JSON.stringify(res.body)}`);
    return res.body.data.public_id as string;
  }

  /** Per operation: a valid request, and how to send one with a field changed. */
  let refundId: string | undefined;
  const requests: Record<string, { body?: Record<string, unknown>; send: (body: Record<string, unknown> | undefined, query: string) => Promise<ApiResponse> }> = {
    CreatePaymentIntent: {
      body: { ...sampleIntent, merchant_reference: "order-1", expires_in_seconds: 900, metadata: { k: "v" } },
      send: (body) => call(app.base, "POST", `${m}/payment-intents`, { key: a.key, idempotencyKey: idemKey(), body }),
    },
    CreateSitePaymentIntent: {
      body: { ...sampleIntent, merchant_reference: "order-1", expires_in_seconds: 900 },
      send: (body) => call(app.base, "POST", "/api/v1/site-payment-intents", { key: site.credential, idempotencyKey: idemKey(), body }),
    },
    CreatePosPayment: {
      body: { ...sampleIntent, merchant_reference: "table-4", expires_in_seconds: 900 },
      send: (body) => call(app.base, "POST", "/api/v1/terminal/pos/payment", { key: cashier.session, idempotencyKey: idemKey(), body }),
    },
    SimulatePaymentIntent: {
      // Without an amount, each outcome pays what makes it come about.
      body: { outcome: "confirmed" },
      send: async (body) => call(app.base, "POST", `/api/v1/sandbox/merchants/${a.merchant}/payment-intents/${await newIntent()}/simulate`, { key: a.key, body }),
    },
    CreateRefund: {
      // An overpaid ETH intent: a refund with no amount is its overpaid part; one with an amount takes
      // what is left (past it, 409: not a refusal of the request's form).
      body: { reason: "returned" },
      send: async (body) => {
        const pi = await newIntent();
        await call(app.base, "POST", `/api/v1/sandbox/merchants/${a.merchant}/payment-intents/${pi}/simulate`, { key: a.key, body: { outcome: "overpaid" } });
        return call(app.base, "POST", `${m}/payment-intents/${pi}/refunds`, { key: a.key, idempotencyKey: idemKey(), body });
      },
    },
    CreateWebhookEndpoint: {
      body: { url: "https://93.184.216.34/hooks", description: "orders" },
      send: async (body) => {
        const res = await call(app.base, "POST", `${m}/webhook-endpoints`, { key: a.key, idempotencyKey: idemKey(), body });
        // Keep under the cap of enabled endpoints: each one made here is disabled again.
        if (res.status === 200) await call(app.base, "POST", `${m}/webhook-endpoints/${res.body.data.id}/disable`, { key: a.key, idempotencyKey: idemKey() });
        return res;
      },
    },
    UpdateWebhookEndpoint: {
      body: { description: "orders", enabled_events: ["payment.confirmed"] },
      send: async (body) => {
        const made = await call(app.base, "POST", `${m}/webhook-endpoints`, { key: a.key, body: { url: "https://93.184.216.34/hooks" } });
        const res = await call(app.base, "POST", `${m}/webhook-endpoints/${made.body.data.id}`, { key: a.key, body });
        // Keep under the cap of enabled endpoints: each one made here is disabled again.
        await call(app.base, "POST", `${m}/webhook-endpoints/${made.body.data.id}/disable`, { key: a.key, idempotencyKey: idemKey() });
        return res;
      },
    },
    GetRefundPsbt: {
      // An ETH refund: any fee_rate the rules take is past them, and then refused as not bitcoin (409).
      send: async (_b, q) => {
        refundId ??= await (async () => {
          const pi = await newIntent();
          await call(app.base, "POST", `/api/v1/sandbox/merchants/${a.merchant}/payment-intents/${pi}/simulate`, { key: a.key, body: { outcome: "overpaid" } });
          return (await call(app.base, "POST", `${m}/payment-intents/${pi}/refunds`, { key: a.key, idempotencyKey: idemKey(), body: {} })).body.data.id as string;
        })();
        return call(app.base, "GET", `${m}/refunds/${refundId}/psbt${q}`, { key: a.key });
      },
    },
    ListPaymentIntents: { send: (_b, q) => call(app.base, "GET", `${m}/payment-intents${q}`, { key: a.key }) },
    ExportPaymentIntents: { send: (_b, q) => call(app.base, "GET", `${m}/payment-intents/export${q}`, { key: a.key }) },
    ListWebhookEndpoints: { send: (_b, q) => call(app.base, "GET", `${m}/webhook-endpoints${q}`, { key: a.key }) },
    ListWebhookDeliveries: { send: (_b, q) => call(app.base, "GET", `${m}/webhook-deliveries${q}`, { key: a.key }) },
    ListApiKeys: { send: (_b, q) => call(app.base, "GET", `${m}/api-keys${q}`, { key: a.key }) },
    CreateApiKey: {
      body: { scopes: ["payment_intents:read"] },
      send: async (body) => {
        const res = await call(app.base, "POST", `${m}/api-keys`, { key: a.key, body });
        // Each key made here is revoked again.
        if (res.status === 200) await call(app.base, "POST", `${m}/api-keys/${res.body.data.id}/revoke`, { key: a.key });
        return res;
      },
    },
  };

  /** Sends a candidate and reads the answer: refused means 400 naming the field. */
  async function probe(operation: string, field: string, candidate: Candidate, validate: ValidateFunction, type: unknown, bodyOverride?: Record<string, unknown>, requiredParam = false): Promise<Probe> {
    const request = requests[operation]!;
    const base = bodyOverride ?? request.body;
    let res: ApiResponse;
    if (base) {
      const sent = { ...base };
      if (candidate === absent) delete sent[field];
      else sent[field] = candidate;
      res = await request.send(sent, "");
    } else {
      res = await request.send(undefined, candidate === absent ? "" : `?${new URLSearchParams({ [field]: String(candidate) })}`);
    }
    // Changing one field can make another wrong (a network whose assets do not include the
    // request's): the verdicts compared are the whole request's, the answer names the field.
    const refused = res.status === 400;
    if (res.status >= 500) throw new Error(`${operation} ${field}=${show(candidate)}: ${res.status} ${JSON.stringify(res.body)}`);
    return { operation, field, candidate, documented: documentTakes(validate, base, field, candidate, type, requiredParam), refused, answer: `${res.status} ${res.body?.error?.param ?? ""} ${res.body?.error?.message ?? ""}` };
  }

  const probes: Probe[] = [];
  const covered: string[] = [];
  for (const item of Object.values(doc.paths)) {
    for (const op of Object.values(item)) {
      const request = requests[op.operationId];
      if (op.requestBody) {
        const ref = op.requestBody.content["application/json"].schema.$ref;
        const component = doc.components.schemas[ref.split("/").pop()!]!;
        const validate = ajv.compile(rewrite({ $ref: ref }));
        for (const [field, schema] of Object.entries(component.properties ?? {})) {
          if (!isConstrained(schema)) continue;
          t.ok(request, `${op.operationId}.${field} is constrained, and this test sends ${op.operationId}`);
          if (!request) continue;
          covered.push(`${op.operationId}.${field}`);
          if (op.operationId === "CreateRefund" && field === "amount") {
            // The places allowed are the refunded payment's asset's (ETH, 18), which the request does not name.
            for (const c of candidatesFor(schema).filter((c) => typeof c !== "string" || (c.split(".")[1] ?? "").length <= 18)) {
              probes.push(await probe(op.operationId, field, c, validate, schema.type));
            }
            continue;
          }
          if (op.operationId === "SimulatePaymentIntent" && field === "amount") {
            // A late payment counts whatever its amount; the places allowed are the intent's asset's (ETH, 18).
            for (const c of candidatesFor(schema).filter((c) => typeof c !== "string" || (c.split(".")[1] ?? "").length <= 18)) {
              probes.push(await probe(op.operationId, field, c, validate, schema.type, { outcome: "late", amount: "1" }));
            }
            continue;
          }
          for (const c of candidatesFor(schema)) probes.push(await probe(op.operationId, field, c, validate, schema.type));
        }
      }
      for (const p of op.parameters ?? []) {
        if ("$ref" in p || p.in !== "query" || !isConstrained(p.schema)) continue;
        t.ok(request, `${op.operationId}?${p.name} is constrained, and this test sends ${op.operationId}`);
        if (!request) continue;
        covered.push(`${op.operationId}?${p.name}`);
        const validate = ajv.compile(p.schema);
        for (const c of [...candidatesFor(p.schema), "abc", "1e2", "01"]) probes.push(await probe(op.operationId, p.name, c, validate, p.schema.type, undefined, p.required === true));
      }
    }
  }

  // Amounts are bounded by the asset named beside them: 18 places for ETH, 8 for BTC, 0 extra for none.
  const create = doc.paths["/api/v1/merchants/{merchant}/payment-intents"]!.post!;
  const createValidate = ajv.compile(rewrite(create.requestBody!.content["application/json"].schema));
  for (const [network, asset] of [["ethereum", "ETH"], ["bitcoin", "BTC"], ["polygon", "USDC"]] as const) {
    for (const c of amounts) probes.push(await probe("CreatePaymentIntent", "requested_amount", c, createValidate, "string", { network, asset, requested_amount: "1" }));
  }
  // Every network with every asset: the document's if/then pairs against the server's table.
  const assetNames = (doc.components.schemas.CreatePaymentIntentRequest!.properties!.asset!.enum as string[]) ?? [];
  for (const network of doc.components.schemas.CreatePaymentIntentRequest!.properties!.network!.enum as string[]) {
    for (const asset of assetNames) {
      // A pair the document takes that has no token in this key's environment (polygon's USDT, Live
      // only): the document says so in words, and the Test key's create is refused naming asset.
      const info = findAsset(network, asset);
      if (info && !offeredIn(info, "test")) {
        const res = await call(app.base, "POST", `${m}/payment-intents`, { key: a.key, idempotencyKey: idemKey(), body: { network, asset, requested_amount: "1" } });
        t.same([res.status, res.body.error?.param], [400, "asset"], `${asset} on ${network} with a Test key: ${res.body.error?.message}`);
        t.match(doc.components.schemas.CreatePaymentIntentRequest!.properties!.network!.description, "no token in the key's environment", "and the document says why");
        continue;
      }
      probes.push(await probe("CreatePaymentIntent", "asset", asset, createValidate, "string", { network, asset, requested_amount: "1" }));
    }
  }

  t.ok(covered.length >= 15, `${covered.length} constrained fields compared: ${covered.join(", ")}`);
  const disagreements = probes.filter((p) => p.documented === p.refused);
  for (const p of disagreements) {
    t.fail(`${p.operation} ${p.field}=${show(p.candidate)}: the document ${p.documented ? "allows" : "refuses"} it, the service ${p.refused ? "refused" : "took"} it (${p.answer})`);
  }
  t.equal(disagreements.length, 0, `${probes.length} requests: the document and the service agree on each`);
  t.ok(probes.some((p) => p.refused) && probes.some((p) => !p.refused), "both verdicts occur");

  // The Idempotency-Key header, by the document's own pattern.
  const header = new RegExp(doc.components.parameters.IdempotencyKey.schema.pattern);
  for (const key of ["", "k".repeat(7), "k".repeat(8), "k".repeat(128), "k".repeat(129), "  key-1234 ", "key 12345", "key!12345", "ord_1:2.3-4", "\tkey12345"]) {
    const res = await call(app.base, "POST", `${m}/payment-intents`, { key: a.key, body: sampleIntent, headers: { "idempotency-key": key } });
    t.equal(res.status === 400, !header.test(key), `Idempotency-Key ${JSON.stringify(key)}: ${header.test(key) ? "documented, taken" : "refused by both"} (${res.status} ${res.body?.error?.code ?? ""})`);
  }

  // Random amounts: whatever the document takes, the service takes, and nothing else.
  await fc.assert(
    fc.asyncProperty(fc.stringMatching(/^[-+0-9.e ]{1,22}$/), async (amount) => {
      const p = await probe("CreatePaymentIntent", "requested_amount", amount, createValidate, "string");
      return p.documented !== p.refused;
    }),
    { numRuns: 60, seed: 20261125 },
  );

  // The comparison can fail: a document that allowed one more character of merchant_reference
  // than the server does disagrees with the answers just seen.
  const loose = structuredClone(doc.components.schemas.CreatePaymentIntentRequest!);
  loose.properties!.merchant_reference!.maxLength = 129;
  const looseAjv = new Ajv2020({ strict: true, allErrors: true });
  addFormats.default(looseAjv);
  const looseValidate = looseAjv.addSchema({ $id: "rules.json", $defs: rewrite(doc.components.schemas) }).compile(rewrite(loose));
  const seen = probes.filter((p) => p.operation === "CreatePaymentIntent" && p.field === "merchant_reference");
  const caught = seen.filter((p) => documentTakes(looseValidate, requests.CreatePaymentIntent!.body, p.field, p.candidate, "string") === p.refused);
  t.ok(caught.length > 0, `a one-character drift is caught (at ${caught.map((p) => [...String(p.candidate)].length).join(", ")} characters)`);
});
