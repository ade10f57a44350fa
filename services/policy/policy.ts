import { getOption, type DescField } from "@bufbuild/protobuf";
import { SetAcceptedMethodsRequestSchema, SetConfirmationPolicyRequestSchema, SetPriceSpreadRequestSchema, SetUnderpaymentToleranceRequestSchema } from "../../gen/payments/v1/admin_pb.ts";
import { field as fieldRules } from "../../gen/payments/v1/options_pb.ts";
import type { Environment, Owner } from "../auth/keys.ts";
import type { EntityManager } from "../platform/db.ts";
import { apiError, validationError } from "../platform/errors.ts";
import { checkAmount, toUnits } from "../vocabulary/amount.ts";
import { assetsOn, findAsset, networks, notOfferedReason, type AssetInfo } from "../vocabulary/assets.ts";

/** A bound of AdminService's policy requests: the proto's rule is the one source; the admin CLI is held to it too. */
function maxOf(field: DescField): number {
  const max = getOption(field, fieldRules).max;
  if (max === undefined) throw new Error(`${field.parent.typeName}.${field.name} has no max rule`);
  return Number(max);
}

/** The bounds a merchant's policy is held to. */
const policyLimits = {
  /** Basis points: 10 %. */
  maxToleranceBps: maxOf(SetUnderpaymentToleranceRequestSchema.field.underpaymentToleranceBps),
  /** Basis points: 10 %. */
  maxPriceSpreadBps: maxOf(SetPriceSpreadRequestSchema.field.priceSpreadBps),
  /** Within the block history a watcher keeps (1 024) to find a reorg and to report again after a restart. */
  maxConfirmations: maxOf(SetConfirmationPolicyRequestSchema.field.confirmations),
  /** Accepted payment methods a merchant may name: the proto's max_items. */
  maxAcceptedMethods: getOption(SetAcceptedMethodsRequestSchema.field.methods, fieldRules).maxItems ?? 0,
};

/** A confirmation rule as stored: for one asset of the network, or "*" for all of them. */
export interface ConfirmationRule {
  asset: string;
  confirmations: number;
  belowAmount: string | null;
  belowConfirmations: number | null;
}

/** What is fixed on an intent when it is created. */
export interface IntentPolicy {
  requiredConfirmations: number;
  underpaymentToleranceBps: number;
}

/** Every asset of the network. */
export const anyAsset = "*";

/**
 * The confirmations an intent for `requested` of `asset` needs: the asset's own rule before the
 * network's, its lower count when the request is below the rule's amount, else `fallback` (the
 * network's setting).
 */
export function confirmationsFor(rules: readonly ConfirmationRule[], asset: AssetInfo, requested: string, fallback: number): number {
  const rule = rules.find((r) => r.asset === asset.asset) ?? rules.find((r) => r.asset === anyAsset);
  if (!rule) return fallback;
  if (rule.belowAmount !== null && rule.belowConfirmations !== null && toUnits(requested, asset.decimals) < toUnits(rule.belowAmount, asset.decimals)) {
    return rule.belowConfirmations;
  }
  return rule.confirmations;
}

/** A merchant's whole policy in one environment, as of its version. */
export interface PolicySnapshot {
  version: number;
  rules: (ConfirmationRule & { network: string })[];
  toleranceBps: number;
  /** Taken off the quoted rate of a fiat-priced intent, in basis points (0: none). */
  priceSpreadBps: number;
  /** What payment_methods "all" offers ("network.asset"), of what a watcher follows; null: every one followed. */
  acceptedMethods: string[] | null;
}

/** The owner's policy, in one round trip. */
export async function policySnapshot(em: EntityManager, owner: Owner): Promise<PolicySnapshot> {
  const [row] = await em.execute<{ rules: (ConfirmationRule & { network: string })[] | null; tolerance: number | null; spread: number | null; accepted: string[] | string | null; version: string | number | null }[]>(
    `select (select json_agg(json_build_object('network', network, 'asset', asset, 'confirmations', confirmations, 'belowAmount', below_amount::text, 'belowConfirmations', below_confirmations) order by network, asset)
               from confirmation_policies where merchant_id = ? and environment = ?) as rules,
            p.underpayment_tolerance_bps as tolerance, p.price_spread_bps as spread, p.accepted_methods as accepted, p.version
       from (select 1) one left join merchant_policies p on p.merchant_id = ? and p.environment = ?`,
    [owner.merchantId, owner.environment, owner.merchantId, owner.environment],
  );
  const accepted = typeof row?.accepted === "string" ? (JSON.parse(row.accepted) as string[]) : (row?.accepted ?? null);
  return { version: Number(row?.version ?? 0), rules: row?.rules ?? [], toleranceBps: row?.tolerance ?? 0, priceSpreadBps: row?.spread ?? 0, acceptedMethods: accepted };
}

