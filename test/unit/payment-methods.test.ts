// Payment methods' pure parts (issue 62): what a create's payment_methods may say, how a payment to
// another method is told apart from one in another asset, and what the checkout page shows of an
// intent offering several.
import { create, fromJson } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import { ConnectError } from "@connectrpc/connect";
import t from "tap";
import { PaymentMethodSchema } from "../../gen/payments/v1/payment_intents_pb.ts";
import { ShopperPaymentIntentSchema } from "../../gen/payments/v1/shopper_pb.ts";
import { methodKey, methodLabel, shownMethod } from "../../services/checkout/page.ts";
import { exceptionReason, uncountedReason } from "../../services/intents/funds.ts";
import { methodsAsked } from "../../services/intents/validate.ts";

const asked = (json: unknown) => methodsAsked(fromJson(ValueSchema, json as never));

t.test("payment_methods: a list of pairs we accept, or all", async (t) => {
  t.equal(asked("all"), "all");
  t.same(asked([{ network: "base", asset: "USDC" }, { network: "bitcoin", asset: "BTC" }]), [
    { network: "base", asset: "USDC" },
    { network: "bitcoin", asset: "BTC" },
  ]);
  for (const bad of ["some", [], 7, [{ network: "base" }], [{ network: "base", asset: "DOGE" }], [{ network: "moon", asset: "USDC" }], [{ network: "base", asset: "USDC", extra: 1 }], [{ network: "base", asset: "USDC" }, { network: "base", asset: "USDC" }], Array.from({ length: 13 }, () => ({ network: "base", asset: "USDC" }))]) {
    t.throws(() => asked(bad), ConnectError, JSON.stringify(bad).slice(0, 60));
  }
});

t.test("another method, another asset", async (t) => {
  const terms = { network: "base", asset: "USDC", requiredConfirmations: 2, methods: [{ network: "base", asset: "USDC" }, { network: "ethereum", asset: "ETH" }, { network: "ethereum", asset: "USDC" }] };
  const output = (network: string, asset: string) => ({ network, asset, orphaned: false, confirmations: 5 });
  t.equal(uncountedReason(output("base", "USDC"), terms), undefined, "the chosen method counts");
  t.equal(uncountedReason(output("ethereum", "ETH"), terms), "other_method");
  t.equal(uncountedReason(output("ethereum", "USDC"), terms), "other_method", "the same asset on another method's network");
  t.equal(uncountedReason(output("ethereum", "USDT"), terms), "wrong_asset", "an asset no method offers");
  t.equal(exceptionReason(output("ethereum", "ETH"), terms), "other_method");
  t.equal(uncountedReason(output("ethereum", "USDC"), { ...terms, methods: undefined }), "wrong_asset", "a one-method intent: anything else is wrong_asset");
  t.equal(uncountedReason({ asset: "USDC", orphaned: false, confirmations: 5 }, terms), undefined, "an output that names no network is the intent's");
});

t.test("the checkout page: picker, a pick, and the chosen method whatever is picked", async (t) => {
  const method = (network: string, asset: string, chosen = false) =>
    create(PaymentMethodSchema, { network, asset, requestedAmount: "1", amountDue: "1", depositAddress: `addr-${network}`, paymentUri: `uri-${network}-${asset}`, chosen, requiredConfirmations: 3 });
  const view = create(ShopperPaymentIntentSchema, { publicId: "pi_x", status: "pending", paymentMethods: [method("ethereum", "ETH"), method("base", "USDC")] });
  t.equal(shownMethod(view, null).mode, "pick");
  t.equal(shownMethod(view, "solana.SOL").mode, "pick", "a method it does not offer: the picker");
  const picked = shownMethod(view, "base.USDC");
  t.same([picked.mode, picked.view.network, picked.view.asset, picked.view.depositAddress, picked.view.paymentUri, picked.view.requiredConfirmations], ["picked", "base", "USDC", "addr-base", "uri-base-USDC", 3]);
  const chosen = create(ShopperPaymentIntentSchema, { ...view, network: "base", asset: "USDC", paymentMethods: [method("ethereum", "ETH"), method("base", "USDC", true)] });
  t.equal(shownMethod(chosen, "ethereum.ETH").mode, "one", "once chosen, a pick changes nothing");
  t.equal(methodKey({ network: "base", asset: "USDC" }), "base.USDC");
  t.equal(methodLabel({ network: "base", asset: "USDC" }, false), "USDC on Base");
  t.equal(methodLabel({ network: "tron", asset: "USDT" }, false), "USDT on Tron");
  t.equal(methodLabel({ network: "bitcoin", asset: "BTC" }, false), "Bitcoin");
  t.equal(methodLabel({ network: "arbitrum", asset: "ETH" }, true), "ETH on Arbitrum Sepolia testnet");
});
