// IntentService over RPC_PORT: the Connect client (gRPC protocol) and an independent
// gRPC stack (@grpc/grpc-js + @grpc/proto-loader on the repo's own protos).
import path from "node:path";
import { createClient, ConnectError, Code } from "@connectrpc/connect";
import { createGrpcTransport, createConnectTransport } from "@connectrpc/connect-node";
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";
import t from "tap";
import { fromJson } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import { IntentService } from "../../gen/payments/v1/payment_intents_pb.ts";
import { ErrorDetailSchema } from "../../gen/payments/v1/options_pb.ts";
import { idemKey, merchantWithKey, sampleIntent, startTestApp } from "../helpers/harness.ts";

const { app, rpcUrl } = await startTestApp(t, {}, ["rpc"]);
const a = await merchantWithKey(app);
const b = await merchantWithKey(app);

t.test("Connect client over gRPC: create, get, list, cancel", async (t) => {
  const client = createClient(IntentService, createGrpcTransport({ baseUrl: rpcUrl }));
  const auth = { authorization: `Bearer ${a.key}` };
  const key = idemKey();
  const created = await client.createPaymentIntent({ merchant: a.merchant, ...sampleIntent, requestedAmount: "0.5" }, {
    headers: { ...auth, "idempotency-key": key },
  });
  t.equal(created.data?.status, "pending");
  t.equal(created.data?.requestedAmount, "0.5");
  let replayed: string | null = null;
  const again = await client.createPaymentIntent(
    { merchant: a.merchant, ...sampleIntent, requestedAmount: "0.5" },
    { headers: { ...auth, "idempotency-key": key }, onHeader: (h) => (replayed = h.get("idempotent-replayed")) },
  );
  t.equal(again.data?.publicId, created.data?.publicId, "replay over gRPC");
  t.equal(replayed, "true");
  const id = created.data?.publicId ?? "";
  const got = await client.getPaymentIntent({ merchant: a.merchant, publicId: id }, { headers: auth });
  t.equal(got.data?.publicId, id);
  const list = await client.listPaymentIntents({ merchant: a.merchant, limit: 10 }, { headers: auth });
  t.ok(list.data.some((d) => d.publicId === id));
  const cancelled = await client.cancelPaymentIntent({ merchant: a.merchant, publicId: id }, { headers: auth });
  t.equal(cancelled.data?.status, "cancelled");
});

t.test("payment methods over gRPC: a priced intent offering three, no one method until a payment chooses; a mixed list unpriced is refused naming the field", async (t) => {
  const client = createClient(IntentService, createGrpcTransport({ baseUrl: rpcUrl }));
  const auth = { authorization: `Bearer ${a.key}` };
  const methods = [
    { network: "ethereum", asset: "ETH" },
    { network: "ethereum", asset: "USDC" },
    { network: "base", asset: "USDC" },
  ];
  // A google.protobuf.Value: the list as a gRPC client builds it.
  const paymentMethods = fromJson(ValueSchema, methods);
  const created = await client.createPaymentIntent(
    { merchant: a.merchant, priceAmount: "19.99", priceCurrency: "USD", paymentMethods, metadata: {} },
    { headers: { ...auth, "idempotency-key": idemKey() } },
  );
  const pi = created.data;
  t.same(pi?.paymentMethods.map((m) => [m.network, m.asset]), methods.map((m) => [m.network, m.asset]), "the methods, in the order asked");
  t.ok(pi?.paymentMethods.every((m) => m.requestedAmount !== "" && m.depositAddress !== "" && m.quote !== undefined), "each quoted, with its amount and address");
  t.same([pi?.network, pi?.asset, pi?.requestedAmount, pi?.depositAddress, pi?.amountDue], [undefined, undefined, undefined, undefined, undefined], "no one method's fields until a payment chooses");
  const mixed = await client
    .createPaymentIntent({ merchant: a.merchant, requestedAmount: "5", paymentMethods, metadata: {} }, { headers: { ...auth, "idempotency-key": idemKey() } })
    .then(() => undefined, (e: unknown) => ConnectError.from(e));
  t.equal(mixed?.code, Code.InvalidArgument);
  t.equal(mixed?.findDetails(ErrorDetailSchema)[0]?.param, "price_amount", "several assets need a price: the field named");
});

