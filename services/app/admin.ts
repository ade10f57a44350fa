// Admin CLI: JSON on stdout, logs on stderr, one line and a non-zero exit on bad input.
//   admin merchant create --name NAME
//   admin merchant list
//   admin merchant show --id ID
//   admin merchant update --id ID [--name NAME] [--logo-url URL] [--brand-color #rrggbb]
//   admin api-key create --merchant ID --environment test|live --scopes s1,s2
//   admin api-key revoke --id ID
//   admin api-key list --merchant ID
//   admin address-source set --merchant ID --environment test|live --network NET --xpub KEY
//   admin address-source show --merchant ID
//   admin address import --merchant ID --environment test|live --network NET --file FILE
//   admin internal-credential create --name NAME --roles observe|admin|observe,admin --environment test|live [--networks N1,N2]
//   admin internal-credential revoke --id ID
//   admin internal-credential list
//   admin site-credential create --merchant ID --environment test|live [--allowed-origin ORIGIN ...]
//   admin site-credential revoke --id ID
//   admin site-credential list --merchant ID
//   admin cashier-session create --merchant ID --environment test|live --cashier NAME [--terminal LABEL] [--ttl-minutes 720]
//   admin cashier-session revoke --id ID
//   admin cashier-session list --merchant ID
//   admin qr create --merchant ID --environment test|live --label TEXT [--network NET [--asset ASSET [--amount X]]]
//   admin qr disable --id ID
//   admin qr list --merchant ID
//   admin endpoint enable --id ID [--recover-since TIME [--force]]   (with --recover-since: the running service's AdminService)
//   admin endpoint delete --id ID
//   admin endpoint rotate-secret --id ID [--overlap SECONDS]   (the running service's AdminService: RPC_URL, INTERNAL_CREDENTIAL)
//   admin secrets reseal   (SECRET_ENCRYPTION_KEY new, SECRET_ENCRYPTION_KEY_PREVIOUS old)
//   admin dashboard-link --merchant ID --environment test|live [--scopes s1,s2] [--read-only] [--ttl 24h]
//   admin dashboard-link revoke --id ID / dashboard-sessions list|revoke --merchant ID [--id ID]
import { readFileSync } from "node:fs";
import { timestampDate, timestampFromDate } from "@bufbuild/protobuf/wkt";
import { ConnectError } from "@connectrpc/connect";
import { adminClient, parseTime, remoteError, RemoteError } from "../admin/client.ts";
import { parseArgs } from "node:util";
import { checkAccountKey, importAddresses, readAddressList, setAccountKey, showSources } from "../addresses/admin.ts";
import {
  AdminError,
  createApiKey,
  checkCredentialNetworks,
  createInternalCredential,
  createMerchant,
  listApiKeys,
  listInternalCredentials,
  listMerchants,
  showMerchant,
  updateMerchant,
  revokeApiKey,
  revokeInternalCredential,
} from "../auth/admin.ts";
import { settleCredentialChanges } from "../auth/credential-cache.ts";
import { isInternalRole } from "../auth/keys.ts";
import type { InternalRole } from "../auth/principal.ts";
import { isEnvironment, isScope, scopes as allScopes, type Environment, type Scope } from "../auth/keys.ts";
import { followedNetworks, networks } from "../vocabulary/assets.ts";
import { anyAsset, applyAcceptedMethods, applyConfirmationRule, applyPriceSpread, applyTolerance, readPolicy } from "../policy/policy.ts";
import { checkOrigins, createSiteCredential, listSiteCredentials, revokeSiteCredential } from "../site/credentials.ts";
import { checkLabel, createCashierSession, listCashierSessions, revokeCashierSession, ttlMinutes } from "../terminal/sessions.ts";
import { checkQrInput, createQrConfiguration, disableQrConfiguration, listQrConfigurations } from "../qr/admin.ts";
import { deleteEndpoint, enableEndpoint } from "../webhooks/operations.ts";
import { merchantEndpoints } from "../webhooks/store.ts";
import { ConfigError, loadConfig } from "../platform/config.ts";
import { migrate } from "../platform/db.ts";
import { openDatabase } from "./database.ts";
import { createLogger } from "../platform/logger.ts";
import { cliDatabase, resolveDatabase } from "./resources.ts";
import { loadOrCreateKey } from "../platform/secret-key.ts";
import { resealSecrets, SecretKeyMismatch } from "../webhooks/key-check.ts";
import { SecretBox } from "../platform/secrets.ts";
import { createDashboardLink, dashboardLinkUrl, defaultLinkScopes, listDashboardSessions, revokeDashboardLink, revokeDashboardSessions } from "../dashboard/sessions.ts";

