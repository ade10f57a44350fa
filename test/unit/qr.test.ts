// QR configurations without a database: the admin input checks, the accepted pairs, and the
// public handler, which refuses an id that cannot exist before it touches the EntityManager.
import { create } from "@bufbuild/protobuf";
import { Code, ConnectError, createContextValues, createHandlerContext } from "@connectrpc/connect";
import t from "tap";
import { GetQrConfigurationRequestSchema, QrService } from "../../gen/payments/v1/qr_pb.ts";
import { AdminError } from "../../services/auth/admin.ts";
import { assets } from "../../services/vocabulary/assets.ts";
import type { EntityManager } from "../../services/platform/db.ts";
import { describeError } from "../../services/platform/errors.ts";
import { newId } from "../../services/platform/ids.ts";
import { checkQrInput } from "../../services/qr/admin.ts";
import { qrService } from "../../services/qr/service.ts";
import { acceptedPairs, qrIdPattern } from "../../services/qr/store.ts";
import { emKey, principalKey } from "../../services/rpc/context.ts";

const base = { environment: "test", label: "Counter 1" };

function refusal(input: Parameters<typeof checkQrInput>[0]): string {
  try {
    checkQrInput(input);
  } catch (err) {
    if (err instanceof AdminError) return err.message;
    throw err;
  }
  return "(accepted)";
}

t.test("checkQrInput: a Live-only asset (polygon's USDT) on a Test QR is refused with why; on Live it is taken", async (t) => {
  t.equal(refusal({ ...base, network: "polygon", asset: "USDT" }), "--asset: USDT on polygon is offered on Live only: its issuer has no token on polygon's testnet, so a Test intent could not be paid in it");
  t.equal(checkQrInput({ ...base, environment: "live", network: "polygon", asset: "USDT" }).asset, "USDT");
});

t.test("checkQrInput: accepted inputs, normalized", async (t) => {
  t.same(checkQrInput({ ...base, label: "  Counter 1 \t" }), { environment: "test", label: "Counter 1", network: null, asset: null, amount: null }, "label trimmed; no pair");
  t.same(checkQrInput({ ...base, environment: "live", network: "ethereum" }), { environment: "live", label: "Counter 1", network: "ethereum", asset: null, amount: null });
  t.same(checkQrInput({ ...base, network: "tron", asset: "USDT", amount: "12.50" }), { environment: "test", label: "Counter 1", network: "tron", asset: "USDT", amount: "12.50" });
  t.same(checkQrInput({ ...base, network: "ethereum", asset: "ETH", amount: "0.000000000000000001" }).amount, "0.000000000000000001", "18 decimals on ETH");
  t.equal(checkQrInput({ ...base, label: "é".repeat(100) }).label.length, 100, "100 characters");
  t.equal(checkQrInput({ ...base, label: "😀".repeat(100) }).label, "😀".repeat(100), "100 characters outside the BMP (200 UTF-16 units)");
  t.equal(checkQrInput({ ...base, label: `<script>alert("x")</script>` }).label, `<script>alert("x")</script>`, "markup is data: stored as given, escaped where shown");
  t.same(checkQrInput({ ...base, network: "", asset: " ", amount: "" }), { environment: "test", label: "Counter 1", network: null, asset: null, amount: null }, "empty options are absent");
});

t.test("checkQrInput: refusals, each an AdminError with one line", async (t) => {
  const cases: [Parameters<typeof checkQrInput>[0], RegExp][] = [
    [{ ...base, environment: "prod" }, /--environment must be test or live/],
    [{ ...base, label: "   " }, /--label must be 1 to 100 characters, got 0/],
    [{ ...base, label: "x".repeat(101) }, /--label must be 1 to 100 characters, got 101/],
    [{ ...base, label: "line\nbreak" }, /without control characters/],
    [{ ...base, label: "nul\u0000" }, /without control characters/],
    [{ ...base, network: "dogecoin" }, /unknown network "dogecoin"; one of: bitcoin, ethereum/],
    [{ ...base, asset: "USDC" }, /--asset requires --network/],
    [{ ...base, network: "ethereum", amount: "1" }, /--amount requires --asset/],
    [{ ...base, amount: "1" }, /--amount requires --asset/],
    [{ ...base, network: "bitcoin", asset: "USDC" }, /unknown asset "USDC" on bitcoin; one of: BTC/],
    [{ ...base, network: "ethereum", asset: "USDC", amount: "1.1234567" }, /--amount has more than 6 decimal places/],
    [{ ...base, network: "ethereum", asset: "USDC", amount: "0" }, /--amount must be greater than zero/],
    [{ ...base, network: "ethereum", asset: "USDC", amount: "-1" }, /--amount must be a plain decimal string/],
    [{ ...base, network: "ethereum", asset: "USDC", amount: "1e3" }, /--amount must be a plain decimal string/],
  ];
  for (const [input, message] of cases) {
    const got = refusal(input);
    t.match(got, message, JSON.stringify(input));
    t.notOk(got.includes("\n"), "one line");
  }
});

