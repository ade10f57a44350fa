import t from "tap";
import { attemptable, canMove, deliveryStatuses, isDeliveryStatus, type DeliveryStatus } from "../../services/delivery/status.ts";

t.test("the four spec states", async (t) => {
  t.same([...deliveryStatuses].sort(), ["delivered", "failed", "pending", "processing"]);
});

t.test("isDeliveryStatus", async (t) => {
  for (const s of ["pending", "processing", "delivered", "failed"]) t.equal(isDeliveryStatus(s), true, s);
  for (const s of ["", "PENDING", "Pending", "succeeded", "retrying", "failed ", "canceled", "constructor", "toString"]) {
    t.equal(isDeliveryStatus(s), false, JSON.stringify(s));
  }
});

t.test("the full transition table", async (t) => {
  const allowed: Record<DeliveryStatus, Record<DeliveryStatus, boolean>> = {
    pending: { pending: false, processing: true, delivered: false, failed: true },
    processing: { pending: true, processing: true, delivered: true, failed: true },
    delivered: { pending: false, processing: false, delivered: false, failed: false },
    failed: { pending: false, processing: false, delivered: false, failed: false },
  };
  let pairs = 0;
  for (const from of deliveryStatuses) {
    for (const to of deliveryStatuses) {
      t.equal(canMove(from, to), allowed[from][to], `${from} -> ${to}`);
      pairs++;
    }
  }
  t.equal(pairs, 16, "every pair checked");
});

t.test("delivered and failed are final", async (t) => {
  for (const from of ["delivered", "failed"] as const) {
    for (const to of deliveryStatuses) t.equal(canMove(from, to), false, `${from} -> ${to}`);
  }
});

t.test("a delivery is only delivered from processing (an attempt must have run)", async (t) => {
  for (const from of deliveryStatuses) t.equal(canMove(from, "delivered"), from === "processing", `${from} -> delivered`);
});

t.test("attemptable states are pending and processing", async (t) => {
  t.same([...attemptable].sort(), ["pending", "processing"]);
  for (const s of deliveryStatuses) t.equal(attemptable.includes(s), canMove(s, "processing"), s);
});