const usage = `usage:
  admin merchant create --name NAME
  admin merchant list
  admin merchant show --id ID
  admin merchant update --id ID [--name NAME] [--logo-url https://…] [--brand-color #rrggbb]
      (the shop's name and look on its dashboard, checkout and terminal pages: the logo an https URL
       of at most 2048 characters that shoppers' browsers load, never this service; the colour six hex
       digits, its text drawn black or white, whichever contrasts more; "" removes a logo or colour)
  admin api-key create --merchant ID --environment test|live --scopes ${allScopes.join(",")}
  admin api-key revoke --id ID
  admin api-key list --merchant ID
  admin address-source set --merchant ID --environment test|live --network ${networks.join("|")} --xpub ACCOUNT_XPUB
      (bitcoin: give it with its origin as your wallet exports it, [fingerprint/84'/0'/0']zpub…, and a
       refund can be sent from the intent's own outputs with a PSBT your hardware wallet signs)
  admin address-source show --merchant ID
  admin address import --merchant ID --environment test|live --network ${networks.join("|")} --file FILE
      (one address a line; blank lines and lines starting with # are skipped)
  admin internal-credential create --name NAME --roles observe|admin|observe,admin --environment test|live [--networks ${networks.join(",")}]
      (observe: a chain watcher's calls; admin: AdminService; in that environment. --networks: the networks
       it may speak for (claim, report, record on); without it, only those no built-in watcher follows
       (${networks.filter((n) => !(followedNetworks as readonly string[]).includes(n)).join(", ")}))
  admin internal-credential revoke --id ID
  admin internal-credential list
  admin site-credential create --merchant ID --environment test|live [--allowed-origin https://shop.example ...]
  admin site-credential revoke --id ID
  admin site-credential list --merchant ID
  admin cashier-session create --merchant ID --environment test|live --cashier NAME [--terminal LABEL] [--ttl-minutes ${ttlMinutes.default}]
  admin cashier-session revoke --id ID
  admin cashier-session list --merchant ID
  admin qr create --merchant ID --environment test|live --label TEXT [--network NET [--asset ASSET [--amount X]]]
      (no --network: every supported pair; --amount fixes the amount in the one --asset)
  admin qr disable --id ID
  admin qr list --merchant ID
  admin policy show --merchant ID --environment test|live
  admin policy confirmations --merchant ID --environment test|live --network NET [--asset ASSET|*] --confirmations N
        [--below AMOUNT --below-confirmations N] [--allow-unconfirmed] [--remove]
      (what a payment needs to count, 1-500, for the network's every asset (*, the default) or one asset; below
       an amount of that asset, fewer; 0 only with --allow-unconfirmed; fixed on each intent when it is created)
  admin policy tolerance --merchant ID --environment test|live --bps N
      (0-1000: funds this many basis points below the requested amount still confirm an intent; 50 = 0.5 %)
  admin policy price-spread --merchant ID --environment test|live --bps N
      (0-1000: basis points taken off the quoted rate of new fiat-priced intents; their shoppers pay that much more)
  admin policy accepted-methods --merchant ID --environment test|live (--methods base.USDC,ethereum.ETH,... | --reset)
      (what a create with payment_methods "all" offers, of what a watcher follows; --reset: every one followed)
  admin endpoint enable --id WEBHOOK_ENDPOINT_ID [--recover-since 2026-01-01T00:00:00Z [--force]]
      (a disabled endpoint, by the merchant or after failing: enabled again within the cap of
       enabled endpoints; deliveries that failed meanwhile stay failed, to be replayed. With
       --recover-since, it also gets a delivery of every event since then that it takes and has
       none of yet (what it missed while disabled), exactly once however often it is run, in event
       order, a page at a time as it takes them (the scheduler enqueues the pages after the first);
       over WEBHOOK_RECOVERY_MAX_DAYS or WEBHOOK_RECOVERY_MAX_EVENTS it is refused unless --force.
       That calls the running service at RPC_URL with the internal credential in INTERNAL_CREDENTIAL)
  admin endpoint delete --id WEBHOOK_ENDPOINT_ID
      (a disabled endpoint, with its deliveries and their attempts; the events stay)
  admin endpoint rotate-secret --id WEBHOOK_ENDPOINT_ID [--overlap SECONDS (0-604800, default 86400)]
      (calls the running service at RPC_URL with the internal credential in INTERNAL_CREDENTIAL;
       prints the new signing secret once)
  admin secrets reseal
      (re-encrypts every webhook signing secret under SECRET_ENCRYPTION_KEY, opening it with that key
       or SECRET_ENCRYPTION_KEY_PREVIOUS, and records the new key's check value; safe to run again)
  admin dashboard-link --merchant ID --environment test|live [--scopes s1,s2] [--read-only] [--ttl 24h (60s to 7d; s, m, h or d)]
      (a one-time sign-in link to the merchant's dashboard, printed once; its session gets the scopes
       named, by default the read ones: ${defaultLinkScopes.join(",")}. Written to the database as the
       other commands are, its URL under DASHBOARD_BASE_URL; with INTERNAL_CREDENTIAL set, issued by
       the running service at RPC_URL instead, with that credential's environment)
  admin dashboard-link revoke --id LINK_ID
      (unused, it can no longer be; used, its session ends at its next request)
  admin dashboard-sessions list --merchant ID
      (the merchant's open dashboard sessions: signed in with which key or link, last seen, expiry)
  admin dashboard-sessions revoke --merchant ID [--id SESSION_ID]
      (ends that session, or every session of the merchant, from its next request)`;

