import t from "tap";
import { checkIdempotencyKey } from "../../services/idempotency/key.ts";

t.test("missing keys", async (t) => {
  for (const header of [null, "", " ", "   \t  "]) {
    t.same(checkIdempotencyKey(header), { ok: false, reason: "missing" }, JSON.stringify(header));
  }
});

t.test("valid keys", async (t) => {
  t.same(checkIdempotencyKey("abcdefgh"), { ok: true, key: "abcdefgh" }, "exactly 8 characters");
  const long = "a".repeat(128);
  t.same(checkIdempotencyKey(long), { ok: true, key: long }, "exactly 128 characters");
  t.same(checkIdempotencyKey("  abcdefgh  "), { ok: true, key: "abcdefgh" }, "surrounding whitespace trimmed");
  t.same(checkIdempotencyKey("\tabcdefgh\n"), { ok: true, key: "abcdefgh" }, "tabs and newlines trimmed");
  const allClasses = "AZaz09._:-";
  t.same(checkIdempotencyKey(allClasses), { ok: true, key: allClasses }, "every allowed character class");
  const uuid = "3f0c1e9a-8b2d-4c5e-9f7a-1b2c3d4e5f60";
  t.same(checkIdempotencyKey(uuid), { ok: true, key: uuid }, "a UUID");
});

t.test("invalid keys", async (t) => {
  const cases: Record<string, string> = {
    "7 characters": "abcdefg",
    "129 characters": "a".repeat(129),
    "7 characters after trimming": "  abcdefg  ",
    "space inside": "abcd efgh",
    slash: "abcd/efgh",
    unicode: "abcdéfghi",
    emoji: "abcdefgh😀",
    plus: "abcd+efgh",
    "equals sign": "abcdefgh=",
    "newline inside": "abcd\nefgh",
  };
  for (const [name, header] of Object.entries(cases)) {
    t.same(checkIdempotencyKey(header), { ok: false, reason: "invalid" }, name);
  }
});
