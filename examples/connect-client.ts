// A Connect client of the rpc port over plain HTTP/1.1, as a browser or any fetch would call it.
// Creates a Test payment intent and reads it back:
//
//   RPC_URL=http://127.0.0.1:8081 API_KEY=sk_test_... MERCHANT=mer_... npm run -s example:connect
//
// createGrpcTransport (HTTP/2) or createGrpcWebTransport work the same way on the same port.
import { randomUUID } from "node:crypto";
import { toJson } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { ErrorDetailSchema } from "../gen/payments/v1/options_pb.ts";
import { IntentService, PaymentIntentSchema } from "../gen/payments/v1/payment_intents_pb.ts";

const { RPC_URL = "http://127.0.0.1:8081", API_KEY, MERCHANT } = process.env;
if (!API_KEY || !MERCHANT) {
  console.error("Set API_KEY (sk_test_...) and MERCHANT (the key's merchant id).");
  process.exit(2);
}

const client = createClient(IntentService, createConnectTransport({ baseUrl: RPC_URL, httpVersion: "1.1" }));
const auth = { authorization: `Bearer ${API_KEY}` };

try {
  // The Idempotency-Key makes a retry of this very call safe: the same intent comes back.
  const created = await client.createPaymentIntent(
    { merchant: MERCHANT, network: "ethereum", asset: "USDC", requestedAmount: "12.50" },
    { headers: { ...auth, "idempotency-key": `example-${randomUUID()}` } },
  );
  const got = await client.getPaymentIntent({ merchant: MERCHANT, publicId: created.data?.publicId ?? "" }, { headers: auth });
  // The same JSON REST shows: field names as in the proto.
  console.log(JSON.stringify(toJson(PaymentIntentSchema, got.data!, { useProtoFieldName: true })));
} catch (err) {
  // The documented error code (as REST's error.code) travels as a payments.v1.ErrorDetail.
  const e = ConnectError.from(err);
  console.error(`${Code[e.code]} ${e.findDetails(ErrorDetailSchema)[0]?.code ?? ""}: ${e.rawMessage}`);
  process.exit(1);
}
