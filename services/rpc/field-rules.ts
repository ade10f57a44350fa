import { getOption, hasOption, type DescField, type DescMessage, type Message } from "@bufbuild/protobuf";
import { AmountRule, field as fieldOption, type FieldRules } from "../../gen/payments/v1/options_pb.ts";
import { ConnectError } from "@connectrpc/connect";
import { validationError } from "../platform/errors.ts";
import { checkAmount, checkRequestedAmount, exampleAmount } from "../vocabulary/amount.ts";
import { findAsset } from "../vocabulary/assets.ts";
import { findCurrency } from "../vocabulary/currencies.ts";
import { httpsUrlFault, httpsUrlPattern } from "../vocabulary/formats.ts";
import { valueSets, type ValueSet } from "../vocabulary/value-sets.ts";

/**
 * The (payments.v1.field) rules of a request, enforced for every RPC after its caller is
 * authenticated and authorized: the same rules gen/openapi.json states, read from the same
 * options, so the document cannot promise what the server refuses, or the other way round.
 * Fields are checked in their declaration order; the first fault is the answer, naming its field.
 */
export function checkFieldRules(desc: DescMessage, message: Message, environment?: string): void {
  const values = message as unknown as Record<string, unknown>;
  for (const { field, rules } of rulesOf(desc)) {
    const value = values[field.localName];
    try {
      switch (field.fieldKind) {
        case "scalar":
          if (typeof value === "string") checkString(desc, values, field, rules, value);
          else if (typeof value === "number" || typeof value === "bigint") checkInteger(field, rules, value);
          break;
        case "map":
          checkMap(field, rules, (value ?? {}) as Record<string, string>);
          break;
        case "list":
          checkList(field, rules, (value ?? []) as unknown[]);
          break;
        default:
          break;
      }
    } catch (err) {
      if (environment === "test" && rules.testHint !== "" && err instanceof ConnectError) throw validationError(field.name, `${err.rawMessage} ${rules.testHint}`);
      throw err;
    }
  }
  checkPresence(desc, values);
}

/** Whether a request carries a field: set, and for a field without `optional`, not empty. */
const sent = (field: DescField, value: unknown) => value !== undefined && (field.proto.proto3Optional || value !== "");

/** exclusive_group (exactly one of the group is sent) and requires (a field's companions come with it). */
function checkPresence(desc: DescMessage, values: Record<string, unknown>): void {
  const groups = new Map<string, { field: DescField; rules: FieldRules }[]>();
  for (const r of rulesOf(desc)) if (r.rules.exclusiveGroup) groups.set(r.rules.exclusiveGroup, [...(groups.get(r.rules.exclusiveGroup) ?? []), r]);
  const noneSent = (members: readonly { field: DescField }[]) => members.every((m) => !sent(m.field, values[m.field.localName]));
  for (const { field, rules } of rulesOf(desc)) {
    if (!sent(field, values[field.localName])) continue;
    for (const name of rules.requires) {
      const other = desc.fields.find((f) => f.name === name);
      if (!other || sent(other, values[other.localName])) continue;
      // The first of a group none of which was sent is said as the group's (an empty network beside
      // an asset is told what an absent one is); any other companion, as missing.
      const group = [...groups.values()].find((members) => members[0]?.field === other);
      if (group && noneSent(group)) throw groupMissing(group);
      throw validationError(name, `"${name}" is missing: "${field.name}" needs it.`);
    }
  }
  for (const members of groups.values()) {
    const fields = members.map((m) => m.field);
    const given = fields.filter((f) => sent(f, values[f.localName]));
    if (given.length === 0) throw groupMissing(members);
    if (given.length > 1) throw validationError(given[1]?.name ?? "", `Send ${fields.map((f) => `"${f.name}"`).join(" or ")}, not both: ${given.map((f) => `"${f.name}"`).join(" and ")} were sent.`);
  }
}

/**
 * A group none of which was sent, said as its first member missing, with that member's choices and
 * what would do instead: a create with no network is told the networks, and that payment_methods would do.
 */
