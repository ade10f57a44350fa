import { create, type JsonValue } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { RefundClaimSchema, RefundPsbtSchema, RefundSchema, RefundTransactionSchema, type Refund, type RefundClaim, type RefundPsbt } from "../../gen/payments/v1/refunds_pb.ts";
import { paymentUri } from "../addresses/payment-uri.ts";
import { encodeResponse } from "../platform/api-json.ts";
import type { RefundRow } from "./store.ts";
import { fromUnits } from "../vocabulary/amount.ts";
import { decimalsOf } from "./refundable.ts";
import { unitsDue } from "./settle.ts";
import type { BuiltPsbt } from "./psbt.ts";

const ts = (d: Date | null) => (d === null ? undefined : timestampFromDate(d));

/** How a refund is shown: to the API, inside its events, and (a little of it) on its claim page. */
export class RefundViews {
  /** CHECKOUT_BASE_URL: the claim pages are served under it, at /refunds/<token>. */
  readonly #checkoutBaseUrl: string;

  constructor(checkoutBaseUrl: string) {
    this.#checkoutBaseUrl = checkoutBaseUrl;
  }

  claimUrl(row: Pick<RefundRow, "claimToken">): string {
    return `${this.#checkoutBaseUrl}/refunds/${row.claimToken}`;
  }

  message(row: RefundRow): Refund {
    const awaiting = row.status === "awaiting_address";
    return create(RefundSchema, {
      id: row.id,
      paymentIntent: row.intentId,
      status: row.status,
      environment: row.environment,
      network: row.network,
      asset: row.asset,
      amount: row.amount,
      payment: `${row.paymentTxHash}:${row.paymentOutputIndex}`,
      address: row.address ?? undefined,
      // The claim page is for giving the address: once it is known (or the refund cancelled) there is nothing to claim.
      claimUrl: awaiting ? this.claimUrl(row) : undefined,
      paymentUri: row.address === null ? undefined : paymentUri({ network: row.network, asset: row.asset, environment: row.environment, address: row.address, amount: row.amount }),
      reason: row.reason ?? undefined,
      priceAmount: row.priceAmount ?? undefined,
      priceCurrency: row.priceCurrency ?? undefined,
      rate: row.rate ?? undefined,
      createdAt: timestampFromDate(row.createdAt),
      addressReceivedAt: ts(row.addressReceivedAt),
      completedAt: ts(row.completedAt),
      cancelledAt: ts(row.cancelledAt),
      transactions: row.transactions.map((t) => create(RefundTransactionSchema, t)),
      simulated: row.simulated,
      amountDue:
        row.status === "awaiting_address" || row.status === "awaiting_payment"
          ? fromUnits(unitsDue(row.amount, row.transactions, decimalsOf(row.network, row.asset)), decimalsOf(row.network, row.asset))
          : "0",
    });
  }

  /** The refund as its events carry it: the API's JSON. */
  json(row: RefundRow): JsonValue {
    return encodeResponse(RefundSchema, this.message(row));
  }

  /** What the claim page shows: who refunds, how much, in what, and the address once given. */
  claim(row: RefundRow, merchantName: string): RefundClaim {
    return create(RefundClaimSchema, {
      merchantName,
      status: row.status,
      network: row.network,
      asset: row.asset,
      amount: row.amount,
      address: row.address ?? undefined,
      reason: row.reason ?? undefined,
      testMode: row.environment === "test",
    });
  }

  /** A refund's PSBT and what it spends and pays, amounts in BTC. */
  psbt(refundId: string, feeRate: number, built: BuiltPsbt): RefundPsbt {
    const btc = (sats: bigint) => fromUnits(sats, 8);
    return create(RefundPsbtSchema, {
      refundId,
      psbt: built.psbt,
      feeRate,
      fee: btc(built.fee),
      vsize: built.vsize,
      inputs: built.inputs.map((i) => ({ txHash: i.txHash, outputIndex: i.outputIndex, amount: btc(i.sats), address: i.address, derivation: i.derivation, previousTransaction: i.previousTransaction })),
      outputs: built.outputs.map((o) => ({ address: o.address, amount: btc(o.sats), change: o.change })),
    });
  }
}
