import t from "tap";
import { createHmac } from "node:crypto";
import { signPayload, signatureHeaders } from "../../services/delivery/signature.ts";

/** Independent reference: HMAC-SHA256 keyed with the UTF-8 secret over ascii(ts) | "." | raw body bytes. */
function reference(secret: string, ts: number, body: Buffer): string {
  const data = Buffer.concat([Buffer.from(String(ts), "ascii"), Buffer.from(".", "ascii"), body]);
  return createHmac("sha256", Buffer.from(secret, "utf8")).update(data).digest("hex");
}

const secret = "whsec_test_secret";
const ts = 1700000000;
const body = '{"id":"evt_1","type":"payment.confirmed"}';
const unicodeBody = '{"note":"café – 日本 💸"}';

t.test("known-answer vectors", async (t) => {
  // Produced once in a UTF-8 shell with:
  //   printf '%s' '1700000000.{"id":"evt_1","type":"payment.confirmed"}' | openssl dgst -sha256 -hmac 'whsec_test_secret'
  t.equal(signPayload(secret, ts, body), "29c9b7c0c0e311b8c696c29a9229e9b3882b9db6ef6408630aba68aa022ced68");
  // Multibyte body (é, en dash, CJK, emoji) signed over its UTF-8 bytes:
  //   printf '%s' '1700000000.{"note":"café – 日本 💸"}' | openssl dgst -sha256 -hmac 'whsec_test_secret'
  t.equal(signPayload(secret, ts, unicodeBody), "77c97a564ad1cfd6052652b99dd107365be00db65331b9910fb81cd874c7f52b");
  t.equal(signPayload(secret, ts, Buffer.from(unicodeBody, "utf8")), "77c97a564ad1cfd6052652b99dd107365be00db65331b9910fb81cd874c7f52b");
});

t.test("matches an independent computation; lowercase hex, 64 chars", async (t) => {
  const cases: [string, number, string][] = [
    [secret, ts, body],
    ["whsec_" + "A-_z".repeat(11), 0, ""],
    ["whsec_x", 1, "{}"],
    ["whsec_x", 4102444800, '{"a":[1,2,3],"b":null}'],
  ];
  for (const [s, time, b] of cases) {
    const sig = signPayload(s, time, b);
    t.match(sig, /^[0-9a-f]{64}$/, `format (${time})`);
    t.equal(sig, reference(s, time, Buffer.from(b, "utf8")), `reference (${time})`);
  }
});

t.test("Buffer and string bodies give the same signature", async (t) => {
  for (const b of [body, unicodeBody, "", "line1\nline2\r\n\ttab"]) {
    t.equal(signPayload(secret, ts, Buffer.from(b, "utf8")), signPayload(secret, ts, b), JSON.stringify(b));
  }
});

t.test("non-ASCII bodies are signed over their UTF-8 bytes", async (t) => {
  const b = Buffer.from(unicodeBody, "utf8");
  t.ok(b.length > unicodeBody.length, "the body really is multibyte");
  t.equal(signPayload(secret, ts, unicodeBody), reference(secret, ts, b));
  // Not over latin1/UTF-16 code units.
  t.not(signPayload(secret, ts, unicodeBody), reference(secret, ts, Buffer.from(unicodeBody, "latin1")));
  t.not(signPayload(secret, ts, unicodeBody), reference(secret, ts, Buffer.from(unicodeBody, "utf16le")));
});

t.test("raw body bytes are signed as-is, even when not valid UTF-8", async (t) => {
  const raw = Buffer.from([0x7b, 0xff, 0xfe, 0x00, 0x80, 0x7d]);
  t.equal(signPayload(secret, ts, raw), reference(secret, ts, raw));
});

t.test("changing one byte of the body, the timestamp or the secret changes the signature", async (t) => {
  const base = signPayload(secret, ts, body);
  const bodyBytes = Buffer.from(body, "utf8");
  for (let i = 0; i < bodyBytes.length; i++) {
    const changed = Buffer.from(bodyBytes);
    changed[i] = changed[i]! ^ 0x01;
    if (signPayload(secret, ts, changed) === base) t.fail(`flipping body byte ${i} kept the signature`);
  }
  t.not(signPayload(secret, ts, body + " "), base, "appended byte");
  t.not(signPayload(secret, ts + 1, body), base, "timestamp + 1");
  t.not(signPayload(secret, ts - 1, body), base, "timestamp - 1");
  t.not(signPayload(secret + "x", ts, body), base, "secret with an extra char");
  t.not(signPayload("whsec_test_secreT", ts, body), base, "secret with one char changed");
});

t.test("headers: one signature in X-Service-Signature; during an overlap the previous secret's, the new one's in -Next", async (t) => {
  t.same(signatureHeaders("whsec_new", undefined, ts, body), { "x-service-signature": signPayload("whsec_new", ts, body) }, "no overlap: the current secret");
  t.same(
    signatureHeaders("whsec_new", "whsec_old", ts, body),
    { "x-service-signature": signPayload("whsec_old", ts, body), "x-service-signature-next": signPayload("whsec_new", ts, body) },
    "overlap: the secret the receiver holds signs X-Service-Signature",
  );
});