function groupMissing(members: readonly { field: DescField; rules: FieldRules }[]): ConnectError {
  const [first, ...others] = members;
  if (!first) return validationError("", "A field is missing.");
  const set = first.rules.oneOf ? valueSets[first.rules.oneOf] : undefined;
  const choices = set && !set.dependsOn ? `: one of ${set.values.join(", ")}` : "";
  const instead = others.length > 0 ? `; or send ${others.map((o) => `"${o.field.name}"`).join(" or ")} instead` : "";
  return validationError(first.field.name, `"${first.field.name}" is missing or empty${choices}${instead}.`);
}

const cache = new WeakMap<DescMessage, readonly { field: DescField; rules: FieldRules }[]>();

/** A message's fields with rules, read once; a rule naming no known set fails at the first call, not silently. */
export function rulesOf(desc: DescMessage): readonly { field: DescField; rules: FieldRules }[] {
  let found = cache.get(desc);
  if (!found) {
    found = desc.fields.filter((f) => hasOption(f, fieldOption)).map((f) => ({ field: f, rules: getOption(f, fieldOption) }));
    for (const { field, rules } of found) {
      if (rules.oneOf !== "" && !valueSets[rules.oneOf]) throw new Error(`${field.parent.typeName}.${field.name}: no value set "${rules.oneOf}"`);
    }
    cache.set(desc, found);
  }
  return found;
}

const httpsUrl = new RegExp(httpsUrlPattern);
const length = (s: string) => [...s].length;

/** At most this much of a refused value is repeated in a message. */
const shown = (s: string) => JSON.stringify(length(s) > 40 ? `${[...s].slice(0, 40).join("")}…` : s);

function checkString(desc: DescMessage, values: Record<string, unknown>, field: DescField, rules: FieldRules, value: string): void {
  const name = field.name;
  const set = rules.oneOf ? (valueSets[rules.oneOf] as ValueSet) : undefined;
  // A field without `optional` cannot tell "sent empty" from "not sent": both are "missing or empty".
  if (value === "" && !field.proto.proto3Optional) {
    if ((rules.minLen ?? 0) > 0) throw validationError(name, `"${name}" is missing or empty${hint(rules, set)}.`);
    return;
  }
  const n = length(value);
  const { minLen, maxLen } = rules;
  if (n === 0 && (minLen ?? 0) > 0) throw validationError(name, `"${name}" must not be empty${hint(rules, set)}.`);
  if ((minLen !== undefined && n < minLen) || (maxLen !== undefined && n > maxLen)) {
    throw validationError(
      name,
      minLen !== undefined && maxLen !== undefined
        ? `"${name}" must be ${minLen} to ${maxLen} characters.`
        : maxLen !== undefined
          ? `"${name}" must be at most ${maxLen} characters.`
          : `"${name}" must be at least ${minLen} characters.`,
    );
  }
  if (set) checkOneOf(desc, values, name, set, value);
  if (rules.httpsUrl && !httpsUrl.test(value)) {
    throw validationError(name, `The URL is not allowed: ${httpsUrlFault(value)}.`);
  }
  if (rules.amount !== AmountRule.UNSPECIFIED) {
    const decimals = rules.amount === AmountRule.PRICE ? currencyOf(desc, values)?.decimals : assetOf(desc, values)?.decimals;
    const checked = rules.amount === AmountRule.OBSERVED ? checkAmount(value, decimals ?? Infinity) : checkRequestedAmount(value, decimals ?? Infinity);
    if (!checked.ok) {
      // The reason says what is wrong; a newcomer also needs to see what right looks like.
      const example = checked.problem === "decimals" && decimals !== undefined ? `: send a decimal string such as "${exampleAmount(decimals)}"` : "";
      // A price's places are its currency's (ISO 4217), not an asset's.
      const reason = checked.problem === "decimals" && rules.amount === AmountRule.PRICE ? `has more than ${decimals} decimal places, the most ${currencyOf(desc, values)?.code} has` : checked.reason;
      throw validationError(name, `"${name}" ${reason}${example}.`);
    }
  }
}

