// `npm run pay` sends what it says it sent: an amount the token cannot hold is refused before
// anything is signed, rather than rounded (1.1234567 USDC went out as 1.123457).
import { spawnSync } from "node:child_process";
import path from "node:path";
import t from "tap";

const script = path.resolve(import.meta.dirname, "../../scripts/devchain.ts");
const address = "0x9858EfFD232B4033E47d90003D41EC34EcaEda94";
// Nothing listens there: an amount that passes gets as far as looking for the chain.
const env = { PATH: process.env.PATH ?? "", DEVCHAIN_URL: "http://127.0.0.1:9" };
const pay = (...args: string[]) => spawnSync(process.execPath, [script, "pay", address, ...args], { env, encoding: "utf8", timeout: 30_000 });

t.test("more decimals than the token has: refused, nothing sent", async (t) => {
  const cases: [string, string, RegExp][] = [
    ["1.1234567", "USDC", /^devchain: amount 1\.1234567 has more than 6 decimal places, the most USDC allows; nothing was sent\n$/],
    ["0.0000001", "USDT", /^devchain: amount 0\.0000001 has more than 6 decimal places, the most USDT allows; nothing was sent\n$/],
    ["1.0000000000000000001", "ETH", /^devchain: amount 1\.0000000000000000001 has more than 18 decimal places, the most ETH allows; nothing was sent\n$/],
    ["0", "USDC", /^devchain: amount 0 must be greater than zero; nothing was sent\n$/],
  ];
  for (const [amount, asset, message] of cases) {
    const r = pay(amount, asset);
    t.equal(r.status, 1, `${amount} ${asset}: exit 1`);
    t.equal(r.stdout, "", `${amount} ${asset}: nothing printed as sent`);
    t.match(r.stderr, message, `${amount} ${asset}: says why`);
  }
});

t.test("an amount the token holds goes on to the chain", async (t) => {
  for (const [amount, asset] of [["1.123456", "USDC"], ["5", "USDC"], ["0.000000000000000001", "ETH"]] as const) {
    const r = pay(amount, asset);
    t.match(r.stderr, /^devchain: no dev chain answers at http:\/\/127\.0\.0\.1:9/, `${amount} ${asset}: accepted, then no chain`);
  }
});

t.test("a T… deposit address is a tron intent's: USDT on the tron dev chain", async (t) => {
  const tron = "TUEZSdKsoDHQMeZwihtdoBiN46zxhGWYdH";
  const payTron = (...args: string[]) => spawnSync(process.execPath, [script, "pay", tron, ...args], { env, encoding: "utf8", timeout: 30_000 });
  let r = payTron("1.1234567");
  t.same([r.status, r.stdout], [1, ""]);
  t.match(r.stderr, /^devchain: amount 1\.1234567 has more than 6 decimal places, the most USDT allows; nothing was sent\n$/, "USDT by default");
  r = payTron("1", "USDC");
  t.match(r.stderr, /^devchain: unknown asset "USDC" on the tron dev chain: USDT\n$/, "no other asset on tron");
  r = payTron("1.5");
  t.match(r.stderr, /^devchain: no dev chain answers at http:\/\/127\.0\.0\.1:9: start one with npm run devchain -- tron/, "accepted, then no chain, and how to start one");
  r = spawnSync(process.execPath, [script, "pay", "TUEZSdKsoDHQMeZwihtdoBiN46zxhGWYdX", "1"], { env, encoding: "utf8", timeout: 30_000 });
  t.match(r.stderr, /^devchain: usage: npm run -s pay -- <pi_… intent id \| 0x deposit address> <amount> \[ETH\|USDC\|USDT\], or <T… deposit address> <amount> \[USDT\]\n$/, "a T… address with a bad checksum is refused");
});