t.test("errors keep their code as an ErrorDetail", async (t) => {
  const client = createClient(IntentService, createConnectTransport({ baseUrl: rpcUrl, httpVersion: "2" }));
  const cases: [() => Promise<unknown>, Code, string, string][] = [
    [() => client.getPaymentIntent({ merchant: a.merchant, publicId: "pi_x" }), Code.Unauthenticated, "unauthenticated", ""],
    [() => client.getPaymentIntent({ merchant: b.merchant, publicId: "pi_x" }, { headers: { authorization: `Bearer ${a.key}` } }), Code.PermissionDenied, "merchant_mismatch", "merchant"],
    [() => client.getPaymentIntent({ merchant: a.merchant, publicId: "pi_x" }, { headers: { authorization: `Bearer ${a.key}` } }), Code.NotFound, "not_found", "public_id"],
    [
      () => client.createPaymentIntent({ merchant: a.merchant, ...sampleIntent, requestedAmount: "1e3" }, { headers: { authorization: `Bearer ${a.key}`, "idempotency-key": idemKey() } }),
      Code.InvalidArgument,
      "validation_failed",
      "requested_amount",
    ],
    // A valid request but for the key (sampleIntent's requested_amount is the REST name: spelled out).
    [
      () => client.createPaymentIntent({ merchant: a.merchant, ...sampleIntent, requestedAmount: "12.50" }, { headers: { authorization: `Bearer ${a.key}` } }),
      Code.InvalidArgument,
      "idempotency_key_required",
      "",
    ],
    [() => client.listPaymentIntents({ merchant: a.merchant, limit: 0 }, { headers: { authorization: `Bearer ${a.key}` } }), Code.InvalidArgument, "validation_failed", "limit"],
  ];
  for (const [run, code, errorCode, param] of cases) {
    const err = await run().then(
      () => undefined,
      (e: unknown) => ConnectError.from(e),
    );
    t.ok(err, errorCode);
    t.equal(err?.code, code, errorCode);
    const detail = err?.findDetails(ErrorDetailSchema)[0];
    t.equal(detail?.code, errorCode);
    t.equal(detail?.param, param, `${errorCode} param`);
    t.match(err?.metadata.get("x-request-id"), /^req_/);
  }
});

t.test("interop: @grpc/grpc-js with proto-loader on proto/", async (t) => {
  const root = path.resolve(import.meta.dirname, "../../proto");
  const definition = protoLoader.loadSync(path.join(root, "payments/v1/payment_intents.proto"), {
    includeDirs: [root],
    keepCase: true,
    longs: String,
    defaults: true,
    oneofs: true,
  });
  const loaded = grpc.loadPackageDefinition(definition) as unknown as {
    payments: { v1: { IntentService: new (address: string, creds: grpc.ChannelCredentials) => grpc.Client } };
  };
  const client = new loaded.payments.v1.IntentService(rpcUrl.replace("http://", ""), grpc.credentials.createInsecure()) as grpc.Client &
    Record<string, (req: unknown, md: grpc.Metadata, cb: (err: grpc.ServiceError | null, res: any) => void) => void>;
  t.teardown(() => client.close());
  const unary = (method: string, req: unknown, md: grpc.Metadata) =>
    new Promise<any>((resolve, reject) => client[method]?.(req, md, (err, res) => (err ? reject(err) : resolve(res))));
  const md = new grpc.Metadata();
  md.set("authorization", `Bearer ${a.key}`);
  md.set("idempotency-key", idemKey());
  const created = await unary("CreatePaymentIntent", { merchant: a.merchant, ...sampleIntent, merchant_reference: "grpc-js" }, md);
  t.equal(created.data.status, "pending");
  t.equal(created.data.merchant_reference, "grpc-js");
  const readMd = new grpc.Metadata();
  readMd.set("authorization", `Bearer ${a.key}`);
  const got = await unary("GetPaymentIntent", { merchant: a.merchant, public_id: created.data.public_id }, readMd);
  t.equal(got.data.public_id, created.data.public_id);
  const denied = await unary("GetPaymentIntent", { merchant: b.merchant, public_id: created.data.public_id }, readMd).catch((e) => e);
  t.equal(denied.code, grpc.status.PERMISSION_DENIED);
});
