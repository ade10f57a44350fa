// A token the issuer has on mainnet only (polygon's USDT): what each environment reads and offers.
import t from "tap";
import { devTokens } from "../../scripts/devchain/chain.ts";
import { assets, chainAssetsIn, notOfferedReason, offeredIn } from "../../services/vocabulary/assets.ts";

t.test("a watcher of Test polygon reads USDC at its Amoy contract and nothing else: USDT is not taken for a native coin", async (t) => {
  t.same(
    chainAssetsIn("polygon", "test").map((a) => [a.info.asset, a.contract]),
    [["USDC", "0x41E94Eb019C0762f9Bfcf9Fb1E58725BfB0e7582"]],
  );
  t.same(
    chainAssetsIn("polygon", "live").map((a) => [a.info.asset, a.contract]),
    [
      ["USDC", "0x3c499c542cEF5E3811e1192ce70d8cC03d5c3359"],
      ["USDT", "0xc2132D05D31c914a87C6611C10748AEb04B58e8F"],
    ],
  );
  t.same(Object.keys(devTokens("polygon")), ["USDC"], "the polygon dev chain (Amoy's stand-in) places only what Amoy has");
});

t.test("every token has a Live contract; only a token may be Live only, and it says why", async (t) => {
  for (const a of assets) {
    t.ok(offeredIn(a, "live"), `${a.network} ${a.asset} on Live`);
    if (a.contract === undefined) t.ok(offeredIn(a, "test"), `${a.network} ${a.asset}: a native coin is on every chain`);
  }
  const testOnly = assets.filter((a) => !offeredIn(a, "test")).map((a) => `${a.network}.${a.asset}`);
  t.same(testOnly, ["polygon.USDT"]);
  t.match(notOfferedReason(assets.find((a) => a.network === "polygon" && a.asset === "USDT")!, "test"), "offered on Live only");
});
