import t from "tap";
import { randomBytes } from "node:crypto";
import { SecretBox, generateSigningSecret } from "../../services/webhooks/secrets.ts";

const ivBytes = 12;
const tagBytes = 16;

t.test("generateSigningSecret: whsec_ + base64url of at least 32 random bytes", async (t) => {
  const seen = new Set<string>();
  for (let i = 0; i < 1000; i++) {
    const s = generateSigningSecret();
    t.ok(s.startsWith("whsec_"), "prefix");
    const encoded = s.slice("whsec_".length);
    if (!/^[A-Za-z0-9_-]+$/.test(encoded)) t.fail(`not base64url (no padding, no +/): ${s}`);
    const decoded = Buffer.from(encoded, "base64url");
    if (decoded.length < 32) t.fail(`only ${decoded.length} bytes: ${s}`);
    if (decoded.toString("base64url") !== encoded) t.fail(`not canonical base64url: ${s}`);
    seen.add(s);
  }
  t.equal(seen.size, 1000, "1000 secrets are all distinct");
});

t.test("generated secrets look random, not a fixed pattern", async (t) => {
  const a = Buffer.from(generateSigningSecret().slice(6), "base64url");
  const b = Buffer.from(generateSigningSecret().slice(6), "base64url");
  let same = 0;
  for (let i = 0; i < Math.min(a.length, b.length); i++) if (a[i] === b[i]) same++;
  t.ok(same < 8, `two secrets share ${same} byte positions`);
});

t.test("SecretBox round-trip", async (t) => {
  const box = new SecretBox(randomBytes(32));
  for (const secret of [generateSigningSecret(), "whsec_x", "", "ünïcödé 🔑"]) {
    const sealed = box.seal("we_123", secret);
    t.equal(box.open("we_123", sealed), secret, JSON.stringify(secret));
  }
});

t.test("a box made from an equal copy of the key opens what another sealed", async (t) => {
  const key = randomBytes(32);
  const sealed = new SecretBox(key).seal("we_1", "whsec_abc");
  t.equal(new SecretBox(Buffer.from(key)).open("we_1", sealed), "whsec_abc");
});

t.test("the ciphertext does not contain the secret", async (t) => {
  const box = new SecretBox(randomBytes(32));
  const secret = generateSigningSecret();
  const sealed = box.seal("we_1", secret);
  t.equal(sealed.includes(Buffer.from(secret, "utf8")), false, "whole secret absent");
  t.equal(sealed.includes(Buffer.from(secret.slice(6), "utf8")), false, "secret body absent");
  t.equal(sealed.includes(Buffer.from("whsec_", "utf8")), false, "prefix absent");
  t.equal(sealed.toString("latin1").includes(secret), false, "not visible as text");
  t.equal(sealed.length, ivBytes + tagBytes + Buffer.byteLength(secret), "layout: iv | tag | ciphertext");
});

t.test("sealing the same secret twice gives different ciphertexts", async (t) => {
  const box = new SecretBox(randomBytes(32));
  const secret = generateSigningSecret();
  const a = box.seal("we_1", secret);
  const b = box.seal("we_1", secret);
  t.not(a.toString("hex"), b.toString("hex"));
  t.not(a.subarray(0, ivBytes).toString("hex"), b.subarray(0, ivBytes).toString("hex"), "fresh iv each time");
  t.equal(box.open("we_1", a), secret);
  t.equal(box.open("we_1", b), secret);
});

t.test("opening for another endpoint throws", async (t) => {
  const box = new SecretBox(randomBytes(32));
  const sealed = box.seal("we_1", generateSigningSecret());
  t.throws(() => box.open("we_2", sealed));
  t.throws(() => box.open("we_10", sealed));
  t.throws(() => box.open("", sealed));
});

t.test("opening with another key throws", async (t) => {
  const sealed = new SecretBox(randomBytes(32)).seal("we_1", generateSigningSecret());
  t.throws(() => new SecretBox(randomBytes(32)).open("we_1", sealed));
});

t.test("flipping any byte (iv, tag or ciphertext) makes open throw", async (t) => {
  const box = new SecretBox(randomBytes(32));
  const secret = generateSigningSecret();
  const sealed = box.seal("we_1", secret);
  const regions: [string, number, number][] = [
    ["iv", 0, ivBytes],
    ["tag", ivBytes, ivBytes + tagBytes],
    ["ciphertext", ivBytes + tagBytes, sealed.length],
  ];
  for (const [name, from, to] of regions) {
    t.ok(to > from, `${name} is not empty`);
    let opened = 0;
    for (let i = from; i < to; i++) {
      const tampered = Buffer.from(sealed);
      tampered[i] = tampered[i]! ^ 0x01;
      try {
        box.open("we_1", tampered);
        opened++;
      } catch {
        // expected
      }
    }
    t.equal(opened, 0, `no single-bit flip in the ${name} opens`);
  }
  t.equal(box.open("we_1", sealed), secret, "the original still opens");
});

t.test("truncated or extended data does not open", async (t) => {
  const box = new SecretBox(randomBytes(32));
  const sealed = box.seal("we_1", generateSigningSecret());
  t.throws(() => box.open("we_1", sealed.subarray(0, sealed.length - 1)), "last byte cut");
  t.throws(() => box.open("we_1", Buffer.concat([sealed, Buffer.from([0])])), "byte appended");
  t.throws(() => box.open("we_1", sealed.subarray(0, ivBytes + tagBytes)), "ciphertext removed");
});

t.test("constructor rejects a key that is not 32 bytes", async (t) => {
  for (const n of [0, 16, 24, 31, 33, 64]) t.throws(() => new SecretBox(randomBytes(n)), `${n}-byte key`);
  t.doesNotThrow(() => new SecretBox(randomBytes(32)), "32-byte key");
});
