import { AdminError } from "../auth/admin.ts";
import { Merchant } from "../auth/entities.ts";
import { isEnvironment, type Environment } from "../auth/keys.ts";
import { checkRequestedAmount } from "../vocabulary/amount.ts";
import { assetsOn, findAsset, networks, notOfferedReason } from "../vocabulary/assets.ts";
import type { EntityManager } from "../platform/db.ts";
import { newId } from "../platform/ids.ts";
import { QrConfiguration } from "./entities.ts";
import { acceptedPairs } from "./store.ts";

/** Creation and disabling of QR configurations (admin CLI). */

export interface QrInput {
  merchantId: string;
  environment: string;
  label: string;
  network?: string | undefined;
  asset?: string | undefined;
  amount?: string | undefined;
}

export interface CheckedQrInput {
  environment: Environment;
  label: string;
  network: string | null;
  asset: string | null;
  amount: string | null;
}

const labelMax = 100;
const controlCharacters = /[\u0000-\u001f\u007f-\u009f]/;

/** The checked, normalized input, or an AdminError naming the first problem. Pure: the CLI runs it before the database starts. */
export function checkQrInput(input: Omit<QrInput, "merchantId">): CheckedQrInput {
  const { environment } = input;
  if (!isEnvironment(environment)) throw new AdminError(`--environment must be test or live, got "${environment}"`);
  const label = input.label.trim();
  // Characters as PostgreSQL's varchar(100) counts them (code points), not UTF-16 units.
  const length = [...label].length;
  if (length === 0 || length > labelMax) throw new AdminError(`--label must be 1 to ${labelMax} characters, got ${length}`);
  if (controlCharacters.test(label)) throw new AdminError("--label must be one line of text, without control characters");
  const network = input.network?.trim() || null;
  const asset = input.asset?.trim() || null;
  const amount = input.amount?.trim() || null;
  if (network !== null && !networks.includes(network)) throw new AdminError(`unknown network "${network}"; one of: ${networks.join(", ")}`);
  if (asset !== null && network === null) throw new AdminError("--asset requires --network");
  if (amount !== null && asset === null) throw new AdminError("--amount requires --asset (and --network)");
  if (network !== null && asset !== null) {
    const info = findAsset(network, asset);
    if (!info) throw new AdminError(`unknown asset "${asset}" on ${network}; one of: ${assetsOn(network).join(", ")}`);
    const why = notOfferedReason(info, environment);
    if (why !== undefined) throw new AdminError(`--asset: ${why}`);
    if (amount !== null) {
      const check = checkRequestedAmount(amount, info.decimals);
      if (!check.ok) throw new AdminError(`--amount ${check.reason}`);
    }
  }
  return { environment, label, network, asset, amount };
}

export async function createQrConfiguration(em: EntityManager, input: QrInput) {
  const checked = checkQrInput(input);
  const merchant = await em.findOne(Merchant, { id: input.merchantId });
  if (!merchant) throw new AdminError(`no merchant ${input.merchantId}`);
  const row = {
    id: newId("qr"),
    merchant: input.merchantId,
    ...checked,
    createdAt: new Date(),
    disabledAt: null,
  };
  await em.insert(QrConfiguration, row);
  return {
    qr_public_id: row.id,
    merchant: input.merchantId,
    environment: row.environment,
    label: row.label,
    accepted: acceptedPairs(row.network, row.asset),
    amount: row.amount,
    created_at: row.createdAt.toISOString(),
  };
}

/** Disables a configuration at once: its public route answers 404 from now on. Disabling twice keeps the first time. */
export async function disableQrConfiguration(em: EntityManager, id: string) {
  const row = await em.findOne(QrConfiguration, { id });
  if (!row) throw new AdminError(`no QR configuration ${id}`);
  const disabledAt = row.disabledAt ?? new Date();
  if (!row.disabledAt) await em.nativeUpdate(QrConfiguration, { id }, { disabledAt });
  return { qr_public_id: id, disabled_at: disabledAt.toISOString() };
}

/** A merchant's QR configurations, newest first, disabled ones too. */
export async function listQrConfigurations(em: EntityManager, merchantId: string) {
  const merchant = await em.findOne(Merchant, { id: merchantId });
  if (!merchant) throw new AdminError(`no merchant ${merchantId}`);
  const rows = await em.find(QrConfiguration, { merchant: merchantId }, { orderBy: { createdAt: "desc", id: "desc" } });
  return rows.map((row) => ({
    qr_public_id: row.id,
    environment: row.environment,
    label: row.label,
    accepted: acceptedPairs(row.network ?? null, row.asset ?? null),
    amount: row.amount ?? null,
    created_at: row.createdAt.toISOString(),
    disabled_at: row.disabledAt ? row.disabledAt.toISOString() : null,
  }));
}
