// Admin CLI: JSON on stdout, logs on stderr, one line and a non-zero exit on bad input.
//   admin merchant create --name NAME
//   admin api-key create --merchant ID --environment test|live --scopes s1,s2
//   admin api-key revoke --id ID
import { parseArgs } from "node:util";
import { AdminError, createApiKey, createMerchant, revokeApiKey } from "../auth/admin.ts";
import { isEnvironment, isScope, scopes as allScopes, type Scope } from "../auth/keys.ts";
import { ConfigError, loadConfig } from "../platform/config.ts";
import { migrate } from "../platform/db.ts";
import { openDatabase } from "./database.ts";
import { createLogger } from "../platform/logger.ts";
import { resolveDatabase } from "./resources.ts";

const usage = `usage:
  admin merchant create --name NAME
  admin api-key create --merchant ID --environment test|live --scopes ${allScopes.join(",")}
  admin api-key revoke --id ID`;

function required(values: Record<string, string | undefined>, name: string): string {
  const value = values[name];
  if (value === undefined || value.trim() === "") throw new AdminError(`--${name} is required\n${usage}`);
  return value.trim();
}

async function main(argv: string[]): Promise<unknown> {
  const { positionals, values } = parseArgs({
    args: argv,
    allowPositionals: true,
    strict: true,
    options: {
      name: { type: "string" },
      merchant: { type: "string" },
      environment: { type: "string" },
      scopes: { type: "string" },
      id: { type: "string" },
    },
  });
  const command = positionals.join(" ");
  if (!["merchant create", "api-key create", "api-key revoke"].includes(command)) {
    throw new AdminError(command ? `unknown command "${command}"\n${usage}` : usage);
  }
  // Arguments are checked before anything is started or written.
  let work: (em: Parameters<typeof createMerchant>[0]) => Promise<unknown>;
  if (command === "merchant create") {
    const name = required(values, "name");
    work = (em) => createMerchant(em, name);
  } else if (command === "api-key create") {
    const merchant = required(values, "merchant");
    const environment = required(values, "environment");
    if (!isEnvironment(environment)) throw new AdminError(`--environment must be test or live, got "${environment}"`);
    const scopes = required(values, "scopes").split(",").map((s) => s.trim()).filter(Boolean);
    const unknown = scopes.filter((s) => !isScope(s));
    if (unknown.length > 0 || scopes.length === 0) {
      throw new AdminError(`--scopes takes a comma-separated list of: ${allScopes.join(", ")}${unknown.length ? `; unknown: ${unknown.join(", ")}` : ""}`);
    }
    work = (em) => createApiKey(em, merchant, environment, [...new Set(scopes)] as Scope[]);
  } else {
    const id = required(values, "id");
    work = (em) => revokeApiKey(em, id);
  }
  const config = loadConfig();
  const logger = createLogger(process.env.LOG_LEVEL ? config.logLevel : "warn", 2);
  const resources = await resolveDatabase(config, logger);
  const db = await openDatabase(resources.databaseUrl, 2);
  try {
    await migrate(db);
    return await work(db.em.fork());
  } finally {
    await db.close();
    await resources.stopDatabase();
  }
}

try {
  const result = await main(process.argv.slice(2));
  process.stdout.write(JSON.stringify(result, null, 2) + "\n");
} catch (err) {
  const known = err instanceof AdminError || err instanceof ConfigError || (err as { code?: string }).code?.startsWith("ERR_PARSE_ARGS");
  process.stderr.write(`admin: ${known ? (err as Error).message : `failed: ${(err as Error).message}`}\n`);
  process.exitCode = known ? 2 : 1;
}
