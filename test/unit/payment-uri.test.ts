import t from "tap";
import { paymentUri } from "../../services/addresses/payment-uri.ts";
import { toEip55 } from "../../services/addresses/formats.ts";
import { assets, evmChainIds, isEvmNetwork } from "../../services/vocabulary/assets.ts";

const btcLive = "bc1qcr8te4kr609gcawutmrza0j4xv80jy8z306fyu";
const btcTest = "tb1q6rz28mcfaxtmd6v789l9rrlrusdprr9pqcpvkl";
const evm = "0x9858EfFD232B4033E47d90003D41EC34EcaEda94";
const tron = "TUEZSdKsoDHQMeZwihtdoBiN46zxhGWYdH";
const sol = "44TYGq2LziZvrrdMDVCAQ4FRXH6qECS7bs6FsAjMrtva";

t.test("bitcoin: BIP 21 with a decimal BTC amount", async (t) => {
  const uri = (amount: string, address = btcLive, environment: "test" | "live" = "live") =>
    paymentUri({ network: "bitcoin", asset: "BTC", environment, address, amount });
  t.equal(uri("0.0015"), `bitcoin:${btcLive}?amount=0.0015`);
  t.equal(uri("0.00150000"), `bitcoin:${btcLive}?amount=0.0015`, "trailing zeros stripped");
  t.equal(uri("1.0"), `bitcoin:${btcLive}?amount=1`, "no trailing dot");
  t.equal(uri("100"), `bitcoin:${btcLive}?amount=100`, "integer zeros kept");
  t.equal(uri("0.00000001"), `bitcoin:${btcLive}?amount=0.00000001`, "one satoshi");
  t.equal(uri("20999999.9769"), `bitcoin:${btcLive}?amount=20999999.9769`);
  t.equal(uri("0.5", btcLive.toUpperCase()), `bitcoin:${btcLive}?amount=0.5`, "address normalized");
  t.equal(uri("0.5", btcTest, "test"), `bitcoin:${btcTest}?amount=0.5`, "testnet keeps the bitcoin: scheme");
});

t.test("ethereum ETH: EIP-681 value in wei", async (t) => {
  const uri = (amount: string, environment: "test" | "live" = "live", address = evm) =>
    paymentUri({ network: "ethereum", asset: "ETH", environment, address, amount });
  t.equal(uri("1.5"), `ethereum:${evm}@1?value=1500000000000000000`);
  t.equal(uri("1.5", "test"), `ethereum:${evm}@11155111?value=1500000000000000000`);
  t.equal(uri("0.000000000000000001"), `ethereum:${evm}@1?value=1`, "one wei");
  t.equal(uri("123456789.123456789012345678"), `ethereum:${evm}@1?value=123456789123456789012345678`);
  t.equal(
    uri("123456789012345678901234567890.123456789012345678"),
    `ethereum:${evm}@1?value=123456789012345678901234567890123456789012345678`,
    "beyond 2^53 and beyond a double's precision",
  );
  t.equal(uri("2.500"), `ethereum:${evm}@1?value=2500000000000000000`);
  t.equal(uri("1", "live", evm.toLowerCase()), `ethereum:${evm}@1?value=1000000000000000000`, "EIP-55 checksummed");
});

t.test("ERC-20 tokens: EIP-681 transfer call", async (t) => {
  const cases = [
    ["ethereum", "USDC", "live", "0xA0b86991c6218b36c1d19D4a2e9Eb0cE3606eB48@1"],
    ["ethereum", "USDC", "test", "0x1c7D4B196Cb0C7B01d743Fbc6116a902379C7238@11155111"],
    ["ethereum", "USDT", "live", "0xdAC17F958D2ee523a2206206994597C13D831ec7@1"],
    ["ethereum", "USDT", "test", "0xaA8E23Fb1079EA71e0a56F48a2aA51851D8433D0@11155111"],
    ["polygon", "USDC", "live", "0x3c499c542cEF5E3811e1192ce70d8cC03d5c3359@137"],
    ["polygon", "USDC", "test", "0x41E94Eb019C0762f9Bfcf9Fb1E58725BfB0e7582@80002"],
    // Circle's native USDC, not the bridged USDbC / USDC.e; Test on Base Sepolia and Arbitrum Sepolia.
    ["base", "USDC", "live", "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913@8453"],
    ["base", "USDC", "test", "0x036CbD53842c5426634e7929541eC2318f3dCF7e@84532"],
    ["arbitrum", "USDC", "live", "0xaf88d065e77c8cC2239327C5EDb3A432268e5831@42161"],
    ["arbitrum", "USDC", "test", "0x75faf114eafb1BDbe2F0316DF893fd58CE46AA4d@421614"],
  ] as const;
  for (const [network, asset, environment, target] of cases) {
    t.equal(
      paymentUri({ network, asset, environment, address: evm, amount: "12.50" }),
      `ethereum:${target}/transfer?address=${evm}&uint256=12500000`,
      `${network} ${asset} ${environment}`,
    );
  }
  const usdc = (amount: string) => paymentUri({ network: "ethereum", asset: "USDC", environment: "live", address: evm, amount });
  t.equal(usdc("0.000001"), `ethereum:0xA0b86991c6218b36c1d19D4a2e9Eb0cE3606eB48@1/transfer?address=${evm}&uint256=1`);
  t.equal(
    usdc("999999999999999999999.999999"),
    `ethereum:0xA0b86991c6218b36c1d19D4a2e9Eb0cE3606eB48@1/transfer?address=${evm}&uint256=999999999999999999999999999`,
  );
});

