import type { JsonValue } from "@bufbuild/protobuf";
import type { Owner } from "../auth/keys.ts";
import { checkAddress } from "../addresses/formats.ts";
import { recordEvent } from "../events/record.ts";
import type { Intents } from "../intents/intents.ts";
import { withTransactions, type TransactionsOf } from "../intents/service.ts";
import { addAmountRefunded, type IntentRow } from "../intents/store.ts";
import type { EntityManager } from "../platform/db.ts";
import { lockedNow } from "../platform/db-clock.ts";
import { apiError, validationError } from "../platform/errors.ts";
import { simulatedTxHash } from "../observations/record.ts";
import { newId, randomBase62 } from "../platform/ids.ts";
import { checkAmount, fromUnits, toUnits } from "../vocabulary/amount.ts";
import type { ExtensionEventType } from "../vocabulary/event-types.ts";
import { chooseOutput, decimalsOf, defaultAmount, exceeds, priceToUnits, refundable, type Refusal } from "./refundable.ts";
import { findRefund, findRefundByToken, insertRefund, lockRefundsToSettle, receivedOutputsAt, refundableOutputs, refundsOfIntent, transfersTo, updateRefund, type RefundChange, type RefundRow } from "./store.ts";
import { settleRefund, unitsDue } from "./settle.ts";
import { derivationsOf } from "../addresses/origins.ts";
import { buildRefundPsbt, type BuiltPsbt, type SpendableOutput } from "./psbt.ts";
import { findAsset, type AssetInfo } from "../vocabulary/assets.ts";
import { rateUnavailable } from "../intents/pricing.ts";
import { formatRate } from "../rates/rate-math.ts";
import type { RefundViews } from "./views.ts";

/** What a create asks, as the handler checked it against the field rules. */
export interface RefundRequest {
  amount?: string;
  priceAmount?: string;
  priceCurrency?: string;
  payment?: string;
  address?: string;
  reason?: string;
  /** How price_amount is converted: at the intent's quote (default) or the exchanges' rate now. */
  rate?: string;
}

/** A claim page's key: 32 base62 characters (190 bits). */
export const claimTokenPattern = /^[0-9A-Za-z]{32}$/;

function refuse(r: Refusal): never {
  if (r.refused === "validation") throw validationError(r.param, r.message);
  throw apiError(r.refused === "exceeds" ? "refund_exceeds_refundable" : "invalid_state", r.message);
}

/**
 * Refunds: the one writer of the refunds table. Each move happens under the refund's row lock (and
 * a create under its intent's, so two creates of one intent are taken one after the other and the
 * second sees the first's amount), and is told as its event in the same transaction.
 */
export class Refunds {
  readonly #intents: Intents;
  readonly #transactionsOf: TransactionsOf;
  readonly views: RefundViews;

  constructor(intents: Intents, transactionsOf: TransactionsOf, views: RefundViews) {
    this.#intents = intents;
    this.#transactionsOf = transactionsOf;
    this.views = views;
  }

