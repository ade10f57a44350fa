import t from "tap";
import { create, type JsonValue } from "@bufbuild/protobuf";
import { timestampDate, timestampFromDate } from "@bufbuild/protobuf/wkt";
import { ConnectError } from "@connectrpc/connect";
import {
  CreatePaymentIntentRequestSchema,
  CreatePaymentIntentResponseSchema,
  ListPaymentIntentsRequestSchema,
  ListPaymentIntentsResponseSchema,
  PaymentIntentSchema,
  type CreatePaymentIntentRequest,
  type ListPaymentIntentsRequest,
} from "../../gen/payments/v1/payment_intents_pb.ts";
import { decodeRequest, encodeResponse, isRfc3339 } from "../../services/platform/api-json.ts";
import { describeError } from "../../services/platform/errors.ts";

type Asserts = Pick<typeof t, "ok" | "equal" | "fail" | "match">;

/** Asserts `fn` throws a ConnectError that a client sees as validation_failed naming `param`. */
function refusedWithParam(t: Asserts, fn: () => unknown, param: string, name: string): void {
  try {
    fn();
    t.fail(`${name}: expected a validation error`);
  } catch (err) {
    t.ok(err instanceof ConnectError, `${name}: a ConnectError`);
    const view = describeError(err);
    t.equal(view.code, "validation_failed", `${name}: code`);
    t.equal(view.status, 400, `${name}: status`);
    t.equal(view.param, param, `${name}: param`);
    t.match(view.message, param, `${name}: message names the field`);
  }
}

const path = { merchant: "m1" };
const goodBody: Record<string, JsonValue> = {
  network: "ethereum",
  asset: "USDC",
  requested_amount: "12.50",
  merchant_reference: "order-42",
  expires_in_seconds: 900,
  metadata: { cart: "c1", user: "u7" },
};

function createBody(body: Record<string, JsonValue>) {
  return decodeRequest<CreatePaymentIntentRequest>(CreatePaymentIntentRequestSchema, path, body, "body");
}
function listQuery(query: Record<string, JsonValue>) {
  return decodeRequest<ListPaymentIntentsRequest>(ListPaymentIntentsRequestSchema, path, query, "query");
}

t.test("a valid body decodes, with the merchant from the path", async (t) => {
  const req = createBody(goodBody);
  t.equal(req.merchant, "m1");
  t.equal(req.network, "ethereum");
  t.equal(req.asset, "USDC");
  t.equal(req.requestedAmount, "12.50");
  t.equal(req.merchantReference, "order-42");
  t.equal(req.expiresInSeconds, 900);
  t.same(req.metadata, { cart: "c1", user: "u7" });
});

t.test("optional fields may be omitted or null", async (t) => {
  const minimal = createBody({ network: "ethereum", asset: "USDC", requested_amount: "1" });
  t.equal(minimal.merchantReference, undefined);
  t.equal(minimal.expiresInSeconds, undefined);
  t.same(minimal.metadata, {});
  const nulls = createBody({ ...goodBody, merchant_reference: null, expires_in_seconds: null });
  t.equal(nulls.merchantReference, undefined, "null reference is unset");
  t.equal(nulls.expiresInSeconds, undefined, "null expiry is unset");
  t.same(createBody({}).merchant, "m1", "an empty body still gets the path's merchant");
});

t.test("unknown body fields are refused, naming the field", async (t) => {
  refusedWithParam(t, () => createBody({ ...goodBody, colour: "blue" }), "colour", "unknown field");
  refusedWithParam(t, () => createBody({ requestedAmount: "1" }), "requestedAmount", "camelCase name");
  refusedWithParam(t, () => createBody({ constructor: "x" }), "constructor", "an Object.prototype name");
});

t.test("a body cannot name a path parameter", async (t) => {
  refusedWithParam(t, () => createBody({ ...goodBody, merchant: "m2" }), "merchant", "other merchant");
  refusedWithParam(t, () => createBody({ ...goodBody, merchant: "m1" }), "merchant", "even the same merchant");
});

t.test("wrong JSON types are refused, naming the field", async (t) => {
  const cases: [string, JsonValue][] = [
    ["requested_amount", 12],
    ["requested_amount", true],
    ["network", ["ethereum"]],
    ["merchant_reference", { a: "b" }],
    ["expires_in_seconds", "900"],
    ["expires_in_seconds", 1.5],
    ["expires_in_seconds", 1e12],
    ["expires_in_seconds", false],
    ["metadata", { a: 1 }],
    ["metadata", { a: null, b: { c: "d" } }],
    ["metadata", ["a"]],
    ["metadata", "a=b"],
  ];
  for (const [field, value] of cases) {
    refusedWithParam(t, () => createBody({ ...goodBody, [field]: value }), field, `${field}: ${JSON.stringify(value)}`);
  }
});

