/**
 * The dashboard's refunds: the Refund form and list on a payment's page, and a refund's own page
 * (its state, the claim link to send the customer, and what to send: the payment URI and its QR
 * code). Every action goes through RefundService, as the API's does.
 */
import type { PaymentIntent } from "../../gen/payments/v1/payment_intents_pb.ts";
import type { Refund } from "../../gen/payments/v1/refunds_pb.ts";
import { escapeHtml as e, networkLabel, qrSvg } from "../checkout/page.ts";
import { actionForm, can, csrfField, dl, layout, when, type DashboardPaths, type Viewer } from "./page.ts";
import { pill } from "./status.ts";

/** Why a payment's transaction can be refunded: it counted, or it was told as an exception once it had its confirmations. */
const exceptionReasons = ["wrong_asset", "other_method", "intent_cancelled", "after_late_window"];

/** The received transactions a refund may name, one per network and asset (the first of each). */
export function refundablePayments(pi: PaymentIntent): { value: string; label: string }[] {
  const seen = new Map<string, { value: string; label: string }>();
  for (const t of pi.transactions) {
    if (!(t.counted || (t.reason !== undefined && exceptionReasons.includes(t.reason)))) continue;
    const key = `${t.network}/${t.asset}`;
    if (!seen.has(key)) seen.set(key, { value: `${t.txHash}:${t.outputIndex}`, label: `${t.asset} on ${t.network}` });
  }
  return [...seen.values()];
}

/** The Refunds section of a payment's page: its refunds, and the form when something can be refunded. */
export function refundsSection(paths: DashboardPaths, v: Viewer, pi: PaymentIntent, refunds: readonly Refund[], idem: string): string {
  const rows = refunds
    .map(
      (r) =>
        `<tr><td data-label="Refund"><a href="${e(`${paths.base}/refunds/${r.id}`)}"><code class="hash">${e(r.id)}</code></a></td><td data-label="Status">${pill(r.status)}</td><td class="num" data-label="Amount">${e(r.amount)} ${e(r.asset)} <span class="help">on ${e(r.network)}</span></td><td data-label="To">${r.address ? `<code class="hash">${e(r.address)}</code>` : "waiting for the customer's address"}</td></tr>`,
    )
    .join("\n");
  const list = refunds.length === 0 ? "<p>No refunds.</p>" : `<table id="refunds" class="cards"><thead><tr><th scope="col">Refund</th><th scope="col">Status</th><th scope="col">Amount</th><th scope="col">To</th></tr></thead><tbody>\n${rows}\n</tbody></table>`;
  const payments = refundablePayments(pi);
  const form =
    can(v, "payment_intents:write") && payments.length > 0
      ? `<form method="post" action="${e(`${paths.base}/payments/${pi.publicId}/refund`)}" class="stack" id="refund-form">
${csrfField(v.csrf)}<input type="hidden" name="idem" value="${e(idem)}">
<h3 id="refund-h">Refund</h3>
${
  payments.length > 1
    ? `<label for="rf-payment">Payment to refund</label><select id="rf-payment" name="payment">${payments.map((p) => `<option value="${e(p.value)}">${e(p.label)}</option>`).join("")}</select>`
    : `<input type="hidden" name="payment" value="${e(payments[0]?.value ?? "")}">`
}
<label for="rf-amount">Amount (optional)</label><input id="rf-amount" name="amount" maxlength="60" inputmode="decimal" aria-describedby="rf-amount-help">
<p class="help" id="rf-amount-help">In the payment's asset. Empty: the overpaid part of an overpaid payment, or everything received for a payment in another asset, or a cancelled or expired one.</p>
<label for="rf-address">Customer's address (optional)</label><input id="rf-address" name="address" maxlength="100" autocomplete="off" spellcheck="false" aria-describedby="rf-address-help">
<p class="help" id="rf-address-help">Empty: you get a link to send the customer, where they give it. Never the address the payment came from: an exchange sends from wallets that credit nobody.</p>
<label for="rf-reason">Reason (optional)</label><input id="rf-reason" name="reason" maxlength="500">
<button type="submit" class="button" id="refund">Create refund</button>
</form>`
      : "";
  return `<section aria-labelledby="refunds-h"><h2 id="refunds-h">Refunds</h2>${list}${form}</section>`;
}

