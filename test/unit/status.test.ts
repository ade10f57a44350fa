import t from "tap";
import { canTransition, eventFor, isStatus, statuses, type Status } from "../../services/intents/status.ts";

t.test("isStatus", async (t) => {
  for (const s of ["pending", "underpaid", "confirmed", "overpaid", "cancelled", "expired", "late"]) {
    t.equal(isStatus(s), true, s);
  }
  for (const s of ["", "PENDING", "canceled", "paid", "pending "]) t.equal(isStatus(s), false, JSON.stringify(s));
});

t.test("cancel only from pending", async (t) => {
  for (const from of statuses) {
    t.equal(canTransition(from, "cancelled"), from === "pending", `${from} -> cancelled`);
  }
});

t.test("nothing leaves cancelled", async (t) => {
  for (const to of statuses) t.equal(canTransition("cancelled", to), false, `cancelled -> ${to}`);
});

// DESIGN.md: a reorg moves an intent back to what the remaining funds imply.
t.test("late goes back to expired only (a reorg took the late funds)", async (t) => {
  for (const to of statuses) t.equal(canTransition("late", to), to === "expired", `late -> ${to}`);
  t.equal(eventFor("late", "expired"), "payment.reorged");
});

t.test("expired only goes to late", async (t) => {
  for (const to of statuses) t.equal(canTransition("expired", to), to === "late", `expired -> ${to}`);
});

t.test("late is reached only from expired", async (t) => {
  for (const from of statuses) t.equal(canTransition(from, "late"), from === "expired", `${from} -> late`);
});

t.test("no status transitions to itself", async (t) => {
  for (const s of statuses) t.equal(canTransition(s, s), false, `${s} -> ${s}`);
});

t.test("payment flows and reorgs are allowed", async (t) => {
  const allowed: [Status, Status][] = [
    ["pending", "underpaid"],
    ["pending", "confirmed"],
    ["pending", "overpaid"],
    ["pending", "expired"],
    ["underpaid", "confirmed"],
    ["underpaid", "overpaid"],
    ["underpaid", "expired"],
    ["confirmed", "pending"],
    ["confirmed", "overpaid"],
    ["overpaid", "confirmed"],
    ["overpaid", "pending"],
  ];
  for (const [from, to] of allowed) t.equal(canTransition(from, to), true, `${from} -> ${to}`);
  // A paid intent does not expire.
  t.equal(canTransition("confirmed", "expired"), false, "confirmed -> expired");
  t.equal(canTransition("overpaid", "expired"), false, "overpaid -> expired");
});

t.test("eventFor", async (t) => {
  const cases: [Status, Status, string][] = [
    ["pending", "confirmed", "payment.confirmed"],
    ["pending", "underpaid", "payment.underpaid"],
    ["pending", "overpaid", "payment.overpaid"],
    ["pending", "cancelled", "payment.cancelled"],
    ["pending", "expired", "payment.expired"],
    ["underpaid", "confirmed", "payment.confirmed"],
    ["underpaid", "overpaid", "payment.overpaid"],
    ["confirmed", "overpaid", "payment.overpaid"],
    ["expired", "late", "payment.late"],
    // Reorgs: funds counted before are taken away.
    ["confirmed", "pending", "payment.reorged"],
    ["confirmed", "underpaid", "payment.reorged"],
    ["overpaid", "confirmed", "payment.reorged"],
    ["overpaid", "underpaid", "payment.reorged"],
    ["overpaid", "pending", "payment.reorged"],
    ["underpaid", "pending", "payment.reorged"],
  ];
  for (const [from, to, event] of cases) t.equal(eventFor(from, to), event, `${from} -> ${to}`);
});

// DESIGN.md: an intent expires "while pending or underpaid"; expiry is not a reorg.
t.test("an underpaid intent that expires emits payment.expired", async (t) => {
  t.equal(eventFor("underpaid", "expired"), "payment.expired");
});

t.test("every allowed transition names an event", async (t) => {
  for (const from of statuses) {
    for (const to of statuses) {
      if (!canTransition(from, to)) continue;
      t.match(eventFor(from, to), /^payment\.[a-z]+$/, `${from} -> ${to}`);
    }
  }
});