t.test("query strings", async (t) => {
  const req = listQuery({ limit: "25", status: "pending", cursor: "abc.def", created_after: "2026-01-31T12:00:00Z" });
  t.equal(req.merchant, "m1");
  t.equal(req.limit, 25, "limit parsed from its string");
  t.equal(req.status, "pending");
  t.equal(req.cursor, "abc.def");
  t.ok(req.createdAfter, "created_after set");
  if (req.createdAfter) t.equal(timestampDate(req.createdAfter).toISOString(), "2026-01-31T12:00:00.000Z");
  t.equal(req.createdBefore, undefined, "created_before unset");

  const offset = listQuery({ created_before: "2026-01-31T13:30:00.5+01:30" });
  t.equal(offset.createdBefore && timestampDate(offset.createdBefore).toISOString(), "2026-01-31T12:00:00.500Z", "offsets and fractions");

  const empty = listQuery({});
  t.equal(empty.limit, undefined, "no limit");
});

t.test("bad query values are refused, naming the parameter", async (t) => {
  refusedWithParam(t, () => listQuery({ limit: "abc" }), "limit", "limit=abc");
  refusedWithParam(t, () => listQuery({ limit: "0x10" }), "limit", "limit=0x10");
  refusedWithParam(t, () => listQuery({ limit: "1e2" }), "limit", "limit=1e2");
  refusedWithParam(t, () => listQuery({ limit: "12.0" }), "limit", "limit=12.0");
  refusedWithParam(t, () => listQuery({ limit: "1.5" }), "limit", "limit=1.5");
  refusedWithParam(t, () => listQuery({ limit: "" }), "limit", "limit= (empty)");
  refusedWithParam(t, () => listQuery({ limit: "99999999999" }), "limit", "limit out of int32 range");
  refusedWithParam(t, () => listQuery({ created_after: "yesterday" }), "created_after", "created_after=yesterday");
  refusedWithParam(t, () => listQuery({ created_before: "2026-13-45" }), "created_before", "created_before not a date");
  refusedWithParam(t, () => listQuery({ merchant: "m2" }), "merchant", "path parameter in the query");
  refusedWithParam(t, () => listQuery({ sort: "asc" }), "sort", "unknown query parameter");
  refusedWithParam(
    t,
    () => decodeRequest(CreatePaymentIntentRequestSchema, path, { metadata: "a" }, "query"),
    "metadata",
    "a map in the query string",
  );
});

t.test("a bad value among good ones names the bad one", async (t) => {
  refusedWithParam(t, () => listQuery({ status: "pending", limit: "ten", cursor: "x" }), "limit", "limit among others");
});

t.test("encodeResponse", async (t) => {
  const created = new Date("2026-01-31T12:00:00Z");
  const intent = create(PaymentIntentSchema, {
    publicId: "pi_1",
    status: "pending",
    network: "ethereum",
    asset: "USDC",
    requestedAmount: "12.50",
    environment: "test",
    createdAt: timestampFromDate(created),
    checkoutUrl: "http://localhost:8080/checkout/pi_1",
  });
  const json = encodeResponse(PaymentIntentSchema, intent) as Record<string, JsonValue>;
  t.same(json, {
    public_id: "pi_1",
    status: "pending",
    merchant_reference: null,
    network: "ethereum",
    asset: "USDC",
    requested_amount: "12.50",
    environment: "test",
    created_at: "2026-01-31T12:00:00.000Z",
    expires_at: null,
    checkout_url: "http://localhost:8080/checkout/pi_1",
    metadata: {},
    deposit_address: null,
    payment_uri: null,
    amount_received: null,
    amount_refunded: null,
    transactions: [],
    paid_at: null,
    expired_at: null,
    cancelled_at: null,
    source: "",
    cashier: null,
    terminal: null,
    required_confirmations: 0,
    underpayment_tolerance_bps: 0,
    sequence: 0,
    redirect_url: null,
    cancel_url: null,
    amount_pending: null,
    price_amount: null,
    price_currency: null,
    quote: null,
    watched: false,
    notice: null,
    amount_due: null,
    payment_methods: [],
  });
  t.notOk("publicId" in json, "no camelCase names");
  t.strictSame(Object.keys(json).sort(), Object.keys(json).map((k) => k.toLowerCase()).sort(), "all snake_case");

  const withRef = encodeResponse(PaymentIntentSchema, create(PaymentIntentSchema, { merchantReference: "" })) as Record<string, JsonValue>;
  t.equal(withRef.merchant_reference, "", "an explicitly empty optional string is not null");
  t.equal(withRef.status, "", "implicit fields are always present");

  const wrapped = encodeResponse(CreatePaymentIntentResponseSchema, create(CreatePaymentIntentResponseSchema, { data: intent }));
  t.match(wrapped, { data: { merchant_reference: null, expires_at: null, created_at: "2026-01-31T12:00:00.000Z" } }, "nested message");

  const page = encodeResponse(
    ListPaymentIntentsResponseSchema,
    create(ListPaymentIntentsResponseSchema, { data: [intent, intent], hasMore: false }),
  ) as Record<string, JsonValue>;
  t.equal(page.has_more, false, "false booleans are present");
  t.equal(page.next_cursor, null, "unset next_cursor is null");
  t.ok(Array.isArray(page.data) && page.data.length === 2, "two items");
  t.match(page.data, [{ merchant_reference: null }, { merchant_reference: null }], "nulls inside list items");

  const none = encodeResponse(CreatePaymentIntentResponseSchema, create(CreatePaymentIntentResponseSchema));
  t.same(none, { data: null }, "an unset message field is null");

  const ms = encodeResponse(
    PaymentIntentSchema,
    create(PaymentIntentSchema, { expiresAt: timestampFromDate(new Date("2026-01-31T12:15:00.250Z")) }),
  ) as Record<string, JsonValue>;
  t.equal(ms.expires_at, "2026-01-31T12:15:00.250Z", "milliseconds kept");
});