t.test("solana: Solana Pay", async (t) => {
  const uri = (asset: string, amount: string, environment: "test" | "live" = "live") =>
    paymentUri({ network: "solana", asset, environment, address: sol, amount });
  t.equal(uri("SOL", "1.5"), `solana:${sol}?amount=1.5`);
  t.equal(uri("SOL", "0.000000001"), `solana:${sol}?amount=0.000000001`, "one lamport");
  t.equal(uri("SOL", "3.000000000", "test"), `solana:${sol}?amount=3`);
  t.equal(uri("USDC", "1.50"), `solana:${sol}?amount=1.5&spl-token=EPjFWdd5AufqSSqeM2qaxKEbt1M7cnjvn6k3K1qN9i8`);
  t.equal(uri("USDC", "1.5", "test"), `solana:${sol}?amount=1.5&spl-token=4zMMC9srt5Ri5X14GAgXhaHii3GnPAEERYPJgZJDncDU`);
});

t.test("tron: TRC-20 USDT", async (t) => {
  const uri = (amount: string, environment: "test" | "live" = "live") =>
    paymentUri({ network: "tron", asset: "USDT", environment, address: tron, amount });
  t.equal(uri("1.5"), `tron:${tron}?amount=1.5&token=TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t`);
  t.equal(uri("1.500000", "test"), `tron:${tron}?amount=1.5&token=TXYZopYRdj2D9XRtbG411XZZ3kM5VkAeBf`);
  t.equal(uri("1000000"), `tron:${tron}?amount=1000000&token=TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t`);
});

t.test("ETH on base and arbitrum: a native transfer with the rollup's chain id", async (t) => {
  t.equal(paymentUri({ network: "base", asset: "ETH", environment: "live", address: evm, amount: "0.01" }), `ethereum:${evm}@8453?value=10000000000000000`);
  t.equal(paymentUri({ network: "arbitrum", asset: "ETH", environment: "test", address: evm, amount: "0.01" }), `ethereum:${evm}@421614?value=10000000000000000`);
});

t.test("every asset in every environment has a payment URI", async (t) => {
  const addressFor: Record<string, Record<"test" | "live", string>> = {
    bitcoin: { live: btcLive, test: btcTest },
    ethereum: { live: evm, test: evm },
    polygon: { live: evm, test: evm },
    base: { live: evm, test: evm },
    arbitrum: { live: evm, test: evm },
    tron: { live: tron, test: tron },
    solana: { live: sol, test: sol },
  };
  for (const info of assets) {
    for (const environment of ["test", "live"] as const) {
      const address = addressFor[info.network]?.[environment] as string;
      const contract = info.contract?.[environment];
      if (contract === null) {
        // A token with no contract in this environment (polygon's USDT on Test) has no URI, rather than the native coin's.
        t.throws(() => paymentUri({ network: info.network, asset: info.asset, environment, address, amount: "1" }), { message: `${info.asset} on ${info.network} is not offered in ${environment}` });
        continue;
      }
      const uri = paymentUri({ network: info.network, asset: info.asset, environment, address, amount: "1" });
      t.ok(uri.length > 0, `${info.network} ${info.asset} ${environment}`);
      if (contract) t.ok(uri.includes(contract), "names the token");
      // A wallet may refuse a mixed-case address whose EIP-55 checksum is wrong: a typo in the table shows here.
      if (contract && isEvmNetwork(info.network)) t.equal(toEip55(contract), contract, `${info.network} ${info.asset} ${environment}: EIP-55`);
    }
  }
  t.same(Object.keys(evmChainIds).sort(), ["arbitrum", "base", "ethereum", "polygon"]);
});

t.test("refuses what it cannot express exactly", async (t) => {
  const base = { network: "bitcoin", asset: "BTC", environment: "live", address: btcLive, amount: "1" } as const;
  t.throws(() => paymentUri({ ...base, network: "dogecoin" }), /unknown asset/);
  t.throws(() => paymentUri({ ...base, asset: "USDT" }), /unknown asset/);
  t.throws(() => paymentUri({ ...base, network: "polygon", asset: "POL", address: evm }), /unknown asset/);
  t.throws(() => paymentUri({ ...base, network: "base", asset: "USDT", address: evm }), /unknown asset/, "base: ETH and USDC only");
  t.throws(() => paymentUri({ ...base, network: "arbitrum", asset: "USDT", address: evm }), /unknown asset/, "arbitrum: ETH and USDC only");
  t.throws(() => paymentUri({ ...base, amount: "0.000000001" }), /more than 8 decimal places/, "never rounds");
  t.throws(() => paymentUri({ ...base, amount: "1e-3" }), /plain decimal/);
  t.throws(() => paymentUri({ ...base, amount: "0" }), /greater than zero/);
  t.throws(() => paymentUri({ ...base, address: btcTest }), /address is a bitcoin testnet address/);
  t.throws(() => paymentUri({ ...base, network: "ethereum", asset: "ETH", address: "0x9858efFD232B4033E47d90003D41EC34EcaEda94" }), /checksum/);
});