/** The endpoint operations speak the API's errors (not found, over the cap, wrong state); the CLI prints one line. */
function oneLine(err: unknown): never {
  throw err instanceof ConnectError ? new AdminError(err.rawMessage) : err;
}

const commands = [
  "merchant create",
  "merchant list",
  "merchant show",
  "merchant update",
  "api-key create",
  "api-key revoke",
  "api-key list",
  "address-source set",
  "address-source show",
  "address import",
  "internal-credential create",
  "internal-credential revoke",
  "internal-credential list",
  "site-credential create",
  "site-credential revoke",
  "site-credential list",
  "cashier-session create",
  "cashier-session revoke",
  "cashier-session list",
  "qr create",
  "qr list",
  "endpoint enable",
  "endpoint delete",
  "policy show",
  "policy confirmations",
  "policy tolerance",
  "policy price-spread",
  "policy accepted-methods",
  "qr disable",
  "endpoint rotate-secret",
  "secrets reseal",
  "dashboard-link",
  "dashboard-link revoke",
  "dashboard-sessions list",
  "dashboard-sessions revoke",
];

type Args = Record<string, string | boolean | string[] | undefined>;

function required(values: Args, name: string): string {
  const value = values[name];
  if (typeof value !== "string" || value.trim() === "") throw new AdminError(`--${name} is required: npm run -s admin -- help lists each command's options`);
  return value.trim();
}

function environmentOf(values: Args): Environment {
  const environment = required(values, "environment");
  if (!isEnvironment(environment)) throw new AdminError(`--environment must be test or live, got "${environment}"`);
  return environment;
}

function networkOf(values: Args): string {
  const network = required(values, "network");
  if (!networks.includes(network)) throw new AdminError(`unknown network "${network}"; one of: ${networks.join(", ")}`);
  return network;
}

/** A whole number given as --name (the policy checks its range). */
function count(values: Args, name: string): number {
  const value = values[name];
  if (typeof value !== "string" || !/^[0-9]{1,9}$/.test(value.trim())) throw new AdminError(`--${name} must be a whole number`);
  return Number(value.trim());
}

