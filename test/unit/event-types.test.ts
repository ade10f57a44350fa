import t from "tap";
import { everyTypeBefore } from "../../services/platform/migrations/Migration20261202150000_EveryEventType.ts";
import { allEvents, eventTypes, extensionEventTypes, receives } from "../../services/vocabulary/event-types.ts";

const every = [...eventTypes, ...extensionEventTypes];

t.test('"*" takes every event type, our extensions included (issue 65)', async (t) => {
  t.same(every.filter((type) => !receives([allEvents], type)), [], "none left out");
  t.ok(receives([allEvents], "payment.exception"), "payment.exception among them");
  t.ok(receives([allEvents], "a.type.added.later"), "and a type added later");
});

t.test("a list takes what it names, nothing else", async (t) => {
  t.same(every.filter((type) => receives(["payment.confirmed", "payment.exception"], type)), ["payment.confirmed", "payment.exception"]);
});

t.test("the list an endpoint made with \"*\" before the upgrade gets: what \"*\" took then", async (t) => {
  t.same(every.filter((type) => receives(everyTypeBefore, type)), everyTypeBefore, "each a known type");
  t.same(every.filter((type) => !everyTypeBefore.includes(type)), ["payment.detected", "payment.exception", "payment.valued", "payment.requoted", "refund.created", "refund.address_received", "refund.sent", "refund.completed", "refund.reorged", "refund.cancelled"], "all but the four extensions \"*\" left out then, and the refunds' made since");
});
