import type { Scenario } from "../types.ts";
export const retryScenario: Scenario = { name: "retry", title: "todo", metrics: {}, async run() { return {}; } };
