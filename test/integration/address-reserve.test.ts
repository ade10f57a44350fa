// The built-in Test key's addresses a process reserves ahead (services/addresses/reserve.ts),
// against PostgreSQL and the derivation thread. What a merchant would notice if the stock ran
// dry: a create falling back to the transactional path, deriving its address on the event loop
// while every other create waits, or two intents on one address.
import t from "tap";
import { openDatabase } from "../../services/app/database.ts";
import type { Owner } from "../../services/auth/keys.ts";
import { testSequences } from "../../services/addresses/allocate.ts";
import { builtinAddresses } from "../../services/addresses/keys.ts";
import { AddressReserve } from "../../services/addresses/reserve.ts";
import { freePort } from "../../services/platform/listen.ts";
import { createTestDatabase } from "../helpers/harness.ts";
import { startTcpProxy } from "../helpers/tcp-proxy.ts";

const databaseUrl = await createTestDatabase(t);
const db = await openDatabase(databaseUrl);
t.teardown(() => db.close());
await db.migrator.up();
const em = () => db.em.fork();
const postgresPort = Number(new URL(databaseUrl).port || 5432);
const owner: Owner = { merchantId: "mer_reserve", environment: "test" };
const sequenceValue = async () =>
  (await em().execute<{ v: number }[]>(`select last_value::int as v from ${testSequences.ethereum}`))[0]?.v ?? 0;

t.test("a burst of creates larger than any refill: each gets its own address, in the order asked", async (t) => {
  const reserve = new AddressReserve();
  reserve.learn(owner, "ethereum", "builtin");
  const before = await sequenceValue();
  // Fifteen hundred creates at once, as a flat-out client's first second brings: more than a
  // refill takes (1 024), and many times a block. With a fixed block and three refills' patience,
  // most of them gave up ("no built-in ethereum addresses after 3 refills").
  const burst = 1500;
  const taken = await Promise.all(Array.from({ length: burst }, () => reserve.take(em(), owner, "ethereum")));
  t.equal(taken.filter((a) => a === undefined).length, 0, "every create got an address");
  const indices = taken.map((a) => a?.index as number);
  t.equal(new Set(indices).size, burst, "no index twice");
  t.ok(
    indices.every((index, i) => i === 0 || index > (indices[i - 1] as number)),
    "indices rise in the order the creates asked: none waited behind a later one",
  );
  t.same(
    taken.map((a) => a?.address),
    builtinAddresses("ethereum", indices),
    "each address is the built-in Test key's at its index",
  );
  const reserved = (await sequenceValue()) - before;
  t.ok(reserved >= burst && reserved <= burst + 1024, `the sequence moved ${reserved} for ${burst} creates: what they took, and at most one refill ahead`);

  // An address a statement did not use goes to the next create, so the key skips no index.
  const last = taken[burst - 1];
  const next = await reserve.take(em(), owner, "ethereum");
  next?.release();
  const again = await reserve.take(em(), owner, "ethereum");
  t.equal(again?.index, next?.index, "a released address is the next one handed out");
  t.ok((again?.index as number) > (last?.index as number), "after the burst's");
});

t.test("a refill the database refuses fails the creates waiting for it, and the next take refills", async (t) => {
  const proxy = await startTcpProxy(t, postgresPort);
  const viaProxy = new URL(databaseUrl);
  viaProxy.port = String(proxy.port);
  const away = await openDatabase(viaProxy.toString());
  t.teardown(() => away.close());
  // Nothing listens there: each connection the pool makes is cut at once, as with a server down.
  proxy.retarget(await freePort());
  const reserve = new AddressReserve();
  reserve.learn(owner, "ethereum", "builtin");
  const waiting = await Promise.race([
    Promise.allSettled(Array.from({ length: 5 }, () => reserve.take(away.em.fork(), owner, "ethereum"))),
    new Promise<"hung">((resolve) => setTimeout(() => resolve("hung"), 20_000).unref()),
  ]);
  t.not(waiting, "hung", "the waiting creates are answered, not left waiting");
  if (waiting !== "hung") t.same(waiting.map((r) => r.status), ["rejected", "rejected", "rejected", "rejected", "rejected"], "each fails (its create takes the transactional path)");

  proxy.retarget(postgresPort);
  const after = await reserve.take(away.em.fork(), owner, "ethereum");
  t.ok(after, "with the database back, the next take refills");
  t.equal(after?.address, builtinAddresses("ethereum", [after?.index as number])[0], "its address is the key's at its index");
});
