import type { Scenario } from "../types.ts";
export const deliveryScenario: Scenario = { name: "delivery", title: "todo", metrics: {}, async run() { return {}; } };