  /** Creates a refund of the owner's intent, in the caller's transaction. */
  async create(tx: EntityManager, owner: Owner, intentId: string, req: RefundRequest): Promise<RefundRow> {
    const intent = await this.#intents.get(tx, owner, intentId, true);
    const outputs = await refundableOutputs(tx, intent.id);
    const chosen = chooseOutput(outputs, req.payment);
    if ("refused" in chosen) refuse(chosen);
    const decimals = decimalsOf(chosen.network, chosen.asset);
    const existing = await refundsOfIntent(tx, intent.id);
    const sums = refundable(outputs, existing, chosen, decimals);

    if (req.amount !== undefined && req.priceAmount !== undefined) throw validationError("price_amount", `Send "amount" or "price_amount", not both.`);
    let units: bigint;
    let priced: { amount: string; currency: string; rate: string } | undefined;
    if (req.amount !== undefined) {
      const checked = checkAmount(req.amount, decimals);
      if (!checked.ok) throw validationError("amount", `"amount" ${checked.reason} (${chosen.asset} has ${decimals} decimal places).`);
      units = toUnits(checked.value, decimals);
    } else if (req.priceAmount !== undefined && req.rate === "current") {
      // The exchanges' rate now, as a create would quote it but without the merchant's spread: the
      // customer gets the currency's worth at the market.
      const currency = req.priceCurrency as string;
      const environment = intent.environment === "live" ? "live" : "test";
      const quote = this.#intents.rates?.quote(chosen.asset, currency, environment, Date.now());
      if (!quote) throw rateUnavailable(findAsset(chosen.network, chosen.asset) as AssetInfo, currency, this.#intents.rates, environment, new Date());
      const rate = formatRate(quote.rate);
      units = priceToUnits(req.priceAmount, rate, decimals);
      if (units <= 0n) throw validationError("price_amount", `"price_amount" is less than the smallest unit of ${chosen.asset} at the current rate.`);
      priced = { amount: req.priceAmount, currency, rate };
    } else if (req.priceAmount !== undefined) {
      const rate = rateOf(intent, chosen);
      if (!intent.price || rate === undefined) {
        throw validationError("price_amount", `"price_amount" needs a payment priced in a currency: the payment refunded (${chosen.asset} on ${chosen.network}) was not quoted for this intent; send "amount" in ${chosen.asset}, or "rate": "current" to convert at the exchanges' rate now.`);
      }
      if (req.priceCurrency !== intent.price.currency) throw validationError("price_currency", `"price_currency" must be the intent's price currency, ${intent.price.currency}.`);
      units = priceToUnits(req.priceAmount, rate, decimals);
      if (units <= 0n) throw validationError("price_amount", `"price_amount" is less than the smallest unit of ${chosen.asset} at the intent's rate.`);
      priced = { amount: req.priceAmount, currency: intent.price.currency, rate };
    } else {
      const d = defaultAmount(intent, chosen, sums.left, sums.taken, decimals);
      if (typeof d !== "bigint") refuse(d);
      units = d;
      if (units <= 0n) refuse(exceeds(chosen, decimals, sums));
    }
    if (units > sums.left) refuse(exceeds(chosen, decimals, sums));

    const address = req.address === undefined ? null : this.#checkedAddress(chosen.network, intent.environment, req.address, "address");
    const at = await lockedNow(tx);
    const row = await insertRefund(tx, {
      id: newId("rf"),
      merchantId: intent.merchantId,
      environment: intent.environment === "live" ? "live" : "test",
      intentId: intent.id,
      status: address === null ? "awaiting_address" : "awaiting_payment",
      network: chosen.network,
      asset: chosen.asset,
      amount: fromUnits(units, decimals),
      paymentTxHash: chosen.txHash,
      paymentOutputIndex: chosen.outputIndex,
      address,
      claimToken: randomBase62(32),
      reason: req.reason ?? null,
      priceAmount: priced?.amount ?? null,
      priceCurrency: priced?.currency ?? null,
      rate: priced?.rate ?? null,
      createdAt: at,
    });
    const intentData = await this.#intentData(tx, intent);
    await this.#record(tx, "refund.created", row, intentData, at);
    if (address !== null) await this.#record(tx, "refund.address_received", row, intentData, at);
    return row;
  }

  /** The owner's refund, or 404. */
  async get(em: EntityManager, owner: Owner, id: string, lock = false): Promise<RefundRow> {
    const row = /^rf_[0-9A-Za-z]{24}$/.test(id) ? await findRefund(em, owner, id, lock) : undefined;
    if (!row) throw apiError("not_found", `No refund ${id}.`, "refund_id");
    return row;
  }

  /** The owner's intent's refunds, oldest first (404 for an intent not the owner's). */
  async listOf(em: EntityManager, owner: Owner, intentId: string): Promise<RefundRow[]> {
    const intent = await this.#intents.get(em, owner, intentId);
    return refundsOfIntent(em, intent.id);
  }

  /** Cancels a refund not yet paid; a cancelled one is returned as it is. */
  async cancel(tx: EntityManager, owner: Owner, id: string): Promise<RefundRow> {
    const row = await this.get(tx, owner, id, true);
    if (row.status === "cancelled") return row;
    if (row.status !== "awaiting_address" && row.status !== "awaiting_payment") {
      throw apiError("invalid_state", `Refund ${row.id} is ${row.status}: a transfer to its address was seen, so it can no longer be cancelled.`);
    }
    const at = await lockedNow(tx);
    return this.#move(tx, row, { status: "cancelled", cancelledAt: at }, "refund.cancelled", at);
  }

  /**
   * A bitcoin refund awaiting payment as a PSBT spending its intent's received outputs (psbt.ts):
   * what is still due, at the fee rate asked. Read only: the merchant may ask again at another rate.
   */
  async psbt(em: EntityManager, owner: Owner, id: string, feeRate: number): Promise<BuiltPsbt> {
    const row = await this.get(em, owner, id);
    if (row.network !== "bitcoin") throw apiError("invalid_state", `Refund ${row.id} is on ${row.network}: a PSBT is for bitcoin refunds. Send ${row.amount} ${row.asset} to its address from any wallet.`);
    if (row.status !== "awaiting_payment" || row.address === null) {
      throw apiError(
        "invalid_state",
        row.status === "awaiting_address" ? `Refund ${row.id} has no address yet: the customer gives one at its claim_url.` : `Refund ${row.id} is ${row.status}: nothing is left to send.`,
      );
    }
    const due = unitsDue(row.amount, row.transactions, 8);
    const received = await receivedOutputsAt(em, row.intentId, row.network, row.asset);
    const derived = received.filter((o): o is typeof o & { index: number } => o.index !== null);
    const derivations = await derivationsOf(em, owner, "bitcoin", derived);
    const spendable: SpendableOutput[] = [];
    let missingOrigin = false;
    for (const o of derived) {
      const d = derivations.get(o.address);
      if (d === undefined || "missing" in d) missingOrigin ||= d?.missing === "origin";
      else spendable.push({ txHash: o.txHash, outputIndex: o.outputIndex, sats: toUnits(o.amount, 8), address: o.address, derivation: d, rawTransaction: o.rawTransaction ?? undefined });
    }
    if (spendable.length === 0) {
      throw apiError(
        "invalid_state",
        missingOrigin
          ? `The store's bitcoin key was set without its origin, so a hardware wallet could not tell which of its keys sign. Set it again with the origin your wallet exports: npm run -s admin -- address-source set --merchant ${owner.merchantId} --environment ${owner.environment} --network bitcoin --xpub "[fingerprint/84'/${owner.environment === "live" ? 0 : 1}'/0']<key>".`
          : `None of the intent's received bitcoin outputs is at an address derived from the store's key (an imported address, or nothing received on the chain): send ${fromUnits(due, 8)} BTC to ${row.address} from your wallet.`,
      );
    }
    // The refunded payment first (the change goes to its index on the change chain), then the largest.
    const refunded = (o: SpendableOutput) => Number(o.txHash === row.paymentTxHash && o.outputIndex === row.paymentOutputIndex);
    spendable.sort((a, b) => refunded(b) - refunded(a) || (b.sats > a.sats ? 1 : b.sats < a.sats ? -1 : 0));
    const built = buildRefundPsbt({ environment: row.environment, to: row.address, sats: due, feeRate, outputs: spendable });
    if ("refused" in built) throw apiError("invalid_state", built.refused);
    return built;
  }

  /** The refund of a claim page, or undefined (no such token). */
  async findByToken(em: EntityManager, token: string): Promise<RefundRow | undefined> {
    return claimTokenPattern.test(token) ? findRefundByToken(em, token) : undefined;
  }

  /**
   * The customer's address, from the claim page: once. The same address again returns the refund
   * as it is; another is refused (invalid_state), as is a cancelled refund.
   */
  async submitAddress(tx: EntityManager, token: string, address: string): Promise<RefundRow | undefined> {
    const row = claimTokenPattern.test(token) ? await findRefundByToken(tx, token, true) : undefined;
    if (!row) return undefined;
    const checked = this.#checkedAddress(row.network, row.environment, address, "address");
    if (row.address !== null) {
      if (row.address === checked) return row;
      throw apiError("invalid_state", "This refund has its address already; it cannot be changed.", "address");
    }
    if (row.status !== "awaiting_address") throw apiError("invalid_state", `This refund is ${row.status}; it takes no address.`, "address");
    const at = await lockedNow(tx);
    return this.#move(tx, row, { status: "awaiting_payment", address: checked, addressReceivedAt: at }, "refund.address_received", at);
  }

  /**
   * Pays a Test refund as the sandbox simulator does: a synthetic transfer of its amount to its
   * address, seen and confirmed at once (refund.sent, then refund.completed).
   */
  async simulatePayment(tx: EntityManager, owner: Owner, id: string): Promise<RefundRow> {
    const row = await this.get(tx, owner, id, true);
    if (row.environment !== "test") throw apiError("test_mode_only", "Only a Test refund is paid by the simulator.");
    if (row.status !== "awaiting_payment") {
      throw apiError("invalid_state", row.status === "awaiting_address" ? `Refund ${row.id} has no address yet: the customer gives one at its claim_url (or create it with "address").` : `Refund ${row.id} is ${row.status}; only one awaiting_payment is paid.`);
    }
    const at = await lockedNow(tx);
    const transfer = { txHash: simulatedTxHash(row.network), outputIndex: 0, amount: row.amount, simulated: true };
    const sent = await this.#move(tx, row, { status: "sent", sentAt: at, transactions: [transfer], simulated: true }, "refund.sent", at);
    return this.#complete(tx, sent, at);
  }

  /**
   * After a chain report (chains/report.ts, in its transaction): the refunds on the chain whose
   * transfers may have changed, each settled from what the watchers recorded at its address.
   */
  async settleChain(tx: EntityManager, chain: { network: string; environment: string }, at: Date): Promise<void> {
    for (const row of await lockRefundsToSettle(tx, chain)) {
      const asset = findAsset(row.network, row.asset);
      if (!asset || row.address === null) continue;
      const plan = settleRefund(row, await transfersTo(tx, row), asset.decimals, this.#intents.requiredConfirmations(asset));
      const transactions = plan.live.map((t) => ({ txHash: t.txHash, outputIndex: t.outputIndex, amount: t.amount, simulated: false }));
      const same = JSON.stringify(transactions) === JSON.stringify(row.transactions);
      if (plan.status === row.status) {
        // The same status with other transfers (a short one, or one more): recorded, no event.
        if (!same) await updateRefund(tx, row.id, row.status, { status: row.status, transactions }, at);
        continue;
      }
      const rank = { awaiting_payment: 0, sent: 1, completed: 2 } as Record<string, number>;
      if ((rank[plan.status] ?? 0) < (rank[row.status] ?? 0)) {
        // A reorg took (some of) its transfer back: said as refund.reorged, and no longer refunded.
        if (row.status === "completed") await this.#refunded(tx, row, `-${row.amount}`, at);
        await this.#move(tx, row, { status: plan.status, transactions }, "refund.reorged", at);
        continue;
      }
      const sent = row.status === "awaiting_payment" ? await this.#move(tx, row, { status: "sent", sentAt: at, transactions }, "refund.sent", at) : row;
      if (plan.status === "completed") await this.#complete(tx, sent, at, transactions);
    }
  }

  /** Adds to (or, negative, takes from) the intent's amount_refunded, when the refund is in its own network and asset. */
  async #refunded(tx: EntityManager, row: RefundRow, amount: string, at: Date): Promise<void> {
    const intent = await this.#intents.get(tx, { merchantId: row.merchantId, environment: row.environment }, row.intentId, true);
    if (intent.network === row.network && intent.asset === row.asset) await addAmountRefunded(tx, intent.id, amount, at);
  }

  async #complete(tx: EntityManager, row: RefundRow, at: Date, transactions?: RefundRow["transactions"]): Promise<RefundRow> {
    await this.#refunded(tx, row, row.amount, at);
    return this.#move(tx, row, { status: "completed", completedAt: at, transactions }, "refund.completed", at);
  }

