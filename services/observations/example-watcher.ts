// A chain watcher's side of ObservationService, as small as it gets: report one transaction
// output to a deposit address over gRPC with an internal credential, and print what the
// server decided. A real watcher calls RecordObservation for every output to an address it
// watches, again as confirmations grow, and RecordReorg when blocks leave the best chain.
//
//   RPC_URL=http://127.0.0.1:8081 INTERNAL_CREDENTIAL=int_... \
//     npm run -s example:watcher -- ethereum USDC 0xADDRESS 12.5 12
import { randomBytes } from "node:crypto";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { ObservationService } from "../../gen/payments/v1/observations_pb.ts";
import { findAsset, isEvmNetwork } from "../vocabulary/assets.ts";

const [network, asset, toAddress, amount, confirmations = "0"] = process.argv.slice(2);
const credential = process.env.INTERNAL_CREDENTIAL;
if (!network || !asset || !toAddress || !amount || !credential) {
  console.error("usage: INTERNAL_CREDENTIAL=int_... [RPC_URL=...] npm run -s example:watcher -- NETWORK ASSET TO_ADDRESS AMOUNT [CONFIRMATIONS]");
  process.exit(2);
}

const client = createClient(ObservationService, createGrpcTransport({ baseUrl: process.env.RPC_URL ?? "http://127.0.0.1:8081" }));
const res = await client.recordObservation(
  {
    network,
    asset,
    toAddress,
    // A made-up transaction in a made-up block; a watcher sends the chain's own.
    txHash: process.env.TX_HASH ?? randomBytes(32).toString("hex"),
    // Numbered as the built-in watchers number outputs (observations.proto): on an EVM chain a
    // token Transfer is 1 + its log's index in the transaction's receipt (here the first log),
    // the transaction's own value 0.
    outputIndex: isEvmNetwork(network) && findAsset(network, asset)?.contract ? 1 : 0,
    amount,
    confirmations: Number(confirmations),
    blockHeight: 1n,
    blockHash: randomBytes(32).toString("hex"),
  },
  { headers: { authorization: `Bearer ${credential}` } },
);
console.log(JSON.stringify({ tx_hash: res.data?.txHash, counted: res.data?.counted, payment_intent: res.data?.paymentIntentId ?? null, status: res.paymentIntentStatus ?? null }));