/** A condition, for a statement that writes an intent with a snapshot's values, that the snapshot is still the owner's policy. */
export function policyIsCurrent(owner: Owner, version: number): { sql: string; params: unknown[] } {
  return {
    sql: `coalesce((select version from merchant_policies where merchant_id = ? and environment = ?), 0) = ?`,
    params: [owner.merchantId, owner.environment, version],
  };
}

/** What a snapshot fixes on a new intent of `asset` for `requested`; `fallback` is the network's count. */
export function intentPolicy(snapshot: PolicySnapshot, asset: AssetInfo, requested: string, fallback: number): IntentPolicy {
  const rules = snapshot.rules.filter((r) => r.network === asset.network);
  return { requiredConfirmations: confirmationsFor(rules, asset, requested, fallback), underpaymentToleranceBps: snapshot.toleranceBps };
}

/** The highest confirmation count any merchant's rule sets on the chain: how far back a watcher keeps reporting and looks for reorgs. */
export async function highestConfirmations(em: EntityManager, environment: string, network: string): Promise<number> {
  const [row] = await em.execute<{ n: number | null }[]>(
    `select max(greatest(confirmations, coalesce(below_confirmations, 0))) as n from confirmation_policies where environment = ? and network = ?`,
    [environment, network],
  );
  return row?.n ?? 0;
}

export interface ConfirmationRuleInput {
  network: string;
  /** "*" or one asset of the network. */
  asset: string;
  confirmations: number;
  belowAmount?: string;
  belowConfirmations?: number;
  /** Says yes to a count of 0: payments counted before any block holds them, which a reorg or a double spend can take back. */
  allowUnconfirmed?: boolean;
}

/** A rule as a merchant's operator asks for it, checked: what is refused is a 400 naming the field. */
export function checkRule(input: ConfirmationRuleInput): ConfirmationRule {
  if (!networks.includes(input.network)) throw validationError("network", `Unsupported network "${input.network}"; supported: ${networks.join(", ")}.`);
  const asset = input.asset === anyAsset ? undefined : findAsset(input.network, input.asset);
  if (input.asset !== anyAsset && !asset) {
    throw validationError("asset", `Asset "${input.asset}" is not supported on ${input.network}; supported: ${anyAsset} (all), ${assetsOn(input.network).join(", ")}.`);
  }
  const count = (param: string, n: number) => {
    if (!Number.isInteger(n) || n < 0 || n > policyLimits.maxConfirmations) {
      throw validationError(param, `"${param}" must be an integer from 1 to ${policyLimits.maxConfirmations} (the block history a watcher keeps).`);
    }
    // Every chain we accept can reorganize: counting at 0 must be asked for in so many words.
    if (n === 0 && !input.allowUnconfirmed) {
      throw validationError(param, `"${param}" of 0 counts payments no block holds yet, which a reorg or a double spend takes back; set allow_unconfirmed (the admin CLI's --allow-unconfirmed) to mean it.`);
    }
  };
  count("confirmations", input.confirmations);
  if ((input.belowAmount === undefined) !== (input.belowConfirmations === undefined)) {
    throw validationError(input.belowAmount === undefined ? "below_amount" : "below_confirmations", `"below_amount" and "below_confirmations" go together.`);
  }
  if (input.belowAmount === undefined || input.belowConfirmations === undefined) return { asset: input.asset, confirmations: input.confirmations, belowAmount: null, belowConfirmations: null };
  if (!asset) throw validationError("below_amount", `An amount is in one asset: name the asset ("${anyAsset}" stands for all of them).`);
  const amount = checkAmount(input.belowAmount, asset.decimals);
  if (!amount.ok) throw validationError("below_amount", `"below_amount" ${amount.reason}.`);
  count("below_confirmations", input.belowConfirmations);
  if (input.belowConfirmations > input.confirmations) throw validationError("below_confirmations", `"below_confirmations" is for small payments: at most "confirmations" (${input.confirmations}).`);
  return { asset: input.asset, confirmations: input.confirmations, belowAmount: amount.value, belowConfirmations: input.belowConfirmations };
}