  async #move(tx: EntityManager, row: RefundRow, change: RefundChange, type: ExtensionEventType, at: Date): Promise<RefundRow> {
    const next = await updateRefund(tx, row.id, row.status, change, at);
    if (!next) throw apiError("invalid_state", `Refund ${row.id} changed while this request ran; read it again.`);
    const intent = await this.#intents.get(tx, { merchantId: row.merchantId, environment: row.environment }, row.intentId);
    await this.#record(tx, type, next, await this.#intentData(tx, intent), at);
    return next;
  }

  /** The intent as a refund's events carry it: as it is now, with its transactions. */
  async #intentData(tx: EntityManager, intent: IntentRow): Promise<Record<string, JsonValue>> {
    const [full] = await withTransactions(tx, this.#transactionsOf, [intent]);
    return this.#intents.views.eventData(full ?? intent);
  }

  /** The event of a refund's move: the refund, and its intent. */
  async #record(tx: EntityManager, type: ExtensionEventType, row: RefundRow, intentData: Record<string, JsonValue>, at: Date): Promise<void> {
    const data: Record<string, JsonValue> = { refund: this.views.json(row), ...intentData };
    await recordEvent(tx, { merchantId: row.merchantId, environment: row.environment, type, data, paymentIntentId: row.intentId, createdAt: at });
  }

  #checkedAddress(network: string, environment: string, address: string, param: string): string {
    const checked = checkAddress(network, environment === "live" ? "live" : "test", address);
    if (!checked.ok) throw validationError(param, `"${param}" ${checked.reason}.`);
    return checked.address;
  }
}

/** The rate the intent quoted the output's asset at: its own asset's current quote, or one of its methods'. */
function rateOf(intent: IntentRow, o: { network: string; asset: string }): string | undefined {
  if (!intent.price) return undefined;
  if (o.network === intent.network && o.asset === intent.asset) return intent.price.rate;
  return intent.methods?.find((m) => m.network === o.network && m.asset === o.asset)?.rate ?? undefined;
}