t.test("acceptedPairs", async (t) => {
  t.same(acceptedPairs(null, null), assets.map((a) => ({ network: a.network, asset: a.asset })), "every supported pair");
  t.same(acceptedPairs("ethereum", null), [
    { network: "ethereum", asset: "ETH" },
    { network: "ethereum", asset: "USDC" },
    { network: "ethereum", asset: "USDT" },
  ]);
  t.same(acceptedPairs("solana", "USDC"), [{ network: "solana", asset: "USDC" }]);
});

t.test("the id pattern is exactly newId('qr')", async (t) => {
  t.ok(Array.from({ length: 500 }, () => newId("qr")).every((id) => qrIdPattern.test(id)), "500 new ids match");
  for (const id of ["", "qr_", `qr_${"a".repeat(23)}`, `qr_${"a".repeat(25)}`, `QR_${"a".repeat(24)}`, `pi_${"a".repeat(24)}`, `qr_${"a".repeat(23)}-`, `qr_${"a".repeat(23)}\u0000`, `qr_${"a".repeat(24)}\n`, ` qr_${"a".repeat(24)}`]) {
    t.notOk(qrIdPattern.test(id), JSON.stringify(id));
  }
});

/** A handler context of a public caller whose EntityManager records every use; `rows` is what execute returns. */
function contextWith(rows: unknown[]) {
  const touched: string[] = [];
  const em = new Proxy({} as EntityManager, {
    get(_target, prop) {
      touched.push(String(prop));
      if (prop === "execute") return async () => rows;
      throw new Error(`the handler used em.${String(prop)}`);
    },
  });
  const values = createContextValues().set(principalKey, { kind: "public" }).set(emKey, em);
  const ctx = createHandlerContext({
    service: QrService,
    method: QrService.method.getQrConfiguration,
    protocolName: "connect",
    requestMethod: "POST",
    url: "http://test/payments.v1.QrService/GetQrConfiguration",
    contextValues: values,
  });
  return { ctx, touched };
}

async function get(id: string, rows: unknown[] = []) {
  const { ctx, touched } = contextWith(rows);
  const req = create(GetQrConfigurationRequestSchema, { qrPublicId: id });
  try {
    return { res: await qrService().getQrConfiguration(req, ctx), err: undefined, touched };
  } catch (err) {
    return { res: undefined, err, touched };
  }
}

t.test("handler: a malformed id is not found without touching the EntityManager", async (t) => {
  for (const id of ["", "nope", "<script>", "qr_abc", `qr_${"a".repeat(23)}`, `qr_${"a".repeat(25)}`, `qr_${"a".repeat(23)}\u0000`, `qr_${"a".repeat(24)}'--`, "q".repeat(1024), `qr_${"é".repeat(24)}`]) {
    const { err, touched } = await get(id);
    t.ok(err instanceof ConnectError && err.code === Code.NotFound, `${JSON.stringify(id.slice(0, 40))}: NotFound`);
    t.match(describeError(err), { code: "not_found", status: 404, param: "qr_public_id" });
    t.same(touched, [], "no use of the EntityManager");
  }
});

t.test("handler: a well-formed id is looked up once (the control of the test above)", async (t) => {
  const id = newId("qr");
  const unknown = await get(id);
  t.match(describeError(unknown.err), { code: "not_found", param: "qr_public_id" }, "unknown: not_found");
  t.same(unknown.touched, ["execute"], "one query");

  const row = { id, environment: "live", label: "<b>Till</b>", network: "ethereum", asset: null, amount: null, merchant_name: "Shop & Co" };
  const found = await get(id, [row]);
  t.same(found.touched, ["execute"]);
  const data = found.res?.data;
  t.match(data, { qrPublicId: id, label: "<b>Till</b>", merchantDisplayName: "Shop & Co", environment: "live", amount: undefined });
  t.same(data?.accepted?.map((a) => `${a.network}/${a.asset}`), ["ethereum/ETH", "ethereum/USDC", "ethereum/USDT"]);
});
