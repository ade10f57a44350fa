// What every start says: the note that nats-server predates the fix for #6085 is said once per
// installation and server version (at info), and afterwards only at debug; the banner's "Get an API
// key" commands are printed at an installation's first start only.
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

t.test("the API key hint: the first start of an installation prints it, the next ones do not", async (t) => {
  const hint = /Get an API key \(in another terminal\):\n {2}npm run -s admin -- merchant create --name 'My Shop'\n/;
  const system = await serviceSystem(t, { env: { LOG_LEVEL: "info" } });
  // "started" is logged after the banner is written: by then the hint is in it or never will be.
  const banner = async (p: typeof system.first) => until("the banner and the started log", async () => /"msg":"started"/.test(p.stdout()), 30_000, () => p.output().slice(-2000));
  await banner(system.first);
  t.match(system.first.stdout(), hint, "the first start prints the commands");
  await system.first.kill("SIGTERM");
  for (const n of [2, 3]) {
    const again = await system.start();
    await banner(again);
    t.match(again.stdout(), /REST API +http:/, `start ${n}: the banner`);
    t.notMatch(again.stdout(), /Get an API key|api-key create/, `start ${n}: without the hint`);
    await again.kill("SIGTERM");
  }
});