function readList(file: string): string {
  try {
    return readFileSync(file, "utf8");
  } catch (err) {
    throw new AdminError(`cannot read --file ${file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
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
      roles: { type: "string" },
      networks: { type: "string" },
      id: { type: "string" },
      network: { type: "string" },
      xpub: { type: "string" },
      file: { type: "string" },
      "allowed-origin": { type: "string", multiple: true },
      label: { type: "string" },
      asset: { type: "string" },
      amount: { type: "string" },
      cashier: { type: "string" },
      terminal: { type: "string" },
      "ttl-minutes": { type: "string" },
      overlap: { type: "string" },
      "recover-since": { type: "string" },
      force: { type: "boolean" },
      confirmations: { type: "string" },
      below: { type: "string" },
      "below-confirmations": { type: "string" },
      "allow-unconfirmed": { type: "boolean" },
      remove: { type: "boolean" },
      bps: { type: "string" },
      methods: { type: "string" },
      reset: { type: "boolean" },
      "read-only": { type: "boolean" },
      ttl: { type: "string" },
      "logo-url": { type: "string" },
      "brand-color": { type: "string" },
    },
  });
  const command = positionals.join(" ");
  if (!commands.includes(command)) {
    throw new AdminError(`${command ? `unknown command "${command}"` : "no command"}: npm run -s admin -- help lists the commands`);
  }
  if (command === "endpoint rotate-secret") return rotateSecret(required(values, "id"), values.overlap);
  let linkScopes: string[] = [];
  if (command === "dashboard-link" && values.scopes !== undefined) {
    linkScopes = values.scopes.split(",").map((s) => s.trim()).filter(Boolean);
    const unknown = linkScopes.filter((s) => !isScope(s));
    if (unknown.length > 0 || linkScopes.length === 0) throw new AdminError(`--scopes takes a comma-separated list of: ${allScopes.join(", ")}${unknown.length ? `; unknown: ${unknown.join(", ")}` : ""}`);
  }
  if (command === "dashboard-link" && process.env.INTERNAL_CREDENTIAL?.trim()) {
    return dashboardLink(required(values, "merchant"), environmentOf(values), values["read-only"] === true, values.ttl, linkScopes);
  }
  if (command !== "dashboard-link" && (values["read-only"] || values.ttl !== undefined)) throw new AdminError("--read-only and --ttl go only with dashboard-link");
  if (values.force && (command !== "endpoint enable" || values["recover-since"] === undefined)) throw new AdminError("--force goes only with endpoint enable --recover-since");
  if (command === "endpoint enable" && values["recover-since"] !== undefined) return enableAndRecover(required(values, "id"), values["recover-since"], values.force === true);
  // Arguments are checked before anything is started or written.
  let work: (em: Parameters<typeof createMerchant>[0]) => Promise<unknown>;
  if (command === "merchant create") {
    const name = required(values, "name");
    work = (em) => createMerchant(em, name);
  } else if (command === "merchant update") {
    const id = required(values, "id");
    const change = { name: values.name, logoUrl: values["logo-url"], brandColor: values["brand-color"] };
    if (change.name === undefined && change.logoUrl === undefined && change.brandColor === undefined) throw new AdminError("merchant update takes --name, --logo-url and/or --brand-color");
    work = (em) => updateMerchant(em, id, change);
  } else if (command === "merchant list") {
    work = (em) => listMerchants(em);
  } else if (command === "merchant show") {
    const id = required(values, "id");
    // What an operator looks for first: its keys (auth) and its webhook endpoints (webhooks).
    work = async (em) => {
      const merchant = await showMerchant(em, id);
      const endpoints = await merchantEndpoints(em, id);
      for (const [environment, shown] of Object.entries(merchant.environments)) {
        const own = endpoints.filter((e) => e.environment === environment);
        for (const status of ["enabled", "disabled"]) shown[`${status}_webhook_endpoints`] = own.filter((e) => e.status === status).length;
        shown.webhook_endpoints = own.map((e) => ({ id: e.id, url: e.url, status: e.status, enabled_events: e.enabledEvents, created_at: e.createdAt.toISOString() }));
      }
      return merchant;
    };
  } else if (command === "qr list") {
    const merchant = required(values, "merchant");
    work = (em) => listQrConfigurations(em, merchant);
  } else if (command === "policy show") {
    const owner = { merchantId: required(values, "merchant"), environment: environmentOf(values) };
    work = (em) => readPolicy(em, owner).catch(oneLine);
  } else if (command === "policy confirmations") {
    const owner = { merchantId: required(values, "merchant"), environment: environmentOf(values) };
    const remove = values.remove === true;
    const input = {
      network: networkOf(values),
      asset: values.asset?.trim() || anyAsset,
      confirmations: remove ? 1 : count(values, "confirmations"),
      belowAmount: values.below?.trim(),
      belowConfirmations: values["below-confirmations"] === undefined ? undefined : count(values, "below-confirmations"),
      allowUnconfirmed: values["allow-unconfirmed"] === true,
      remove,
    };
    work = (em) => applyConfirmationRule(em, owner, input).catch(oneLine);
  } else if (command === "policy tolerance") {
    const owner = { merchantId: required(values, "merchant"), environment: environmentOf(values) };
    const bps = count(values, "bps");
    work = (em) => applyTolerance(em, owner, bps).catch(oneLine);
  } else if (command === "policy price-spread") {
    const owner = { merchantId: required(values, "merchant"), environment: environmentOf(values) };
    const bps = count(values, "bps");
    work = (em) => applyPriceSpread(em, owner, bps).catch(oneLine);
  } else if (command === "policy accepted-methods") {
    const owner = { merchantId: required(values, "merchant"), environment: environmentOf(values) };
    if ((values.reset === true) === (values.methods !== undefined)) throw new AdminError("policy accepted-methods takes --methods network.asset,... or --reset");
    const methods = values.reset === true ? null : (values.methods as string).split(",").map((m) => m.trim()).filter(Boolean);
    work = (em) => applyAcceptedMethods(em, owner, methods).catch(oneLine);
  } else if (command === "endpoint enable") {
    const id = required(values, "id");
    work = (em) => enableEndpoint(em, id).catch(oneLine);
  } else if (command === "endpoint delete") {
    const id = required(values, "id");
    work = (em) => deleteEndpoint(em, id).catch(oneLine);
  } else if (command === "api-key create") {
    const merchant = required(values, "merchant");
    const environment = environmentOf(values);
    const scopes = required(values, "scopes").split(",").map((s) => s.trim()).filter(Boolean);
    const unknown = scopes.filter((s) => !isScope(s));
    if (unknown.length > 0 || scopes.length === 0) {
      throw new AdminError(`--scopes takes a comma-separated list of: ${allScopes.join(", ")}${unknown.length ? `; unknown: ${unknown.join(", ")}` : ""}`);
    }
    work = (em) => createApiKey(em, merchant, environment, [...new Set(scopes)] as Scope[]);
  } else if (command === "dashboard-link") {
    const merchantId = required(values, "merchant");
    const environment = environmentOf(values);
    const ttlSeconds = ttlOf(values.ttl);
    const readOnly = values["read-only"] === true;
    const base = loadConfig().dashboardBaseUrl;
    work = async (em) => {
      const link = await createDashboardLink(em, { merchantId, environment, readOnly, ttlSeconds, scopes: linkScopes }).catch(oneLine);
      return { id: link.id, merchant: merchantId, environment, scopes: link.scopes, read_only: readOnly, url: dashboardLinkUrl(base, link.token), expires_at: link.expiresAt.toISOString() };
    };
  } else if (command === "dashboard-link revoke") {
    const id = required(values, "id");
    work = (em) => revokeDashboardLink(em, id).catch(oneLine);
  } else if (command === "dashboard-sessions list") {
    const merchant = required(values, "merchant");
    work = (em) => listDashboardSessions(em, merchant);
  } else if (command === "dashboard-sessions revoke") {
    const merchant = required(values, "merchant");
    const id = typeof values.id === "string" && values.id.trim() !== "" ? values.id.trim() : undefined;
    work = (em) => revokeDashboardSessions(em, merchant, id).catch(oneLine);
  } else if (command === "api-key revoke") {
    const id = required(values, "id");
    work = (em) => revokeApiKey(em, id);
  } else if (command === "address-source set") {
    const merchant = required(values, "merchant");
    const environment = environmentOf(values);
    const network = networkOf(values);
    // A refused key (a private one above all) is reported without starting the database.
    const key = required(values, "xpub");
    checkAccountKey(environment, network, key);
    work = (em) => setAccountKey(em, merchant, environment, network, key);
  } else if (command === "address-source show") {
    const merchant = required(values, "merchant");
    work = (em) => showSources(em, merchant);
  } else if (command === "address import") {
    const merchant = required(values, "merchant");
    const environment = environmentOf(values);
    const network = networkOf(values);
    const text = readList(required(values, "file"));
    readAddressList(environment, network, text); // a bad line fails here, before the database starts
    work = (em) => importAddresses(em, merchant, environment, network, text);
  } else if (command === "internal-credential create") {
    const name = required(values, "name");
    const roles = required(values, "roles").split(",").map((r) => r.trim());
    const bad = roles.find((r) => !isInternalRole(r));
    if (bad !== undefined) throw new AdminError(`--roles takes observe and/or admin, got "${bad}"`);
    const environment = environmentOf(values);
    const networks = checkCredentialNetworks(values.networks?.split(",").map((n) => n.trim()));
    work = (em) => createInternalCredential(em, name, roles as InternalRole[], environment, { networks });
  } else if (command === "internal-credential revoke") {
    const id = required(values, "id");
    work = (em) => revokeInternalCredential(em, id);
  } else if (command === "site-credential create") {
    const merchant = required(values, "merchant");
    const environment = environmentOf(values);
    const origins = checkOrigins(values["allowed-origin"] ?? []);
    work = (em) => createSiteCredential(em, merchant, environment, origins);
  } else if (command === "site-credential revoke") {
    const id = required(values, "id");
    work = (em) => revokeSiteCredential(em, id);
  } else if (command === "site-credential list") {
    const merchant = required(values, "merchant");
    work = (em) => listSiteCredentials(em, merchant);
  } else if (command === "api-key list") {
    const merchant = required(values, "merchant");
    work = (em) => listApiKeys(em, merchant);
  } else if (command === "internal-credential list") {
    work = (em) => listInternalCredentials(em);
  } else if (command === "cashier-session create") {
    const merchantId = required(values, "merchant");
    const environment = environmentOf(values);
    const cashier = checkLabel("cashier", required(values, "cashier"));
    const terminal = typeof values.terminal === "string" ? checkLabel("terminal", values.terminal) : undefined;
    const ttl = values["ttl-minutes"];
    if (ttl !== undefined && !/^\d+$/.test(ttl.trim())) throw new AdminError(`--ttl-minutes must be a whole number of minutes, got "${ttl}"`);
    const ttlMinutes = ttl === undefined ? undefined : Number(ttl.trim());
    work = (em) => createCashierSession(em, { merchantId, environment, cashier, terminal, ttlMinutes });
  } else if (command === "cashier-session revoke") {
    const id = required(values, "id");
    work = (em) => revokeCashierSession(em, id);
  } else if (command === "cashier-session list") {
    const merchant = required(values, "merchant");
    work = (em) => listCashierSessions(em, merchant);
  } else if (command === "qr create") {
    const merchant = required(values, "merchant");
    const input = { environment: environmentOf(values), label: required(values, "label"), network: values.network, asset: values.asset, amount: values.amount };
    checkQrInput(input); // a bad label, pair or amount fails here, before the database starts
    work = (em) => createQrConfiguration(em, { merchantId: merchant, ...input });
  } else if (command === "qr disable") {
    const id = required(values, "id");
    work = (em) => disableQrConfiguration(em, id);
  } else {
    const config = loadConfig();
    if (!config.secretEncryptionKeyPrevious) throw new AdminError("secrets reseal: set SECRET_ENCRYPTION_KEY to the new key and SECRET_ENCRYPTION_KEY_PREVIOUS to the old one");
    const box = SecretBox.fromMasterKeys(loadOrCreateKey(config.secretEncryptionKey, config.dataDir), config.secretEncryptionKeyPrevious);
    work = (em) => resealSecrets(em, box);
  }
  const database = cliDatabase(loadConfig());
  const config = database.config;
  const logger = createLogger(process.env.LOG_LEVEL ? config.logLevel : "warn", 2);
  const resources = await resolveDatabase(config, logger);
  usedDatabase = database.describe(resources.embeddedDatabase);
  const db = await openDatabase(resources.databaseUrl, 2);
  try {
    await migrate(db);
    const result = await work(db.em.fork());
    // "Revoked" means refused from the next request on, in every running process: wait until each
    // has dropped the credential from its cache.
    if (command.endsWith(" revoke")) {
      const cut = await settleCredentialChanges(resources.databaseUrl);
      if (cut.length > 0) {
        logger.warn({ backends: cut }, "service processes did not confirm the revocation in time; their LISTEN connections were cut, so they stop using cached credentials");
      }
    }
    return result;
  } finally {
    await db.close();
    await resources.stopDatabase();
  }
}

async function rotateSecret(endpointId: string, overlapRaw: string | undefined) {
  const overlap = overlapRaw?.trim();
  if (overlap !== undefined && !/^\d{1,7}$/.test(overlap)) throw new AdminError(`--overlap must be whole seconds from 0 to 604800, got "${overlapRaw}"`);
  const config = loadConfig();
  const { client, headers } = adminClient(config);
  try {
    const res = await client.rotateSigningSecret({ endpointId, overlapSeconds: overlap === undefined ? undefined : Number(overlap) }, { headers, timeoutMs: 30_000 });
    return {
      endpoint_id: res.endpointId,
      signing_secret: res.signingSecret,
      previous_secret_expires_at: res.previousSecretExpiresAt ? timestampDate(res.previousSecretExpiresAt).toISOString() : null,
    };
  } catch (err) {
    throw remoteError(err, config.rpcUrl);
  }
}

const ttlUnits: Readonly<Record<string, number>> = { "": 1, s: 1, m: 60, h: 3600, d: 86_400 };

/** --ttl in seconds (0: the default). */
function ttlOf(ttlRaw: string | undefined): number {
  const ttl = ttlRaw === undefined ? undefined : /^(\d{1,7})([smhd]?)$/.exec(ttlRaw.trim());
  if (ttlRaw !== undefined && !ttl) throw new AdminError(`--ttl must be a duration like 600, 30m, 24h or 7d, got "${ttlRaw}"`);
  return ttl ? Number(ttl[1]) * (ttlUnits[ttl[2] ?? ""] ?? 1) : 0;
}

/** Issues a one-time dashboard link through the running service's AdminService; the URL (with its token) is printed once. */
async function dashboardLink(merchant: string, environment: Environment, readOnly: boolean, ttlRaw: string | undefined, scopes: string[]) {
  const ttlSeconds = ttlOf(ttlRaw);
  const config = loadConfig();
  const { client, headers } = adminClient(config);
  try {
    const res = await client.createDashboardLink({ merchant, environment, readOnly, ttlSeconds, scopes }, { headers, timeoutMs: 30_000 });
    return { id: res.linkId, merchant, environment, scopes: res.scopes, read_only: readOnly, url: res.url, expires_at: res.expiresAt ? timestampDate(res.expiresAt).toISOString() : null };
  } catch (err) {
    throw remoteError(err, config.rpcUrl);
  }
}

/** Enables the endpoint and recovers what it missed since the time, through the running service's AdminService. */
async function enableAndRecover(endpointId: string, sinceRaw: string, force: boolean) {
  const since = parseTime(sinceRaw);
  if (!since) throw new AdminError(`--recover-since must be a time like 2026-01-01T00:00:00Z, got "${sinceRaw}"`);
  const config = loadConfig();
  const { client, headers } = adminClient(config);
  try {
    const res = await client.enableWebhookEndpoint({ endpointId, recoverSince: timestampFromDate(since), force }, { headers, timeoutMs: 60_000 });
    return {
      id: res.endpointId,
      status: res.status,
      enabled_at: res.enabledAt ? timestampDate(res.enabledAt).toISOString() : null,
      recover_since: since.toISOString(),
      recovered: res.recovered,
      enqueued: res.enqueued,
      recovery_id: res.recoveryId ?? null,
      first_event_id: res.firstEventId ?? null,
      last_event_id: res.lastEventId ?? null,
    };
  } catch (err) {
    throw remoteError(err, config.rpcUrl);
  }
}

const args = process.argv.slice(2);
if (args.includes("--help") || args.includes("-h") || args[0] === "help") {
  // Asked for: the usage on stdout, exit 0 (not a complaint about an unknown option).
  process.stdout.write(`${usage}\n`);
  process.exit(0);
}
/** Which database a command used, said on stderr once it succeeded (a key made in another database is no use to the server). */
let usedDatabase: string | undefined;
try {
  const result = await main(args);
  process.stdout.write(JSON.stringify(result, null, 2) + "\n");
  if (usedDatabase) process.stderr.write(`admin: database ${usedDatabase}\n`);
} catch (err) {
  const known =
    err instanceof AdminError || err instanceof ConfigError || err instanceof SecretKeyMismatch || (err as { code?: string }).code?.startsWith("ERR_PARSE_ARGS");
  process.stderr.write(`admin: ${known || err instanceof RemoteError ? (err as Error).message : `failed: ${(err as Error).message}`}\n`);
  process.exitCode = err instanceof RemoteError ? err.exitCode : known ? 2 : 1;
}
