import t from "tap";
import { randomBytes } from "node:crypto";
import { createCipheriv } from "node:crypto";
import { SecretBox, SecretUnreadable, generateSigningSecret } from "../../services/platform/secrets.ts";

/** Layout version (1) and key id (8). */
const headerBytes = 9;
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
  t.equal(sealed.length, headerBytes + ivBytes + tagBytes + Buffer.byteLength(secret), "layout: version | key id | iv | tag | ciphertext");
  t.equal(sealed[0], 1, "version 1");
  t.equal(SecretBox.keyIdOf(sealed), box.current.keyId, "the sealing key's id");
});

t.test("sealing the same secret twice gives different ciphertexts", async (t) => {
  const box = new SecretBox(randomBytes(32));
  const secret = generateSigningSecret();
  const a = box.seal("we_1", secret);
  const b = box.seal("we_1", secret);
  t.not(a.toString("hex"), b.toString("hex"));
  t.not(a.subarray(headerBytes, headerBytes + ivBytes).toString("hex"), b.subarray(headerBytes, headerBytes + ivBytes).toString("hex"), "fresh iv each time");
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
    ["version and key id", 0, headerBytes],
    ["iv", headerBytes, headerBytes + ivBytes],
    ["tag", headerBytes + ivBytes, headerBytes + ivBytes + tagBytes],
    ["ciphertext", headerBytes + ivBytes + tagBytes, sealed.length],
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
  t.throws(() => box.open("we_1", sealed.subarray(0, headerBytes + ivBytes + tagBytes)), "ciphertext removed");
  t.throws(() => box.open("we_1", sealed.subarray(0, headerBytes + 3)), "iv cut");
});

t.test("constructor rejects a key that is not 32 bytes", async (t) => {
  for (const n of [0, 16, 24, 31, 33, 64]) t.throws(() => new SecretBox(randomBytes(n)), `${n}-byte key`);
  t.doesNotThrow(() => new SecretBox(randomBytes(32)), "32-byte key");
});

t.test("key ids and check values name a key without giving it away", async (t) => {
  const key = randomBytes(32);
  const a = new SecretBox(key);
  const b = new SecretBox(Buffer.from(key));
  const other = new SecretBox(randomBytes(32));
  t.match(a.current, { keyId: /^[0-9a-f]{16}$/, check: /^[0-9a-f]{64}$/ });
  t.same(a.current, b.current, "the same key, the same id and check value");
  t.not(a.current.keyId, other.current.keyId);
  t.not(a.current.check, other.current.check);
  t.notOk(a.current.check.includes(key.toString("hex").slice(0, 16)), "not the key");
});

t.test("a box given the previous key opens what either key sealed, and seals under the new one", async (t) => {
  const oldKey = randomBytes(32);
  const newKey = randomBytes(32);
  const sealedOld = new SecretBox(oldKey).seal("we_1", "whsec_old");
  const rotating = new SecretBox(newKey, oldKey);
  t.equal(rotating.open("we_1", sealedOld), "whsec_old");
  const sealedNew = rotating.seal("we_1", "whsec_new");
  t.equal(SecretBox.keyIdOf(sealedNew), new SecretBox(newKey).current.keyId, "sealed under the new key");
  t.equal(new SecretBox(newKey).open("we_1", sealedNew), "whsec_new", "which opens without the old one");
});

t.test("a secret sealed before key ids (marked 0x00 by the migration) still opens", async (t) => {
  const key = randomBytes(32);
  const iv = randomBytes(ivBytes);
  const cipher = createCipheriv("aes-256-gcm", key, iv);
  cipher.setAAD(Buffer.from("we_1", "utf8"));
  const ciphertext = Buffer.concat([cipher.update("whsec_legacy", "utf8"), cipher.final()]);
  const legacy = Buffer.concat([Buffer.from([0]), iv, cipher.getAuthTag(), ciphertext]);
  t.equal(new SecretBox(key).open("we_1", legacy), "whsec_legacy");
  t.throws(() => new SecretBox(randomBytes(32)).open("we_1", legacy), SecretUnreadable);
});

t.test("a secret under a key id the box lacks is SecretUnreadable, naming the key id only", async (t) => {
  const stranger = new SecretBox(randomBytes(32));
  const sealed = stranger.seal("we_1", "whsec_x");
  t.throws(() => new SecretBox(randomBytes(32)).open("we_1", sealed), {
    name: "SecretUnreadable",
    message: `sealed under encryption key ${stranger.current.keyId}, which this process was not given`,
  });
});

t.test("sealUnder: a box given both keys seals under the one named, never under a key it lacks", async (t) => {
  const oldKey = randomBytes(32);
  const rotating = new SecretBox(randomBytes(32), oldKey);
  rotating.sealUnder(new SecretBox(oldKey).current.keyId);
  t.equal(new SecretBox(oldKey).open("we_1", rotating.seal("we_1", "whsec_a")), "whsec_a", "a process with only the old key opens it");
  rotating.sealUnder("0000000000000000");
  t.equal(SecretBox.keyIdOf(rotating.seal("we_1", "whsec_b")), rotating.previous!.keyId, "an unknown id changes nothing");
});
