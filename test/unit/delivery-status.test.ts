import t from "tap";
import { deliveryStatuses, isDeliveryStatus } from "../../services/vocabulary/delivery-status.ts";

t.test("the four spec states", async (t) => {
  t.same([...deliveryStatuses].sort(), ["delivered", "failed", "pending", "processing"]);
});

t.test("isDeliveryStatus", async (t) => {
  for (const s of ["pending", "processing", "delivered", "failed"]) t.equal(isDeliveryStatus(s), true, s);
  for (const s of ["", "PENDING", "Pending", "succeeded", "retrying", "failed ", "canceled", "constructor", "toString"]) {
    t.equal(isDeliveryStatus(s), false, JSON.stringify(s));
  }
});