/** A list's length, and each item against the field's set. */
function checkList(field: DescField, rules: FieldRules, items: readonly unknown[]): void {
  const name = field.name;
  if (rules.maxItems !== undefined && items.length > rules.maxItems) throw validationError(name, `"${name}" takes at most ${rules.maxItems} items; got ${items.length}.`);
  if (rules.minItems !== undefined && items.length < rules.minItems) {
    throw validationError(name, items.length === 0 ? `"${name}" is missing or empty: send at least ${rules.minItems} item${rules.minItems === 1 ? "" : "s"}.` : `"${name}" takes at least ${rules.minItems} items; got ${items.length}.`);
  }
  const set = rules.oneOf ? (valueSets[rules.oneOf] as ValueSet) : undefined;
  if (!set) return;
  for (const item of items) {
    if (typeof item !== "string" || !set.values.includes(item)) {
      throw validationError(name, `"${name}" takes items from ${set.values.join(", ")}; got ${shown(String(item))}.`);
    }
  }
}

function hint(rules: FieldRules, set: ValueSet | undefined): string {
  if (rules.amount !== AmountRule.UNSPECIFIED) return ': send a decimal string such as "12.50"';
  if (set && !set.dependsOn) return `: one of ${set.values.join(", ")}`;
  return "";
}

function checkOneOf(desc: DescMessage, values: Record<string, unknown>, name: string, set: ValueSet, value: string): void {
  if (set.dependsOn) {
    const given = valueOfSet(desc, values, set.dependsOn.set);
    if (given !== undefined) {
      const allowed = set.dependsOn.valuesFor(given);
      if (!allowed.includes(value)) throw validationError(name, `"${name}" ${shown(value)} is not supported on ${given}; supported: ${allowed.join(", ")}.`);
      return;
    }
  }
  if (!set.values.includes(value)) throw validationError(name, `"${name}" must be one of ${set.values.join(", ")}; got ${shown(value)}.`);
}

/** The value of the request's field checked against `setName`, when it is one of that set. */
function valueOfSet(desc: DescMessage, values: Record<string, unknown>, setName: string): string | undefined {
  const owner = rulesOf(desc).find((r) => r.rules.oneOf === setName);
  const value = owner ? values[owner.field.localName] : undefined;
  return typeof value === "string" && valueSets[setName]?.values.includes(value) ? value : undefined;
}

/** The asset a request names by its network and asset fields, if it names one we accept. */
function assetOf(desc: DescMessage, values: Record<string, unknown>) {
  const network = valueOfSet(desc, values, "network");
  const asset = valueOfSet(desc, values, "asset");
  return network !== undefined && asset !== undefined ? findAsset(network, asset) : undefined;
}

/** The currency a request names by its field of the "currency" set, if it names one we accept. */
function currencyOf(desc: DescMessage, values: Record<string, unknown>) {
  const code = valueOfSet(desc, values, "currency");
  return code !== undefined ? findCurrency(code) : undefined;
}

function checkInteger(field: DescField, rules: FieldRules, value: number | bigint): void {
  const { min, max } = rules;
  const v = BigInt(value);
  if ((min !== undefined && v < min) || (max !== undefined && v > max)) {
    const name = field.name;
    throw validationError(
      name,
      min !== undefined && max !== undefined ? `"${name}" must be between ${min} and ${max}.` : min !== undefined ? `"${name}" must be at least ${min}.` : `"${name}" must be at most ${max}.`,
    );
  }
}

function checkMap(field: DescField, rules: FieldRules, value: Record<string, string>): void {
  const name = field.name;
  const pairs = Object.entries(value);
  if (rules.maxPairs !== undefined && pairs.length > rules.maxPairs) throw validationError(name, `"${name}" may hold at most ${rules.maxPairs} pairs.`);
  const { keyMinLen = 0, keyMaxLen, valueMaxLen } = rules;
  for (const [k, v] of pairs) {
    const n = length(k);
    if (n < keyMinLen || (keyMaxLen !== undefined && n > keyMaxLen)) {
      throw validationError(name, `"${name}" keys must be ${keyMinLen} to ${keyMaxLen ?? "any number of"} characters; ${shown(k)} is not.`);
    }
    if (valueMaxLen !== undefined && length(v) > valueMaxLen) {
      throw validationError(name, `"${name}" values must be at most ${valueMaxLen} characters; the value of ${shown(k)} is not.`);
    }
  }
}
