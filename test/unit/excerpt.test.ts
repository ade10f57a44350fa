import t from "tap";
import { storableExcerpt, storableText } from "../../services/delivery/excerpt.ts";

t.test("an excerpt keeps printable text and replaces what PostgreSQL or a terminal must not get", async (t) => {
  t.equal(storableExcerpt(Buffer.from("ok\0\0\u0007\u001b[2J"), 1024), "ok\uFFFD\uFFFD\uFFFD\uFFFD[2J", "NUL, BEL and ESC replaced");
  t.equal(storableExcerpt(Buffer.from("a\tb\r\nc"), 1024), "a\tb\r\nc", "tab and line breaks kept");
  t.equal(storableExcerpt(Buffer.from([0x6f, 0x6b, 0xff, 0xfe]), 1024), "ok\uFFFD\uFFFD", "invalid UTF-8 replaced");
  t.equal(storableExcerpt(Buffer.from("\u0085x"), 1024), "\uFFFDx", "a C1 control replaced");
  t.equal(storableExcerpt(Buffer.from("ééé"), 5), "éé", "at most maxBytes, never half a character");
  t.equal(storableExcerpt(Buffer.alloc(5000, 0x61), 1024).length, 1024);
});

t.test("text of outside origin fits its column", async (t) => {
  t.equal(storableText("transport: bad\0byte", 512), "transport: bad\uFFFDbyte");
  const long = storableText("x".repeat(600), 512);
  t.equal(long.length, 512);
  t.ok(long.endsWith("…"));
  t.equal(storableText(`${"x".repeat(510)}😀😀`, 512), `${"x".repeat(510)}…`, "never half a surrogate pair");
});
