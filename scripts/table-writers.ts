// Each of the tables below has one module that writes it (docs: ../shared/HOUSE.md, "Every write to a
// table in one file"): what can happen to a row is then read in one place, and its statements are
// changed together. This finds, in services/ (migrations aside: they are the schema's history), every
// statement or ORM call that writes one of them from another file.
// Usage: node scripts/table-writers.ts [ROOT]; prints each stray write, exit 1 if any.
import { readdirSync, readFileSync, existsSync } from "node:fs";
import path from "node:path";

/** The tables with one writer, and that writer (relative to the root). */
export const tableOwners: Readonly<Record<string, string>> = {
  webhook_deliveries: "services/delivery/webhook-deliveries.ts",
  webhook_attempts: "services/delivery/webhook-deliveries.ts",
  webhook_endpoint_slots: "services/delivery/shared-gate.ts",
  webhook_endpoint_circuits: "services/delivery/shared-gate.ts",
  api_keys: "services/auth/api-keys.ts",
  api_key_last_uses: "services/auth/key-last-use.ts",
  merchants: "services/auth/merchants.ts",
};

/** The ORM entities mapped to those tables (services/webhooks/delivery-entities.ts, services/auth/entities.ts). */
const entityTables: Readonly<Record<string, string>> = {
  WebhookDeliveryRecord: "webhook_deliveries",
  WebhookAttemptRecord: "webhook_attempts",
  ApiKey: "api_keys",
  ApiKeyLastUse: "api_key_last_uses",
  Merchant: "merchants",
};

/** One write of an owned table outside its owner. */
export interface StrayWrite {
  file: string;
  line: number;
  table: string;
  text: string;
}

function sourceFiles(dir: string): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) return e.name === "migrations" ? [] : sourceFiles(p);
    return /\.(ts|mts|js|mjs)$/.test(e.name) && !e.name.endsWith(".d.ts") ? [p] : [];
  });
}

const tableNames = Object.keys(tableOwners).join("|");
// A write in SQL: the statement's verb then the table (a day's partition or the legacy one counts as
// the table), over line breaks and quotes. `update` alone in prose is not followed by a table name.
const sqlWrite = new RegExp(String.raw`\b(?:insert\s+into|update|delete\s+from|truncate(?:\s+table)?|merge\s+into)\s+(?:only\s+)?"?(${tableNames})(?:_legacy|_p\d{8})?"?(?![\w])`, "gi");
// A write through the ORM: em.nativeUpdate(WebhookDeliveryRecord, …), em.create(…), and the like.
const ormWrite = new RegExp(String.raw`\b(?:nativeInsert|nativeUpdate|nativeDelete|insertMany|upsert|upsertMany|create|persist|remove)\(\s*(${Object.keys(entityTables).join("|")})\b`, "g");

/** The writes of owned tables in services/ made by files other than their owners. */
export function strayWrites(root: string): StrayWrite[] {
  const out: StrayWrite[] = [];
  for (const file of sourceFiles(path.join(root, "services"))) {
    const rel = path.relative(root, file).split(path.sep).join("/");
    const text = readFileSync(file, "utf8");
    const lineOf = (index: number) => text.slice(0, index).split("\n").length;
    for (const [re, tableOf] of [
      [sqlWrite, (m: RegExpMatchArray) => m[1]!.toLowerCase()],
      [ormWrite, (m: RegExpMatchArray) => entityTables[m[1]!]!],
    ] as const) {
      for (const m of text.matchAll(re)) {
        const table = tableOf(m);
        if (tableOwners[table] === rel) continue;
        out.push({ file: rel, line: lineOf(m.index ?? 0), table, text: m[0].replace(/\s+/g, " ") });
      }
    }
  }
  return out;
}

export function describeStray(w: StrayWrite): string {
  return `${w.file}:${w.line}: "${w.text}" writes ${w.table}, which only ${tableOwners[w.table]} writes: call a function of it instead`;
}

if (import.meta.main) {
  const stray = strayWrites(path.resolve(process.argv[2] ?? path.join(import.meta.dirname, "..")));
  if (stray.length === 0) console.log("every owned table is written by its owner alone");
  for (const w of stray) console.log(describeStray(w));
  process.exit(stray.length === 0 ? 0 : 1);
}