/** A refund's page. */
export async function refundPage(paths: DashboardPaths, v: Viewer, o: { refund: Refund; idem: string; notice?: string }): Promise<string> {
  const r = o.refund;
  const network = networkLabel(r.network, r.environment === "test");
  const qr = r.paymentUri && (r.status === "awaiting_payment") ? `<figure class="qr" id="refund-qr">${await qrSvg(r.paymentUri, `QR code to send ${r.amountDue} ${r.asset} on ${network}`)}<figcaption>Scan with the wallet you refund from</figcaption></figure>` : "";
  const items: [string, string][] = [
    ["Status", pill(r.status, { id: "refund-status" })],
    ["Amount", `${e(r.amount)} ${e(r.asset)} on ${e(network)}`],
    ["Still to send", `${e(r.amountDue)} ${e(r.asset)}`],
    ["Payment", `<a href="${e(`${paths.base}/payments/${r.paymentIntent}`)}">${e(r.paymentIntent)}</a> <span class="help">transaction <code class="hash">${e(r.payment)}</code></span>`],
    ["Reason", e(r.reason ?? "—")],
    ["Customer's address", r.address ? `<code class="hash" id="refund-address">${e(r.address)}</code>` : "not given yet"],
    ...(r.claimUrl
      ? ([["Link for the customer", `<a href="${e(r.claimUrl)}" id="claim-link">${e(r.claimUrl)}</a> <button type="button" class="button button-secondary" data-copy="${e(r.claimUrl)}" hidden>Copy link</button> <span role="status" aria-live="polite" class="copy-status"></span><p class="help">Send it to the customer: they give the address there, once.</p>`]] as [string, string][])
      : []),
    ...(r.paymentUri ? ([["Send with a wallet", `<a href="${e(r.paymentUri)}" id="refund-uri">${e(r.paymentUri)}</a>`]] as [string, string][]) : []),
    ["Created", when(r.createdAt)],
    ...(r.completedAt ? ([["Completed", when(r.completedAt)]] as [string, string][]) : []),
    ...(r.cancelledAt ? ([["Cancelled", when(r.cancelledAt)]] as [string, string][]) : []),
  ];
  const txs =
    r.transactions.length === 0
      ? "<p>No transfer seen at the customer's address yet.</p>"
      : `<ul id="refund-transactions">${r.transactions.map((t) => `<li><code class="hash">${e(t.txHash)}</code> ${e(t.amount)} ${e(r.asset)}${t.simulated ? " (simulated)" : ""}</li>`).join("")}</ul>`;
  const cancel =
    can(v, "payment_intents:write") && (r.status === "awaiting_address" || r.status === "awaiting_payment")
      ? `<section aria-labelledby="actions-h"><h2 id="actions-h">Actions</h2>${actionForm(v, `${paths.base}/refunds/${r.id}/cancel`, "Cancel refund", { idem: o.idem, danger: true, id: "cancel-refund" })}</section>`
      : "";
  // A bitcoin refund can be paid from the intent's own outputs with a PSBT the store's wallet signs.
  const psbt =
    r.network === "bitcoin" && r.status === "awaiting_payment"
      ? `<section aria-labelledby="psbt-h"><h2 id="psbt-h">Pay from this store's wallet</h2>
<form method="get" action="${e(`${paths.base}/refunds/${r.id}/psbt`)}" class="stack" id="psbt-form">
<label for="fee-rate">Fee rate (sat/vB)</label><input id="fee-rate" name="fee_rate" type="number" inputmode="numeric" min="1" max="1000" step="1" required aria-describedby="fee-rate-help">
<p class="help" id="fee-rate-help">A PSBT spending the bitcoin this payment received, ${e(r.amountDue)} BTC to the customer and the change back to your wallet: open it in Sparrow, Electrum or your hardware wallet's app, check it, sign and broadcast. Take the rate from your wallet's estimate.</p>
<button type="submit" class="button button-secondary" id="download-psbt">Download PSBT</button>
</form></section>`
      : "";
  return layout(paths, v, {
    title: `Refund ${r.id}`,
    section: "payments",
    notice: o.notice,
    main: `${dl(items)}
${qr}
${psbt}
${cancel}
<section aria-labelledby="transfers-h"><h2 id="transfers-h">Transfers</h2>${txs}</section>`,
  });
}
