// The dashboard's words for a payment's history and exceptions (services/dashboard/timeline.ts) and
// its status pills (status.ts): each event as a sentence a shop owner reads, made from the event's
// own data; each exception reason with one line of what to do next; a pill always says its word.
import t from "tap";
import { pill } from "../../services/dashboard/status.ts";
import { exceptionAdvice, stepSentence } from "../../services/dashboard/timeline.ts";

const hash = "0xabc1234567890def1234567890abcdef1234567890abcdef1234567890abcdef";
const intent = { asset: "ETH", network: "ethereum", status: "pending", requested_amount: "0.0079", amount_received: "0", required_confirmations: 12 };

t.test("each event type as a sentence", async (t) => {
  t.equal(
    stepSentence("payment.detected", { payment_intent: { ...intent, transactions: [{ tx_hash: hash, amount: "0.0079", asset: "ETH", confirmations: 1, counted: false }] } }),
    "Payment detected: 0.0079 ETH in tx 0xabc12345…cdef (1 of 12 confirmations)",
  );
  t.equal(stepSentence("payment.confirmed", { payment_intent: { ...intent, status: "confirmed", amount_received: "0.0079" } }), "Confirmed: 0.0079 ETH received");
  t.equal(stepSentence("payment.expired", { payment_intent: { ...intent, status: "expired" } }), "Expired: nothing was received in time");
  t.equal(
    stepSentence("payment.underpaid", {
      payment_intent: { ...intent, asset: "USDC", price_amount: "19.99", price_currency: "USD", amount_received: "5", transactions: [{ tx_hash: hash, amount: "5", asset: "USDC", counted: true, fiat_value: "5" }] },
    }),
    "Underpaid: 5.00 of 19.99 USD received",
    "a priced payment in its currency",
  );
  t.equal(stepSentence("payment.underpaid", { payment_intent: { ...intent, asset: "USDC", requested_amount: "10", amount_received: "6.8" } }), "Underpaid: 6.8 of 10 USDC received");
  t.equal(
    stepSentence("payment.exception", { payment_intent: { ...intent, asset: "USDC" }, exception: { reason: "wrong_asset", transaction: { tx_hash: hash, amount: "10", asset: "USDT" } } }),
    "Wrong asset received: USDT sent to a USDC payment (10 USDT in tx 0xabc12345…cdef)",
  );
  t.equal(stepSentence("payment.cancelled", {}), "Cancelled");
  t.equal(stepSentence("payment.something_new", {}), "payment.something_new", "an unknown type by its name");
  t.match(stepSentence("payment.confirmed", null), /^Confirmed/, "data missing: still a sentence, no throw");
});

t.test("each exception reason says what to do next", async (t) => {
  const pi = { asset: "USDC", requestedAmount: "10", amountReceived: "6.8", amountDue: "3.2" };
  t.equal(exceptionAdvice("underpaid", pi), "Ask the shopper to send the remaining 3.2 USDC to the same address, or refund what was received from your wallet.");
  t.match(exceptionAdvice("overpaid", { ...pi, amountReceived: "12.5", amountDue: "0" }), "Refund the extra 2.5 USDC to the shopper from your wallet");
  for (const reason of ["late", "wrong_asset", "intent_cancelled", "after_late_window", "reorged", "unheard_of"]) {
    t.match(exceptionAdvice(reason, pi), /\.$/, `${reason}: one line`);
    t.notMatch(exceptionAdvice(reason, pi), /refund button/i, "refunds are made from the merchant's wallet");
  }
});

t.test("a pill says its word, on its tint", async (t) => {
  t.equal(pill("delivered"), `<span class="status status-delivered pill pill-ok">delivered</span>`);
  t.match(pill("failed", { id: "x" }), /class="status status-failed pill pill-bad" id="x">failed</);
  t.match(pill("something_else"), /pill-neutral">something else</);
});
