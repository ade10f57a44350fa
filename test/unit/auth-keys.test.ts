import t from "tap";
import { createHash } from "node:crypto";
import {
  generateApiKey,
  hashApiKey,
  isEnvironment,
  isScope,
  keyHint,
  parseBearer,
  parseSiteBearer,
  generateSiteCredential,
  canonicalOrigin,
} from "../../services/auth/keys.ts";

const validTest = "sk_test_" + "aB3".repeat(10) + "xY";
const validLive = "sk_live_" + "Z9q".repeat(10) + "00";

t.test("generateApiKey", async (t) => {
  const testKey = generateApiKey("test");
  t.match(testKey, /^sk_test_[0-9A-Za-z]{32}$/, "test key format");
  const liveKey = generateApiKey("live");
  t.match(liveKey, /^sk_live_[0-9A-Za-z]{32}$/, "live key format");

  const seen = new Set<string>();
  for (let i = 0; i < 2000; i++) seen.add(generateApiKey("test"));
  t.equal(seen.size, 2000, "2000 generated keys are all distinct");

  // Over many keys, every base62 character class shows up (the alphabet is not truncated).
  const chars = [...seen].map((k) => k.slice(8)).join("");
  t.match(chars, /[0-9]/, "digits appear");
  t.match(chars, /[A-Z]/, "upper case appears");
  t.match(chars, /[a-z]/, "lower case appears");

  for (const env of ["test", "live"] as const) {
    const key = generateApiKey(env);
    const parsed = parseBearer(`Bearer ${key}`);
    t.same(parsed, { ok: true, secret: key, environment: env }, `a generated ${env} key parses as a bearer token`);
  }
});

t.test("hashApiKey is the hex SHA-256 of the secret", async (t) => {
  for (const secret of [validTest, validLive, "", "ünïcode"]) {
    t.equal(hashApiKey(secret), createHash("sha256").update(secret).digest("hex"), JSON.stringify(secret));
  }
  t.match(hashApiKey(validTest), /^[0-9a-f]{64}$/, "64 lower-case hex digits");
  t.not(hashApiKey(validTest), hashApiKey(validLive), "different secrets, different hashes");
  t.not(hashApiKey(validTest), validTest, "the hash is not the secret");
});

t.test("parseBearer: missing", async (t) => {
  for (const header of [null, "", "   "]) {
    t.same(parseBearer(header), { ok: false, reason: "missing" }, JSON.stringify(header));
  }
});

t.test("parseBearer: malformed", async (t) => {
  const cases: Record<string, string> = {
    "no scheme": validTest,
    "Basic scheme": `Basic ${validTest}`,
    "scheme only": "Bearer",
    "scheme and space only": "Bearer ",
    "no space after scheme": `Bearer${validTest}`,
    "production prefix": `Bearer sk_prod_${"a".repeat(32)}`,
    "publishable prefix": `Bearer pk_test_${"a".repeat(32)}`,
    "short key": `Bearer sk_test_${"a".repeat(31)}`,
    "long key": `Bearer sk_test_${"a".repeat(33)}`,
    "non-base62 character": `Bearer sk_test_${"a".repeat(31)}-`,
    "upper-case environment": `Bearer sk_TEST_${"a".repeat(32)}`,
    "extra token": `Bearer ${validTest} extra`,
    "two keys": `Bearer ${validTest} ${validLive}`,
    "comma list": `Bearer ${validTest},${validLive}`,
  };
  for (const [name, header] of Object.entries(cases)) {
    t.same(parseBearer(header), { ok: false, reason: "malformed" }, name);
  }
});

t.test("parseBearer: ok", async (t) => {
  t.same(parseBearer(`Bearer ${validTest}`), { ok: true, secret: validTest, environment: "test" }, "test key");
  t.same(parseBearer(`Bearer ${validLive}`), { ok: true, secret: validLive, environment: "live" }, "live key");
  t.same(parseBearer(`bearer ${validTest}`), { ok: true, secret: validTest, environment: "test" }, "lower-case scheme");
  t.same(parseBearer(`BEARER ${validTest}`), { ok: true, secret: validTest, environment: "test" }, "upper-case scheme");
  t.same(parseBearer(`Bearer   ${validTest}`), { ok: true, secret: validTest, environment: "test" }, "several spaces");
  t.same(parseBearer(`Bearer ${validTest} `), { ok: true, secret: validTest, environment: "test" }, "trailing space");
});

t.test("keyHint does not reveal the secret", async (t) => {
  const key = generateApiKey("live");
  const hint = keyHint(key);
  t.ok(hint.startsWith("sk_live_"), "hint shows the environment prefix");
  t.notOk(hint.includes(key), "hint does not contain the full key");
  const random = key.slice("sk_live_".length);
  const shown = hint.replace(/^sk_live_/, "").replace(/…$/, "");
  t.ok(shown.length <= 8, `hint shows at most 8 of the 32 random characters (showed ${shown.length})`);
  t.ok(random.startsWith(shown), "the shown characters are the key's own");
  t.not(keyHint(validTest), validTest);
});

t.test("isScope", async (t) => {
  for (const scope of [
    "payment_intents:read",
    "payment_intents:write",
    "webhooks:read",
    "webhooks:write",
    "merchant:readiness",
  ]) {
    t.equal(isScope(scope), true, scope);
  }
  for (const scope of ["", "payment_intents", "payment_intents:*", "PAYMENT_INTENTS:READ", " webhooks:read", "admin"]) {
    t.equal(isScope(scope), false, JSON.stringify(scope));
  }
});

t.test("isEnvironment", async (t) => {
  t.equal(isEnvironment("test"), true);
  t.equal(isEnvironment("live"), true);
  for (const env of ["", "prod", "TEST", "Live", "test "]) t.equal(isEnvironment(env), false, JSON.stringify(env));
});

t.test("site credentials: prefix and parsing", async (t) => {
  const live = generateSiteCredential("live");
  t.match(live, /^site_live_[0-9A-Za-z]{32}$/);
  t.same(parseSiteBearer(`Bearer ${live}`), { ok: true, secret: live });
  t.same(parseSiteBearer(null), { ok: false, reason: "missing" });
  for (const header of [`Bearer ${validTest}`, `Bearer site_prod_${"a".repeat(32)}`, `Bearer site_test_${"a".repeat(31)}`, `Basic ${live}`, `Bearer ${live} x`]) {
    t.same(parseSiteBearer(header), { ok: false, reason: "malformed" }, header);
  }
  t.same(parseBearer(`Bearer ${live}`), { ok: false, reason: "malformed" }, "a site credential is not an API key");
});

t.test("canonicalOrigin", async (t) => {
  const ok: [string, string][] = [
    ["https://shop.example", "https://shop.example"],
    ["https://shop.example/", "https://shop.example"],
    ["HTTPS://Shop.Example", "https://shop.example"],
    ["https://shop.example:443", "https://shop.example"],
    ["http://localhost:3000", "http://localhost:3000"],
    ["https://[::1]:8443", "https://[::1]:8443"],
  ];
  for (const [given, canonical] of ok) t.equal(canonicalOrigin(given), canonical, given);
  for (const bad of ["null", "", "shop.example", "https://shop.example/path", "https://shop.example?x", "https://user@shop.example", "ftp://shop.example", "https://shop.example#a", " https://shop.example"]) {
    t.equal(canonicalOrigin(bad), undefined, JSON.stringify(bad));
  }
});
