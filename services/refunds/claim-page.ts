/**
 * The refund claim page (claim_url): where the customer gives the address a refund goes to. Built
 * like the checkout page (its stylesheet, no script at all, a plain form), so it works without
 * JavaScript, on a phone, and with a keyboard and a screen reader.
 */
import type { RefundClaim } from "../../gen/payments/v1/refunds_pb.ts";
import { escapeHtml as e, htmlDocument, networkLabel, type PagePaths } from "../checkout/page.ts";

/** What each status tells the customer. */
const statusTexts: Readonly<Record<string, { title: string; detail: string }>> = {
  awaiting_address: { title: "Where should the refund go?", detail: "" },
  awaiting_payment: { title: "Address received", detail: "{merchant} now sends the refund to this address. It arrives in your wallet once the merchant has sent it; there is nothing more to do here." },
  sent: { title: "Refund on its way", detail: "The refund was seen on the network and is waiting for confirmations." },
  completed: { title: "Refund completed", detail: "The refund was sent to this address and confirmed on the network." },
  cancelled: { title: "Refund cancelled", detail: "{merchant} cancelled this refund. Contact them if you expected it." },
};

/** The warning beside the form: an exchange may not credit a transfer it does not expect. */
export const exchangeWarning =
  "Give the address of a wallet you control. An exchange deposit address may not credit a refund: exchanges often do not credit a transfer they did not ask for, and the funds may be hard to get back.";

/** The page of one refund; `error` (plain text) re-shows the form with what was wrong with `entered`. */
export function renderClaimPage(claim: RefundClaim, paths: PagePaths, formAction: string, problem?: { error: string; entered: string }): string {
  const merchant = claim.merchantName || "The merchant";
  const network = networkLabel(claim.network, claim.testMode);
  const text = statusTexts[claim.status] ?? { title: claim.status, detail: "" };
  const detail = text.detail.replaceAll("{merchant}", merchant);
  const banner = claim.testMode
    ? `<p class="banner" role="note"><strong>Test mode</strong> — this is a test refund on ${e(network)}; nothing real is sent.</p>\n`
    : "";
  const reason = claim.reason ? `<p class="note" id="reason">Reason given: ${e(claim.reason)}</p>\n` : "";
  const form =
    claim.status === "awaiting_address"
      ? `<form class="claim-form" method="post" action="${e(formAction)}" novalidate>
  <p class="note" id="next">${e(merchant)} sends ${e(claim.amount)} ${e(claim.asset)} on ${e(network)} to the address you give here. You can give it once: it cannot be changed afterwards.</p>
  <label class="label" for="address">Your ${e(claim.asset)} address on ${e(network)}</label>
  <input class="input" id="address" name="address" type="text" inputmode="text" autocomplete="off" autocapitalize="off" spellcheck="false" required
    value="${e(problem?.entered ?? "")}" aria-describedby="${problem ? "address-error " : ""}exchange-warning"${problem ? ' aria-invalid="true"' : ""}>
  ${problem ? `<p class="field-error" id="address-error" role="alert">${e(problem.error)}</p>\n  ` : ""}<p class="note note-warning" id="exchange-warning">${e(exchangeWarning)}</p>
  <div class="actions"><button type="submit" class="button" id="submit">Send my refund to this address</button></div>
</form>
`
      : problem
        ? `<p class="field-error" id="claim-error" role="alert">${e(problem.error)}</p>
`
        : "";
  const address = claim.address
    ? `<div class="field">
  <h2 class="label" id="address-label">Refund address</h2>
  <code class="address" id="address">${e(claim.address)}</code>
</div>
`
    : "";
  const body = `${banner}<main class="card" id="refund" data-status="${e(claim.status)}">
<div class="head">
  <h1 class="title">Refund from ${e(merchant)}</h1>
  <p class="amount" id="amount">${e(claim.amount)} <span class="amount-asset">${e(claim.asset)}</span></p>
  <p class="network">on ${e(network)}</p>
</div>
<div class="status" role="status" data-status="${e(claim.status)}">
  <p class="status-title" id="status-title">${e(text.title)}</p>
  <p class="status-detail" id="status-detail">${e(detail)}</p>
</div>
${reason}${form}${address}</main>`;
  return htmlDocument({ title: `${text.title} — refund from ${merchant}`, paths, body, script: false });
}

/** The page for an unknown claim link. */
export function renderClaimNotFound(paths: PagePaths): string {
  return htmlDocument({
    title: "Refund not found",
    paths,
    script: false,
    body: `<main class="card">
<h1 class="title">Refund not found</h1>
<p>This refund link is not valid. Check the link you were given, or ask the shop for a new one.</p>
</main>`,
  });
}
