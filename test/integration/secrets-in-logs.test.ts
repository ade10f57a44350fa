// No secret the service issues, nor its master key, reaches a log line: the whole service runs as
// a child process at LOG_LEVEL=debug; every kind of secret is issued (admin CLI and API) and used,
// rightly and with a key one character off; then its stdout and stderr, the CLI's output and the
// API's later responses are searched for each secret in every form it could take.
import { createHmac } from "node:crypto";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import t from "tap";
import { ObservationService } from "../../gen/payments/v1/observations_pb.ts";
import { scopes } from "../../services/auth/keys.ts";
import { call, idemKey, sampleIntent, type ApiResponse } from "../helpers/harness.ts";
import { runCli, serviceSystem, type CliRun } from "../helpers/processes.ts";

/** The same credential with its last character changed: the wrong key a typo would make. */
function offByOne(secret: string): string {
  const last = secret.at(-1)!;
  return secret.slice(0, -1) + (last === "a" ? "b" : "a");
}

/** Every form a secret could be printed in: whole, its random part without the prefix, and its raw bytes re-encoded. */
function formsOf(secret: string): string[] {
  // The random part follows the kind prefix (sk_test_, site_live_, pos_test_, int_, whsec_); a
  // signing secret's base64url part may itself hold "_".
  const body = secret.replace(/^[a-z]+_(?:(?:test|live)_)?/, "");
  const forms = [secret, body];
  // A signing secret is 32 random bytes in base64url: those bytes in standard base64 (with and without padding) and hex too.
  const raw = Buffer.from(body, "base64url");
  if (secret.startsWith("whsec_") && raw.toString("base64url") === body) {
    forms.push(raw.toString("base64"), raw.toString("base64").replace(/=+$/, ""), raw.toString("hex"));
  }
  return [...new Set(forms)];
}

function count(haystack: string, needle: string): number {
  let n = 0;
  for (let i = haystack.indexOf(needle); i !== -1; i = haystack.indexOf(needle, i + 1)) n++;
  return n;
}

