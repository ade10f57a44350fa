// listen's state (services/listen/state.ts): the secret kept per key and server, the last event
// forwarded, and the ids a resume may bring again, remembered only as far back as the server looks.
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import t from "tap";
import { forwarded, loadState, saveState, stateFile } from "../../services/listen/state.ts";
import { newTimedId } from "../../services/platform/ids.ts";

const dir = mkdtempSync(path.join(tmpdir(), "listen-state-unit-"));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));

t.test("one file per key and server, named by a hash: the key is never written", async (t) => {
  const a = stateFile(dir, "http://127.0.0.1:8080", "sk_test_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa");
  const b = stateFile(dir, "http://127.0.0.1:8080", "sk_test_bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb");
  const c = stateFile(dir, "https://payments.example.com", "sk_test_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa");
  t.not(a, b);
  t.not(a, c);
  const first = loadState(a);
  t.match(first.secret, /^whsec_[A-Za-z0-9_-]{32}$/);
  t.equal(first.last, null);
  saveState(a, first);
  t.equal(loadState(a).secret, first.secret, "the same secret when read again");
  t.notOk(readFileSync(a, "utf8").includes("sk_test_"), "no key in the file");
  t.equal(statSync(a).mode & 0o777, 0o600, "readable by the user only");
  t.not(loadState(b).secret, first.secret, "another key, another secret");
});

t.test("the last event is the newest forwarded; ids within 70 s of it are remembered, older ones dropped", async (t) => {
  const now = Date.now();
  const old = newTimedId("evt", new Date(now - 120_000));
  const late = newTimedId("evt", new Date(now - 30_000));
  const newest = newTimedId("evt", new Date(now));
  let s = loadState(path.join(dir, "none.json"));
  s = forwarded(s, old);
  t.equal(s.last, old);
  s = forwarded(s, newest);
  t.equal(s.last, newest);
  s = forwarded(s, late);
  t.equal(s.last, newest, "a late commit forwarded after a newer one does not move the resume point back");
  t.same(s.recent.sort(), [late, newest].sort(), "the old one is out of reach of a resume: forgotten");
});

t.test("a file that cannot be read says so; none at all is a fresh start", async (t) => {
  const bad = path.join(dir, "bad.json");
  writeFileSync(bad, "{not json");
  t.throws(() => loadState(bad), /bad\.json cannot be read .*delete it to start afresh/);
  rmSync(bad);
  t.equal(loadState(bad).last, null);
});