export function checkPriceSpread(bps: number): number {
  if (!Number.isInteger(bps) || bps < 0 || bps > policyLimits.maxPriceSpreadBps) {
    throw validationError("price_spread_bps", `"price_spread_bps" must be an integer from 0 to ${policyLimits.maxPriceSpreadBps} (10 %).`);
  }
  return bps;
}

export function checkTolerance(bps: number): number {
  if (!Number.isInteger(bps) || bps < 0 || bps > policyLimits.maxToleranceBps) {
    throw validationError("underpayment_tolerance_bps", `"underpayment_tolerance_bps" must be an integer from 0 to ${policyLimits.maxToleranceBps} (10 %).`);
  }
  return bps;
}

/** Sets (or with `rule` undefined, removes) the owner's rule for a network's asset ("*": all); intents already created keep theirs. */
async function setConfirmationRule(em: EntityManager, owner: Owner, network: string, asset: string, rule: ConfirmationRule | undefined, now = new Date()): Promise<void> {
  if (!rule) {
    await em.execute(`delete from confirmation_policies where merchant_id = ? and environment = ? and network = ? and asset = ?`, [owner.merchantId, owner.environment, network, asset]);
  } else {
    await em.execute(
      `insert into confirmation_policies (merchant_id, environment, network, asset, confirmations, below_amount, below_confirmations, updated_at)
       values (?, ?, ?, ?, ?, ?, ?, ?)
       on conflict (merchant_id, environment, network, asset) do update
         set confirmations = excluded.confirmations, below_amount = excluded.below_amount, below_confirmations = excluded.below_confirmations, updated_at = excluded.updated_at`,
      [owner.merchantId, owner.environment, network, rule.asset, rule.confirmations, rule.belowAmount, rule.belowConfirmations, now],
    );
  }
  await bumpVersion(em, owner, now);
}

/** Every change moves the version, so a create holding an older copy of the policy writes nothing and reads it again. */
async function bumpVersion(
  em: EntityManager,
  owner: Owner,
  now: Date,
  set: { toleranceBps?: number; priceSpreadBps?: number; acceptedMethods?: string[] | null } = {},
): Promise<void> {
  // acceptedMethods: undefined leaves it, null sets it back to every method followed.
  const accepted = set.acceptedMethods === undefined ? null : JSON.stringify(set.acceptedMethods);
  await em.execute(
    `insert into merchant_policies (merchant_id, environment, underpayment_tolerance_bps, price_spread_bps, accepted_methods, version, updated_at) values (?, ?, ?, ?, ?::jsonb, 1, ?)
     on conflict (merchant_id, environment) do update
       set underpayment_tolerance_bps = coalesce(?, merchant_policies.underpayment_tolerance_bps),
           price_spread_bps = coalesce(?, merchant_policies.price_spread_bps),
           accepted_methods = case when ? then excluded.accepted_methods else merchant_policies.accepted_methods end,
           version = merchant_policies.version + 1, updated_at = excluded.updated_at`,
    [
      owner.merchantId,
      owner.environment,
      set.toleranceBps ?? 0,
      set.priceSpreadBps ?? 0,
      accepted,
      now,
      set.toleranceBps ?? null,
      set.priceSpreadBps ?? null,
      set.acceptedMethods !== undefined,
    ],
  );
}

async function setTolerance(em: EntityManager, owner: Owner, bps: number, now = new Date()): Promise<void> {
  await bumpVersion(em, owner, now, { toleranceBps: bps });
}

