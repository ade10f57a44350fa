/**
 * The URI a wallet opens (and a QR code carries) to pay an intent: BIP 21,
 * EIP-681, Solana Pay, or the tron: form wallets such as TronLink read.
 * Amounts go from decimal string to string or integer units, never a float.
 */
import { checkAmount, toUnits } from "../vocabulary/amount.ts";
import { evmChainIds, findAsset, isEvmNetwork, offeredIn } from "../vocabulary/assets.ts";
import { setBounded } from "../platform/bounded.ts";
import { checkAddress, type Environment } from "./formats.ts";

export interface PaymentUriInput {
  network: string;
  asset: string;
  environment: Environment;
  address: string;
  /** A plain decimal string within the asset's decimals (services/intents/amount.ts). */
  amount: string;
}

export function paymentUri(p: PaymentUriInput): string {
  const info = findAsset(p.network, p.asset);
  if (info === undefined) throw new Error(`unknown asset ${p.asset} on network ${p.network}`);
  // Callers validate first; re-checking here means a bad value fails loudly instead of becoming a wrong QR code.
  const amount = checkAmount(p.amount, info.decimals);
  if (!amount.ok) throw new Error(`amount ${amount.reason}`);
  const to = canonicalAddress(p.network, p.environment, p.address);
  // A token with no contract here has no URI: the native coin's would send the wrong thing.
  if (!offeredIn(info, p.environment)) throw new Error(`${p.asset} on ${p.network} is not offered in ${p.environment}`);
  const contract = info.contract?.[p.environment] ?? undefined;

  switch (p.network) {
    case "bitcoin":
      return `bitcoin:${to}?amount=${trimDecimal(p.amount)}`;
    case "ethereum":
    case "polygon":
    case "base":
    case "arbitrum": {
      // Polygon, Base and Arbitrum have no scheme of their own: EIP-681 "ethereum:" with the chain id picks the chain.
      const chainId = evmChainIds[p.network][p.environment];
      const units = toUnits(p.amount, info.decimals).toString();
      if (contract === undefined) return `ethereum:${to}@${chainId}?value=${units}`;
      return `ethereum:${contract}@${chainId}/transfer?address=${to}&uint256=${units}`;
    }
    case "solana":
      return `solana:${to}?amount=${trimDecimal(p.amount)}${contract === undefined ? "" : `&spl-token=${contract}`}`;
    case "tron":
      return `tron:${to}?amount=${trimDecimal(p.amount)}${contract === undefined ? "" : `&token=${contract}`}`;
    default:
      throw new Error(`no payment URI format for network ${p.network}`);
  }
}

/**
 * The address checked and in its canonical form, remembered: every view of an intent shows its
 * payment URI, and checking an address again hashes it (EIP-55's keccak, base58check's sha256),
 * which was a fifth of a list page's CPU. Only addresses that passed are kept.
 */
const checked = new Map<string, string>();
const maxChecked = 10_000;
// The EVM networks share one address form (EIP-55 hex, whatever the chain): an address checked, or
// derived, for one is checked for all (an intent's EVM methods may share one address: reserve.ts takeShared).
const checkedId = (network: string, environment: Environment, address: string) => `${isEvmNetwork(network) ? "evm" : network}|${environment}|${address}`;

function canonicalAddress(network: string, environment: Environment, address: string): string {
  const id = checkedId(network, environment, address);
  const known = checked.get(id);
  if (known !== undefined) return known;
  const result = checkAddress(network, environment, address);
  if (!result.ok) throw new Error(`address ${result.reason}`);
  setBounded(checked, id, result.address, maxChecked);
  return result.address;
}

/**
 * Addresses this process derived itself are canonical by construction (deriveAddresses writes
 * them in the checked form): remembering them saves every new intent's first view a hash.
 */
export function rememberDerived(network: string, environment: Environment, addresses: readonly string[]): void {
  for (const address of addresses) setBounded(checked, checkedId(network, environment, address), address, maxChecked);
}

/** "1.500" → "1.5", "2.0" → "2": wallets differ on trailing zeros, none mind their absence. */
function trimDecimal(amount: string): string {
  return amount.includes(".") ? amount.replace(/0+$/, "").replace(/\.$/, "") : amount;
}