t.test("isRfc3339: a real calendar date and time in the proto JSON form", async (t) => {
  for (const value of [
    "2026-01-31T12:00:00Z",
    "2024-02-29T00:00:00Z",
    "2000-02-29T23:59:59.999999999Z",
    "2026-12-31T23:59:59+14:00",
    "2026-06-30T00:00:00-05:30",
    "0001-01-01T00:00:00Z",
  ]) {
    t.ok(isRfc3339(value), value);
  }
  for (const value of [
    "2026-02-30T00:00:00Z",
    "2025-02-29T00:00:00Z",
    "1900-02-29T00:00:00Z",
    "2026-04-31T00:00:00Z",
    "2026-00-10T00:00:00Z",
    "2026-13-01T00:00:00Z",
    "2026-01-00T00:00:00Z",
    "2026-01-01T24:00:00Z",
    "2026-01-01T23:60:00Z",
    "2026-01-01T23:59:60Z",
    "2026-01-01T00:00:00+24:00",
    "2026-01-01T00:00:00+01:60",
    "0000-01-01T00:00:00Z",
    "2026-01-01T00:00:00",
    "2026-01-01 00:00:00Z",
    "2026-01-01t00:00:00z",
    "2026-01-01T00:00:00.Z",
    "2026-01-01T00:00:00.1234567890Z",
    "2026-1-01T00:00:00Z",
    "yesterday",
    "",
  ]) {
    t.notOk(isRfc3339(value), value);
  }
});

t.test("an impossible date in a timestamp filter is refused, naming it", async (t) => {
  refusedWithParam(t, () => listQuery({ created_after: "2026-02-30T00:00:00Z" }), "created_after", "February 30th");
  refusedWithParam(t, () => listQuery({ created_before: "2026-01-01T23:59:60Z" }), "created_before", "a leap second");
  t.ok(listQuery({ created_after: "2024-02-29T12:00:00+01:00" }).createdAfter, "a leap day is taken");
});

t.test("text that is not Unicode is refused, naming the field; a deep body does not exhaust the stack", async (t) => {
  refusedWithParam(t, () => createBody({ ...goodBody, merchant_reference: "a\ud800" }), "merchant_reference", "a lone high surrogate");
  refusedWithParam(t, () => createBody({ ...goodBody, metadata: { k: "\udfff" } }), "metadata", "a lone low surrogate in a map value");
  refusedWithParam(t, () => createBody({ ...goodBody, metadata: { "\ud800": "v" } }), "metadata", "a lone surrogate in a map key");
  let deep: JsonValue = "x";
  for (let i = 0; i < 100_000; i++) deep = { a: deep };
  refusedWithParam(t, () => createBody({ ...goodBody, metadata: deep }), "metadata", "100000 levels of objects");
  t.equal(createBody({ ...goodBody, merchant_reference: "💳 ok" }).merchantReference, "💳 ok", "a surrogate pair is text");
});

t.test("a 64-bit integer whose declared max fits a double is a JSON number; unset, null", async (t) => {
  const json = encodeResponse(
    PaymentIntentSchema,
    create(PaymentIntentSchema, {
      transactions: [
        { txHash: "ab", outputIndex: 0, amount: "1", confirmations: 3, blockHeight: 21_000_000n, counted: true },
        { txHash: "cd", outputIndex: 1, amount: "1", confirmations: 0, counted: false },
        { txHash: "ef", outputIndex: 2, amount: "1", confirmations: 1, blockHeight: BigInt(Number.MAX_SAFE_INTEGER), counted: false },
      ],
    }),
  ) as { transactions: { block_height: JsonValue }[] };
  t.same(
    json.transactions.map((x) => x.block_height),
    [21_000_000, null, Number.MAX_SAFE_INTEGER],
  );
});