/** Everything the owner has set: every network's rules and the tolerance, as AdminService's MerchantPolicy in JSON (the admin CLI prints it). */
async function showPolicy(em: EntityManager, owner: Owner) {
  const snapshot = await policySnapshot(em, owner);
  return {
    merchant: owner.merchantId,
    environment: owner.environment,
    confirmation_rules: snapshot.rules.map((r) => ({
      network: r.network,
      asset: r.asset,
      confirmations: r.confirmations,
      below_amount: r.belowAmount,
      below_confirmations: r.belowConfirmations,
    })),
    underpayment_tolerance_bps: snapshot.toleranceBps,
    price_spread_bps: snapshot.priceSpreadBps,
    accepted_methods: snapshot.acceptedMethods ?? [],
  };
}

async function merchantExists(em: EntityManager, merchantId: string): Promise<void> {
  const [row] = await em.execute<{ id: string }[]>(`select id from merchants where id = ?`, [merchantId]);
  if (!row) throw apiError("not_found", `No merchant ${merchantId}.`, "merchant");
}

/** Sets or (remove) drops a confirmation rule of the owner, and answers with its whole policy: the admin CLI's and AdminService's one way in. */
export async function applyConfirmationRule(em: EntityManager, owner: Owner, input: ConfirmationRuleInput & { remove?: boolean }, now = new Date()) {
  const rule = input.remove ? undefined : checkRule(input);
  if (input.remove) checkRule({ ...input, confirmations: 1, belowAmount: undefined, belowConfirmations: undefined });
  await merchantExists(em, owner.merchantId);
  await setConfirmationRule(em, owner, input.network, input.asset, rule, now);
  return showPolicy(em, owner);
}

/** The owner's whole policy, or 404 for a merchant that does not exist. */
export async function readPolicy(em: EntityManager, owner: Owner) {
  await merchantExists(em, owner.merchantId);
  return showPolicy(em, owner);
}

/** Sets the owner's underpayment tolerance, and answers with its whole policy. */
export async function applyTolerance(em: EntityManager, owner: Owner, bps: number, now = new Date()) {
  checkTolerance(bps);
  await merchantExists(em, owner.merchantId);
  await setTolerance(em, owner, bps, now);
  return showPolicy(em, owner);
}

/**
 * The methods "network.asset" as a merchant sets them: 1 to the proto's max_items we accept, each once, or 400
 * naming the first that is not. A method that cannot be paid in the environment (polygon's USDT on Test) is
 * refused with why, rather than kept and never offered.
 */
export function checkAcceptedMethods(methods: readonly string[], environment: Environment): string[] {
  if (methods.length === 0) throw validationError("methods", `"methods" is empty: name at least one "network.asset" (such as "base.USDC"), or reset to every one followed.`);
  if (methods.length > policyLimits.maxAcceptedMethods) throw validationError("methods", `"methods" takes at most ${policyLimits.maxAcceptedMethods}; got ${methods.length}.`);
  const known = networks.flatMap((n) => assetsOn(n).map((a) => `${n}.${a}`));
  for (const m of methods) {
    if (!known.includes(m)) throw validationError("methods", `"methods": ${JSON.stringify(m.slice(0, 40))} is not a method we accept; each is "network.asset", one of ${known.join(", ")}.`);
    const [network = "", asset = ""] = m.split(".");
    const why = notOfferedReason(findAsset(network, asset) as AssetInfo, environment);
    if (why !== undefined) throw validationError("methods", `"methods": ${why}.`);
  }
  if (new Set(methods).size !== methods.length) throw validationError("methods", `"methods" names a method twice.`);
  return [...methods];
}

/** Sets (or, with null, resets to every one followed) what payment_methods "all" offers, and answers with the whole policy. */
export async function applyAcceptedMethods(em: EntityManager, owner: Owner, methods: readonly string[] | null, now = new Date()) {
  const checked = methods === null ? null : checkAcceptedMethods(methods, owner.environment);
  await merchantExists(em, owner.merchantId);
  await bumpVersion(em, owner, now, { acceptedMethods: checked });
  return showPolicy(em, owner);
}

/** Sets the owner's price spread (new fiat-priced intents take it; those created keep their quote), and answers with its whole policy. */
export async function applyPriceSpread(em: EntityManager, owner: Owner, bps: number, now = new Date()) {
  checkPriceSpread(bps);
  await merchantExists(em, owner.merchantId);
  await bumpVersion(em, owner, now, { priceSpreadBps: bps });
  return showPolicy(em, owner);
}
