// The bookkeeping export's rows (services/intents/export-rows.ts): one per transaction received,
// one for an intent with none, the quote a payment counts at, and texts a spreadsheet will not run.
import t from "tap";
import { exportColumns, exportRows, spreadsheetSafe } from "../../services/intents/export-rows.ts";
import type { IntentRow, TransactionFact } from "../../services/intents/store.ts";

const created = new Date("2026-11-01T10:00:00.000Z");
const intent = (over: Partial<IntentRow> = {}): IntentRow => ({
  id: "pi_000000000000000000000001",
  merchantId: "mer_x",
  environment: "test",
  status: "confirmed",
  merchantReference: "order-1",
  network: "ethereum",
  asset: "USDC",
  requestedAmount: "19.99",
  metadata: {},
  createdAt: created,
  expiresAt: new Date(created.getTime() + 900_000),
  depositAddress: "0xabc",
  methods: null,
  amountReceived: "19.99",
  detectedAt: null,
  paidAt: null,
  expiredAt: null,
  cancelledAt: null,
  source: "api",
  cashier: null,
  terminal: null,
  sequence: 2,
  requiredConfirmations: 12,
  underpaymentToleranceBps: 0,
  redirectUrl: null,
  cancelUrl: null,
  price: null,
  ...over,
});
const tx = (over: Partial<TransactionFact> = {}): TransactionFact => ({
  txHash: "ab".repeat(32),
  outputIndex: 0,
  amount: "19.99",
  confirmations: 14,
  blockHeight: 1200,
  counted: true,
  simulated: false,
  asset: "USDC",
  orphaned: false,
  mempool: false,
  replaceable: false,
  recordedAt: new Date(created.getTime() + 60_000),
  observedAt: new Date(created.getTime() + 50_000),
  ...over,
});
const context = { terms: { asset: "USDC", requiredConfirmations: 12 }, graceMs: 0 };

t.test("an intent with no transaction: one row, the transaction's columns empty", async (t) => {
  const rows = exportRows(intent({ status: "pending", amountReceived: null, transactions: [] }), context);
  t.equal(rows.length, 1);
  t.same(Object.keys(rows[0]!), [...exportColumns], "every column, in order");
  t.match(rows[0], { intent_id: "pi_000000000000000000000001", status: "pending", asset: "USDC", contract: "0x1c7D4B196Cb0C7B01d743Fbc6116a902379C7238", requested_amount: "19.99", tx_hash: "", amount: "", confirmations: "", block_time: "", counted: "", amount_refunded: "" });
  t.equal(rows[0]!.created_at, "2026-11-01T10:00:00.000Z");
});

t.test("one row per transaction received; orphaned and withdrawn outputs were never received", async (t) => {
  const rows = exportRows(intent({ transactions: [tx(), tx({ txHash: "cd".repeat(32), outputIndex: 2, amount: "1", counted: false, confirmations: 3 }), tx({ txHash: "ef".repeat(32), orphaned: true })] }), context);
  t.equal(rows.length, 2);
  t.match(rows[0], { tx_hash: "ab".repeat(32), output_index: "0", amount: "19.99", confirmations: "14", block_height: "1200", block_time: "2026-11-01T10:00:50.000Z", counted: "true", exception_reason: "" });
  t.match(rows[1], { tx_hash: "cd".repeat(32), output_index: "2", counted: "false" });
  t.notOk(rows.some((r) => r.tx_hash.includes(":")), "hashes without an output suffix");
  t.same(exportRows(intent({ transactions: [tx({ orphaned: true })] }), context).length, 1, "only an orphaned one: the intent's row alone");
});

t.test("a payment in the mempool has no block time; another asset is an exception with its own contract", async (t) => {
  const [mempool] = exportRows(intent({ transactions: [tx({ blockHeight: null, mempool: true, confirmations: 0, counted: false })] }), context);
  t.match(mempool, { block_height: "", block_time: "", confirmations: "0" });
  const [wrong] = exportRows(intent({ transactions: [tx({ asset: "USDT", counted: false })] }), context);
  t.match(wrong, { asset: "USDT", contract: "0xaA8E23Fb1079EA71e0a56F48a2aA51851D8433D0", exception_reason: "wrong_asset" });
  const [live] = exportRows(intent({ environment: "live", transactions: [] }), context);
  t.equal(live!.contract, "0xA0b86991c6218b36c1d19D4a2e9Eb0cE3606eB48", "Live: mainnet's contract");
  const [eth] = exportRows(intent({ asset: "ETH", transactions: [] }), { ...context, terms: { asset: "ETH", requiredConfirmations: 12 } });
  t.equal(eth!.contract, "", "a native asset has none");
});

t.test("a fiat-priced intent: the quote the payment counts at, and its value at it", async (t) => {
  const quotedAt = created;
  const price = {
    amount: "100.00",
    currency: "USD",
    rate: "2000",
    sources: ["kraken", "coinbase"],
    quotedAt: new Date(created.getTime() + 300_000),
    expiresAt: new Date(created.getTime() + 900_000),
    history: [{ rate: "2500", sources: ["bitstamp"], quotedAt, expiresAt: new Date(created.getTime() + 300_000) }],
  };
  const row = intent({ asset: "ETH", requestedAmount: "0.05", price });
  const terms = { asset: "ETH", requiredConfirmations: 12 };
  const [early, later] = exportRows({ ...row, transactions: [tx({ asset: "ETH", amount: "0.01", fiatValue: "25" }), tx({ asset: "ETH", amount: "0.0333333", recordedAt: new Date(created.getTime() + 400_000), observedAt: new Date(created.getTime() + 400_000), fiatValue: "66.66" })] }, { terms, graceMs: 0 });
  t.match(early, { quote_rate: "2500", quote_sources: "bitstamp", fiat_value_at_quote: "25", fiat_value: "25", price_amount: "100.00", price_currency: "USD" }, "paid under the first quote: its rate");
  t.match(later, { quote_rate: "2000", quote_sources: "kraken;coinbase", fiat_value_at_quote: "66.66", fiat_value: "66.66" }, "under the second: its rate, rounded down to cents");
  t.equal(early!.fiat_value_at_confirmation, "", "not counted at a market rate: empty");
  const [confirmed] = exportRows({ ...row, transactions: [tx({ asset: "ETH", amount: "0.01", fiatValue: "25", fiatValueConfirmed: "31.40" })] }, { terms, graceMs: 0 });
  t.equal(confirmed!.fiat_value_at_confirmation, "31.40", "its value at the market's rate when it counted");
  const [other] = exportRows({ ...row, transactions: [tx({ asset: "USDT", amount: "5", fiatValueConfirmed: "5.00" })] }, { terms, graceMs: 0 });
  t.equal(other!.fiat_value_at_confirmation, "", "another asset: no value in the price currency");
  const [none] = exportRows({ ...row, amountReceived: null, transactions: [] }, { terms, graceMs: 0 });
  t.match(none, { quote_rate: "2000", quote_sources: "kraken;coinbase", fiat_value_at_quote: "" }, "no payment: the current quote");
});

t.test("a reference that starts like a formula is not run by a spreadsheet", async (t) => {
  for (const text of ["=SUM(A1)", "+1", "-2", "@cmd", "\tx"]) t.equal(spreadsheetSafe(text), `'${text}`, JSON.stringify(text));
  for (const text of ["order-1", "", "1-2"]) t.equal(spreadsheetSafe(text), text);
  t.equal(exportRows(intent({ merchantReference: "=HYPERLINK(\"x\")", transactions: [] }), context)[0]!.merchant_reference, "'=HYPERLINK(\"x\")");
});
