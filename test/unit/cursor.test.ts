import t from "tap";
import { randomBytes } from "node:crypto";
import { CursorCodec, type CursorPosition } from "../../services/platform/cursor.ts";

const key = randomBytes(32);
const codec = new CursorCodec(key);
const scope = "m_1|test|status=pending";
const position: CursorPosition = { t: 1_790_000_000_123, i: "pi_4f0Xc9abcdefghijklmnopq" };

/** Flip one character of a base64url string to another valid base64url character. */
function flip(s: string, at: number): string {
  const c = s[at];
  return s.slice(0, at) + (c === "A" ? "B" : "A") + s.slice(at + 1);
}

t.test("round trip", async (t) => {
  const cursor = codec.encode(scope, position);
  t.type(cursor, "string");
  t.match(cursor, /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/, "URL-safe, no padding");
  t.same(codec.decode(scope, cursor), position);
  t.same(new CursorCodec(Buffer.from(key)).decode(scope, cursor), position, "a codec with the same key decodes it");
  const odd = { t: 0, i: "" };
  t.same(codec.decode("", codec.encode("", odd)), odd, "edge values and an empty scope");
  const unicode = { t: 1, i: "pï_ü" };
  t.same(codec.decode(scope, codec.encode(scope, unicode)), unicode, "non-ASCII id");
});

t.test("a cursor from another scope is refused", async (t) => {
  const cursor = codec.encode(scope, position);
  t.equal(codec.decode("m_2|test|status=pending", cursor), undefined, "other merchant");
  t.equal(codec.decode("m_1|live|status=pending", cursor), undefined, "other environment");
  t.equal(codec.decode("m_1|test|status=confirmed", cursor), undefined, "other filters");
  t.equal(codec.decode("", cursor), undefined, "empty scope");
  t.equal(codec.decode(scope + " ", cursor), undefined, "scope differing by a trailing space");
});

t.test("scope and payload cannot be shifted into each other", async (t) => {
  // The signature covers scope and payload separately: moving characters from one to the other must not verify.
  const cursor = codec.encode("ab", position);
  const [payload, sig] = cursor.split(".") as [string, string];
  t.equal(codec.decode("a", `b${payload}.${sig}`), undefined);
});

t.test("tampered cursors are refused", async (t) => {
  const cursor = codec.encode(scope, position);
  const [payload, sig] = cursor.split(".") as [string, string];

  const forged = Buffer.from(JSON.stringify({ t: position.t, i: "pi_someoneelse" })).toString("base64url");
  t.equal(codec.decode(scope, `${forged}.${sig}`), undefined, "payload replaced, old signature");
  t.equal(codec.decode(scope, `${flip(payload, 0)}.${sig}`), undefined, "payload with one character changed");
  t.equal(codec.decode(scope, `${payload}.${flip(sig, 5)}`), undefined, "signature with one character changed");
  t.equal(codec.decode(scope, `${payload}.${sig.slice(0, -1)}`), undefined, "truncated signature");
  t.equal(codec.decode(scope, `${payload}.${sig}A`), undefined, "lengthened signature");
  t.equal(codec.decode(scope, `${payload}.${sig}.${sig}`), undefined, "extra segment");
  t.equal(codec.decode(scope, `${payload}.`), undefined, "signature removed");
  t.equal(codec.decode(scope, payload), undefined, "payload only");
  t.equal(codec.decode(scope, `.${sig}`), undefined, "payload removed");
});

t.test("garbage is refused without throwing", async (t) => {
  for (const garbage of ["", ".", "..", "abc", "abc.def", "%%%.%%%", "null", "🙂.🙂", "a".repeat(10_000)]) {
    t.equal(codec.decode(scope, garbage), undefined, JSON.stringify(garbage.slice(0, 20)));
  }
});

t.test("signed payloads with the wrong shape are refused", async (t) => {
  // Only the holder of the key can sign these, so build them through encode() with an ill-typed position.
  const sign = (json: string) => codec.encode(scope, JSON.parse(json) as CursorPosition);
  t.equal(codec.decode(scope, sign('{"t":"1","i":"x"}')), undefined, "t as a string");
  t.equal(codec.decode(scope, sign('{"t":1.5,"i":"x"}')), undefined, "fractional t");
  t.equal(codec.decode(scope, sign('{"t":1}')), undefined, "no id");
  t.equal(codec.decode(scope, sign('{"t":1,"i":2}')), undefined, "numeric id");
  t.equal(codec.decode(scope, sign("null")), undefined, "null payload");
  t.equal(codec.decode(scope, sign("7")), undefined, "number payload");
  t.same(codec.decode(scope, sign('{"t":1,"i":"x","z":true}')), { t: 1, i: "x" }, "extra keys are dropped");
});

t.test("a codec with another key refuses", async (t) => {
  const cursor = codec.encode(scope, position);
  const other = new CursorCodec(randomBytes(32));
  t.equal(other.decode(scope, cursor), undefined);
  t.not(other.encode(scope, position), cursor, "and signs differently");
});