t.test("no issued secret nor SECRET_ENCRYPTION_KEY appears in the logs, the CLI's output (but once, at creation) or later responses", async (t) => {
  const s = await serviceSystem(t, { env: { LOG_LEVEL: "debug", WEBHOOK_RETRY_DELAYS: "0.5,0.5,0.5,0.5,0.5" } });
  const service = s.first;
  const merchant = s.creds.merchant;
  const cliEnv = { DATABASE_URL: s.databaseUrl, DATA_DIR: s.env.DATA_DIR!, SECRET_ENCRYPTION_KEY: s.env.SECRET_ENCRYPTION_KEY!, LOG_LEVEL: "debug" };
  const cliRuns: { args: string[]; run: CliRun }[] = [];
  const admin = async (...args: string[]) => {
    const run = await runCli("services/app/admin.ts", cliEnv, ...args);
    cliRuns.push({ args, run });
    if (run.code !== 0) throw new Error(`admin ${args.join(" ")}: ${run.stderr}`);
    return JSON.parse(run.stdout);
  };

  // Issued through the admin CLI, each printed once.
  const [testKey, liveKey, site, cashier, internal] = await Promise.all([
    admin("api-key", "create", "--merchant", merchant, "--environment", "test", "--scopes", scopes.join(",")),
    admin("api-key", "create", "--merchant", merchant, "--environment", "live", "--scopes", "payment_intents:read"),
    admin("site-credential", "create", "--merchant", merchant, "--environment", "test", "--allowed-origin", "https://shop.example"),
    admin("cashier-session", "create", "--merchant", merchant, "--environment", "test", "--cashier", "Ana", "--terminal", "Till 2"),
    admin("internal-credential", "create", "--name", "chain watcher", "--roles", "observe,admin", "--environment", "test"),
  ]);
  const issuedByCli: Record<string, string> = {
    "test API key": testKey.api_key,
    "live API key": liveKey.api_key,
    "site credential": site.credential,
    "cashier session": cashier.session,
    "internal credential": internal.credential,
  };
  t.match(issuedByCli, { "test API key": /^sk_test_/, "live API key": /^sk_live_/, "site credential": /^site_test_/, "cashier session": /^pos_test_/, "internal credential": String });

  // Every response after the signing secret's creation, to check none shows a secret again.
  const later: ApiResponse[] = [];
  const api = async (method: string, path: string, o: Parameters<typeof call>[3] = {}) => {
    const res = await call(s.base, method, path, o);
    later.push(res);
    return res;
  };
  const created = await call(s.base, "POST", `/api/v1/merchants/${merchant}/webhook-endpoints`, {
    key: testKey.api_key,
    body: { url: "https://hooks.example.test/hooks/secrets" },
  });
  t.equal(created.status, 200, "a webhook endpoint is created");
  const signingSecret: string = created.body.data.signing_secret;
  const endpointId: string = created.body.data.id;
  t.match(signingSecret, /^whsec_/, "its signing secret is shown at creation");

  // Each secret used rightly …
  const m = `/api/v1/merchants/${merchant}`;
  const intent = await api("POST", `${m}/payment-intents`, { key: testKey.api_key, idempotencyKey: idemKey(), body: sampleIntent });
  t.equal(intent.status, 200, "the test API key creates an intent");
  t.equal((await api("GET", `${m}/payment-intents/${intent.body.data.public_id}`, { key: testKey.api_key })).status, 200, "and reads it");
  t.equal((await api("GET", `${m}/payment-intents?limit=5`, { key: liveKey.api_key })).status, 200, "the live API key lists intents");
  t.equal((await api("GET", `${m}/webhook-endpoints/${endpointId}`, { key: testKey.api_key })).status, 200, "the endpoint is read");
  t.equal((await api("GET", `${m}/webhook-endpoints`, { key: testKey.api_key })).status, 200, "and listed");
  const siteCall = await api("POST", "/api/v1/site-payment-intents", {
    key: site.credential,
    idempotencyKey: idemKey(),
    body: sampleIntent,
    headers: { origin: "https://shop.example" },
  });
  t.equal(siteCall.status, 200, "the site credential creates an intent");
  const pos = await api("POST", "/api/v1/terminal/pos/payment", { key: cashier.session, idempotencyKey: idemKey(), body: sampleIntent });
  t.equal(pos.status, 200, "the cashier session takes a payment");
  const watcher = createClient(ObservationService, createGrpcTransport({ baseUrl: `http://127.0.0.1:${s.env.RPC_PORT}` }));
  const unmatched = await watcher.listUnmatchedObservations({ limit: 5 }, { headers: { authorization: `Bearer ${internal.credential}` } });
  t.ok(Array.isArray(unmatched.data), "the internal credential calls ObservationService over gRPC");
  const test = await api("POST", `${m}/webhook-endpoints/${endpointId}/test`, { key: testKey.api_key });
  t.equal(test.status, 200, "a webhook.test is sent");

  // A key made through the API (the dashboard's create): its secret in the create's answer only.
  const apiIssued = await call(s.base, "POST", `${m}/api-keys`, { key: testKey.api_key, body: { scopes: ["payment_intents:read"] } });
  t.equal(apiIssued.status, 200, "an API key is created through the API");
  const apiKey: string = apiIssued.body.data.api_key;
  t.equal((await api("GET", `${m}/payment-intents`, { key: apiKey })).status, 200, "and used");
  t.equal((await api("GET", `${m}/payment-intents`, { key: offByOne(apiKey) })).status, 401, "a wrong one is refused");
  t.equal((await api("GET", `${m}/api-keys`, { key: testKey.api_key })).status, 200, "the keys are listed");
  t.equal((await api("POST", `${m}/api-keys/${apiIssued.body.data.id}/revoke`, { key: testKey.api_key })).status, 200, "and it is revoked");
  t.equal((await api("GET", `${m}/payment-intents`, { key: apiKey })).status, 401, "then refused");

  // … and one character off, on both front doors.
  const wrong = Object.values(issuedByCli).map(offByOne);
  for (const [what, res] of [
    ["test API key", await api("GET", `${m}/payment-intents`, { key: offByOne(testKey.api_key) })],
    ["live API key", await api("POST", `${m}/payment-intents`, { key: offByOne(liveKey.api_key), idempotencyKey: idemKey(), body: sampleIntent })],
    ["site credential", await api("POST", "/api/v1/site-payment-intents", { key: offByOne(site.credential), idempotencyKey: idemKey(), body: sampleIntent })],
    ["cashier session", await api("POST", "/api/v1/terminal/pos/payment", { key: offByOne(cashier.session), idempotencyKey: idemKey(), body: sampleIntent })],
    ["internal credential on a merchant route", await api("GET", `${m}/payment-intents`, { key: internal.credential })],
  ] as const) {
    t.equal(res.status, 401, `a wrong ${what} is refused`);
  }
  const refused = await watcher
    .listUnmatchedObservations({ limit: 5 }, { headers: { authorization: `Bearer ${offByOne(internal.credential)}` } })
    .then(() => undefined, (err: unknown) => ConnectError.from(err));
  t.equal(refused?.code, Code.Unauthenticated, "a wrong internal credential is refused over gRPC");
  t.notMatch(refused?.rawMessage ?? "", internal.credential.slice(-12), "and the error does not repeat it");

  // The webhooks arrive signed with the endpoint's secret.
  const requests = await s.receiver.waitFor(3, 20_000);
  const signed = requests.filter((r) => {
    const expected = createHmac("sha256", signingSecret).update(`${r.headers["x-service-timestamp"]}.`).update(r.body).digest("hex");
    return r.headers["x-service-signature"] === expected;
  });
  t.equal(signed.length, requests.length, `every webhook (${requests.length}) is signed with the endpoint's secret`);

  // The list commands show hints, never the secrets.
  await Promise.all([
    admin("api-key", "list", "--merchant", merchant),
    admin("site-credential", "list", "--merchant", merchant),
    admin("cashier-session", "list", "--merchant", merchant),
    admin("internal-credential", "list"),
  ]);

  service.child.kill("SIGTERM");
  t.equal(await service.exited, 0, "the service stops cleanly, writing its last log lines");

  const logs = service.stdout() + service.stderr();
  const httpLines = logs.split("\n").filter((l) => l.includes('"msg":"http request"'));
  t.ok(httpLines.length >= later.length, `the logs are not empty: ${httpLines.length} "http request" lines for ${later.length} REST calls`);
  t.ok(httpLines.some((l) => l.includes('"status":401')), "the refused calls are logged too");
  t.match(logs, /"msg":"stopped"/, "down to the last line");

  const key = Buffer.from(s.env.SECRET_ENCRYPTION_KEY!, "hex");
  const masterForms = [key.toString("hex"), key.toString("hex").toUpperCase(), key.toString("base64"), key.toString("base64").replace(/=+$/, ""), key.toString("base64url")];
  const secrets: [string, string[]][] = [
    ...Object.entries(issuedByCli).map(([what, secret]): [string, string[]] => [what, formsOf(secret)]),
    ["webhook signing secret", formsOf(signingSecret)],
    ["API key issued through the API", formsOf(apiKey)],
    ["wrong API key (one character off) of the one issued through the API", [offByOne(apiKey)]],
    ["SECRET_ENCRYPTION_KEY", masterForms],
    ["wrong credential (one character off) that was sent", wrong],
  ];
  for (const [what, forms] of secrets) {
    t.same(forms.filter((f) => logs.includes(f)), [], `the ${what} is not in the service's stdout or stderr`);
  }

  const cliOutput = cliRuns.map(({ run }) => run.stdout + run.stderr).join("\n");
  for (const [what, secret] of Object.entries(issuedByCli)) {
    const creation = cliRuns.find(({ run }) => run.stdout.includes(secret))!;
    t.equal(count(creation.run.stdout, secret), 1, `the ${what} is printed once, by "admin ${creation.args.slice(0, 2).join(" ")}"`);
    // Its random part is in that one printing too, and must be nowhere else.
    t.same(formsOf(secret).filter((f) => count(cliOutput, f) > 1), [], `and nowhere else in the CLI's output`);
  }
  t.same(masterForms.filter((f) => cliOutput.includes(f)), [], "the CLI never prints SECRET_ENCRYPTION_KEY");
  t.ok(cliRuns.every(({ run }) => run.code === 0), `${cliRuns.length} admin commands ran`);

  const responses = later.map((r) => JSON.stringify(r.body) + JSON.stringify([...r.headers])).join("\n");
  const everySecret = [...Object.values(issuedByCli), signingSecret, apiKey].flatMap(formsOf).concat(masterForms, wrong, [offByOne(apiKey)]);
  t.same(everySecret.filter((f) => responses.includes(f)), [], "no later API response shows a secret, nor a wrong key it was sent");
});
