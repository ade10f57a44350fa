// The same acceptance tests, against a gateway-only process that reaches the services over gRPC (RPC_URL).
process.env.TEST_SPLIT = "1";
await import("./intents-rest.test.ts");
