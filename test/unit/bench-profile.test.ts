// The bench's CPU profile summary: who a sample belongs to, and the shares of busy time.
import path from "node:path";
import t from "tap";
import { consumerOf, describeSummary, summarise, type CpuProfile } from "../bench/profile.ts";

const root = path.resolve(import.meta.dirname, "../..");

t.test("a sample's consumer", async (t) => {
  t.equal(consumerOf("(idle)", ""), undefined, "idle is not busy time");
  t.equal(consumerOf("(garbage collector)", ""), "garbage collection");
  t.equal(consumerOf("(program)", ""), "V8 and native code (program)");
  t.equal(consumerOf("query", `file://${root}/node_modules/pg/lib/client.js`), "pg");
  t.equal(consumerOf("x", `file://${root}/node_modules/@mikro-orm/core/EntityManager.js`), "@mikro-orm/core");
  t.equal(consumerOf("x", `file://${root}/node_modules/a/node_modules/@noble/curves/abstract/weierstrass.js`), "@noble/curves", "the innermost package");
  t.equal(consumerOf("write", "node:internal/streams/writable"), "node:streams");
  t.equal(consumerOf("createServer", "node:http"), "node:http");
  t.equal(consumerOf("handle", `file://${root}/gateway/server.ts`), "gateway/server.ts", "our files by path");
  t.equal(consumerOf("writev", ""), "native: writev");
});

t.test("shares of the busy samples, idle apart", async (t) => {
  const profile: CpuProfile = {
    startTime: 0,
    endTime: 10,
    nodes: [
      { id: 1, callFrame: { functionName: "(root)", url: "" } },
      { id: 2, callFrame: { functionName: "(idle)", url: "" } },
      { id: 3, callFrame: { functionName: "query", url: `file://${root}/node_modules/pg/lib/client.js` } },
      { id: 4, callFrame: { functionName: "(garbage collector)", url: "" } },
    ],
    samples: [2, 2, 2, 2, 3, 3, 3, 4, 2, 2],
  };
  const s = summarise(profile);
  t.equal(s.busy, 0.4, "4 of 10 samples busy");
  t.same(s.top, [{ name: "pg", share: 0.75 }, { name: "garbage collection", share: 0.25 }]);
  t.equal(describeSummary(s), "busy 40 % of the run; top: pg 75 %, garbage collection 25 %");
  t.equal(
    describeSummary({ ...s, onCpu: 0.25 }),
    "busy 40 % of the run (on a core 25 %; the rest of it waiting for one); top: pg 75 %, garbage collection 25 %",
    "with the event loop's CPU time from /proc",
  );
});
