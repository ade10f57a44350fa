// What every start says: the note that nats-server predates the fix for #6085 is said once per
// installation and server version (at info), and afterwards only at debug.
import t from "tap";
import { serviceSystem } from "../helpers/processes.ts";
import { until } from "../helpers/harness.ts";

const note = /predates the fix for nats-server #6085/;
const ready = /"msg":"delivery stream ready"/;

t.test("the nats-server #6085 note: the first start says it, the next ones do not", async (t) => {
  const system = await serviceSystem(t, { env: { LOG_LEVEL: "info" } });
  const first = system.first;
  await until("the first start's delivery stream", async () => note.test(first.output()) || ready.test(first.output()), 30_000, () => first.output().slice(-2000));
  if (!note.test(first.output())) {
    t.pass("this nats-server has the fix: there is nothing to say");
    return;
  }
  t.match(first.output(), /"level":30[^\n]*predates the fix for nats-server #6085[^\n]*docs\/operations\.md/, "the first start says it at info, naming the docs");
  await first.kill("SIGTERM");

  for (const n of [2, 3]) {
    const again = await system.start();
    await until(`start ${n}'s delivery stream`, async () => ready.test(again.output()), 30_000, () => again.output().slice(-2000));
    t.notMatch(again.output(), note, `start ${n}: the stream is ready, and the note is not repeated at info`);
    await again.kill("SIGTERM");
  }
});
