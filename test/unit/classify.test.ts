import t from "tap";
import { classify, errorClasses, type ErrorClass } from "../../services/delivery/classify.ts";

t.test("2xx is success", async (t) => {
  for (const statusCode of [200, 201, 204, 299]) t.equal(classify({ statusCode }), "success", `HTTP ${statusCode}`);
});

t.test("no usable response: transport, timeout, dns, connect and tls are retryable", async (t) => {
  for (const error of ["transport", "timeout", "dns", "connect", "tls"] as const) {
    t.equal(classify({ error }), "retryable", error);
  }
});

t.test("408, 425 and 429 are retryable", async (t) => {
  for (const statusCode of [408, 425, 429]) t.equal(classify({ statusCode }), "retryable", `HTTP ${statusCode}`);
});

t.test("5xx is retryable", async (t) => {
  for (const statusCode of [500, 502, 503, 504, 599]) t.equal(classify({ statusCode }), "retryable", `HTTP ${statusCode}`);
});

t.test("any other 3xx or 4xx is terminal (redirects are not followed)", async (t) => {
  const codes = [300, 301, 302, 303, 304, 307, 308, 400, 401, 403, 404, 405, 409, 410, 422, 426, 451, 499];
  for (const statusCode of codes) t.equal(classify({ statusCode }), "terminal", `HTTP ${statusCode}`);
});

t.test("a security rejection is terminal", async (t) => {
  t.equal(classify({ error: "security" }), "terminal");
});

t.test("every 3xx/4xx code outside 408/425/429 is terminal, every 5xx retryable", async (t) => {
  for (let statusCode = 300; statusCode <= 599; statusCode++) {
    const expected = statusCode >= 500 || [408, 425, 429].includes(statusCode) ? "retryable" : "terminal";
    if (classify({ statusCode }) !== expected) t.fail(`HTTP ${statusCode}: expected ${expected}, got ${classify({ statusCode })}`);
  }
  for (let statusCode = 200; statusCode <= 299; statusCode++) {
    if (classify({ statusCode }) !== "success") t.fail(`HTTP ${statusCode} should be success`);
  }
  t.pass("swept 200..599");
});

t.test("every error class is covered: only security and secret_unreadable are terminal", async (t) => {
  t.same([...errorClasses].sort(), ["connect", "dns", "secret_unreadable", "security", "timeout", "tls", "transport"]);
  for (const error of errorClasses as readonly ErrorClass[]) {
    t.equal(classify({ error }), error === "security" || error === "secret_unreadable" ? "terminal" : "retryable", error);
  }
});
