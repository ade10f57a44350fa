// When a payment seen in the bitcoin mempool is withdrawn (services/chains/mempool-rule.ts): at once
// when its transaction was conflicted; when only missing, after enough consecutive reports over
// long enough; never on one report without it.
import t from "tap";
import { defaultMempoolAbsence, withdrawsFromMempool } from "../../services/chains/mempool-rule.ts";

const rule = { reads: 3, seconds: 60 };
const t0 = new Date("2026-11-27T12:00:00Z");
const at = (s: number) => new Date(t0.getTime() + s * 1000);

t.test("the defaults: 3 reports over 60 s", async (t) => {
  t.same(defaultMempoolAbsence, { reads: 3, seconds: 60 });
});

t.test("a conflicted transaction is withdrawn at once, missing for the first time or not", async (t) => {
  t.equal(withdrawsFromMempool({ conflicted: true, absentSince: null, absentReads: 0 }, t0, rule), true);
  t.equal(withdrawsFromMempool({ conflicted: true, absentSince: at(-1), absentReads: 1 }, t0, rule), true);
});

t.test("one report without it withdraws nothing (a node just restarted, another behind a balancer)", async (t) => {
  t.equal(withdrawsFromMempool({ conflicted: false, absentSince: null, absentReads: 0 }, t0, rule), false);
  t.equal(withdrawsFromMempool({ conflicted: false, absentSince: null, absentReads: 0 }, t0, { reads: 2, seconds: 0 }), false, "even with no minimum time");
});

t.test("missing: both the reads and the time are needed", async (t) => {
  t.equal(withdrawsFromMempool({ conflicted: false, absentSince: t0, absentReads: 2 }, at(59.999), rule), false, "3 reads, 1 ms short of 60 s");
  t.equal(withdrawsFromMempool({ conflicted: false, absentSince: t0, absentReads: 2 }, at(60), rule), true, "3 reads over 60 s");
  t.equal(withdrawsFromMempool({ conflicted: false, absentSince: t0, absentReads: 1 }, at(3600), rule), false, "an hour, but 2 reads (the watcher could not read a loaded mempool more often)");
  t.equal(withdrawsFromMempool({ conflicted: false, absentSince: t0, absentReads: 40 }, at(61), rule), true, "many reads over the time");
});

t.test("reads 1 and seconds 0: the first report without it (the old rule, as a setting)", async (t) => {
  t.equal(withdrawsFromMempool({ conflicted: false, absentSince: null, absentReads: 0 }, t0, { reads: 1, seconds: 0 }), true);
  t.equal(withdrawsFromMempool({ conflicted: false, absentSince: null, absentReads: 0 }, t0, { reads: 1, seconds: 1 }), false, "a first report spans no time");
});
