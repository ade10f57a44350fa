// The surfaces anyone can reach have limits too, per client address (IPv6 by its /64): the hosted
// checkout page and its status JSON (one budget with GetCheckout on the rpc port), and the
// terminal's create, per cashier session as well. The tests call from loopback as a proxy would,
// naming each client in X-Forwarded-For (loopback is a trusted proxy here). The budgets are per
// minute and refill evenly; the counts asserted allow the refill a burst's own duration brings.
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport, Http2SessionManager } from "@connectrpc/connect-node";
import t from "tap";
import { ErrorDetailSchema } from "../../gen/payments/v1/options_pb.ts";
import { CheckoutService } from "../../gen/payments/v1/shopper_pb.ts";
import { TerminalService } from "../../gen/payments/v1/terminal_pb.ts";
import { createCashierSession } from "../../services/terminal/sessions.ts";
import { call, idemKey, merchantWithKey, sampleIntent, startTestApp, type ApiResponse } from "../helpers/harness.ts";

const checkoutPerMinute = 120; // the default, which a shopper's page must live within
const terminal = { perSession: 5, perAddress: 8 };
const s = await startTestApp(
  t,
  {
    CHECKOUT_BASE_URL: "http://127.0.0.1/checkout",
    TRUSTED_PROXIES: "127.0.0.1,::1",
    TERMINAL_RATE_LIMIT_PER_MINUTE: String(terminal.perSession),
    TERMINAL_ADDRESS_RATE_LIMIT_PER_MINUTE: String(terminal.perAddress),
  },
  ["rpc", "gateway"],
);
const a = await merchantWithKey(s.app);
const em = () => s.app.db.em.fork();
const sessions = new Http2SessionManager(s.rpcUrl);
t.teardown(() => sessions.abort());
const transport = createGrpcTransport({ baseUrl: s.rpcUrl, sessionManager: sessions });

const created = await call(s.base, "POST", `/api/v1/merchants/${a.merchant}/payment-intents`, { key: a.key, idempotencyKey: idemKey(), body: sampleIntent });
const intent: string = created.body.data.public_id;
const from = (address: string) => ({ headers: { "x-forwarded-for": address } });
const status = (address: string) => call(s.base, "GET", `/checkout/${intent}/status.json`, from(address));
const page = (address: string) => call(s.base, "GET", `/checkout/${intent}`, from(address));

/** `n` calls, `width` at a time; the answers in order, and how long the whole took. */
async function burst(n: number, width: number, one: (i: number) => Promise<ApiResponse>): Promise<{ answers: ApiResponse[]; seconds: number }> {
  const started = Date.now();
  const answers: ApiResponse[] = new Array(n);
  let next = 0;
  await Promise.all(
    Array.from({ length: width }, async () => {
      while (next < n) {
        const i = next++;
        answers[i] = await one(i);
      }
    }),
  );
  return { answers, seconds: (Date.now() - started) / 1000 };
}

/** The most a per-minute budget can serve in `seconds`: the full bucket, and what refills meanwhile (and one for rounding). */
const most = (perMinute: number, seconds: number) => perMinute + Math.ceil((perMinute / 60) * seconds) + 1;

t.test("1,500 reads of a checkout's status.json from one address: the budget is served, the rest is 429", async (t) => {
  const { answers, seconds } = await burst(1500, 50, () => status("203.0.113.50"));
  const served = answers.filter((r) => r.status === 200).length;
  const refused = answers.filter((r) => r.status === 429);
  t.ok(served >= checkoutPerMinute && served <= most(checkoutPerMinute, seconds), `${served} served in ${seconds} s: the budget and its refill, no more`);
  t.equal(refused.length, 1500 - served, "every other read refused");
  const one = refused[0];
  t.equal(one?.body.error?.code, "rate_limited", "in the error envelope");
  t.match(one?.body.error?.request_id, /^req_/);
  t.match(one?.headers.get("retry-after") ?? "", /^[1-9][0-9]*$/, "with Retry-After in whole seconds");
  t.equal(one?.headers.get("cache-control"), "no-store");

  // A few at once each time: the bucket refills 2 a second, so on a slow machine a lone call may find a token.
  const pages = await Promise.all(Array.from({ length: 10 }, () => page("203.0.113.50")));
  const refusedPage = pages.find((r) => r.status === 429);
  t.ok(refusedPage, "the page itself shares the address's budget (each render builds a QR code)");
  t.match(refusedPage?.headers.get("content-type"), /^text\/html/);
  t.match(refusedPage?.headers.get("retry-after") ?? "", /^[1-9][0-9]*$/);

  const checkout = createClient(CheckoutService, transport);
  const grpc = await Promise.all(
    Array.from({ length: 10 }, () =>
      checkout.getCheckout({ publicId: intent }, from("203.0.113.50")).then(
        () => undefined,
        (e: unknown) => ConnectError.from(e),
      ),
    ),
  );
  const grpcRefusal = grpc.find((e) => e !== undefined);
  t.equal(grpcRefusal?.code, Code.ResourceExhausted, "GetCheckout on the rpc port counts against the same address");
  t.same(grpcRefusal?.findDetails(ErrorDetailSchema).map((d) => d.code), ["rate_limited"]);

  t.equal((await status("203.0.113.51")).status, 200, "another address is not affected");
});

t.test("a shopper's page polling every 3 s is never refused, even from an empty bucket", async (t) => {
  const shopper = "198.51.100.77";
  t.equal((await page(shopper)).status, 200, "the page loads");
  // Empty the shopper's bucket first, so what follows is the steady state: every poll lives on the refill alone.
  let refusal: ApiResponse | undefined;
  for (let i = 0; i < 20 && !refusal; i++) refusal = (await burst(checkoutPerMinute / 4, 10, () => status(shopper))).answers.find((r) => r.status === 429);
  t.ok(refusal, "the bucket was emptied");
  await new Promise((resolve) => setTimeout(resolve, Number(refusal?.headers.get("retry-after") ?? 1) * 1000));
  const polls: number[] = [];
  for (let i = 0; i < 6; i++) {
    polls.push((await status(shopper)).status);
    if (i < 5) await new Promise((resolve) => setTimeout(resolve, 3_000));
  }
  t.same(polls, [200, 200, 200, 200, 200, 200], "six polls 3 s apart, all served");
});

t.test("IPv6 clients are counted by /64: one prefix shares one budget", async (t) => {
  const n = checkoutPerMinute + 30;
  const started = Date.now();
  const { answers, seconds } = await burst(n, 20, (i) => status(`2001:db8:aa:bb:${(i + 1).toString(16)}::${i + 1}`));
  const served = answers.filter((r) => r.status === 200).length;
  t.ok(served <= most(checkoutPerMinute, seconds), `${served} of ${n} served from ${n} addresses of one /64 in ${seconds} s`);
  t.ok(answers.some((r) => r.status === 429), "the rest refused");
  // Ten more addresses of the /64 at once: the bucket refills 2 a second meanwhile (a busy machine
  // may take a second between the burst and these), so some may be served, never all, and never
  // more than the budget and its refill since the burst began.
  const after = await Promise.all(Array.from({ length: 10 }, (_, i) => status(`2001:db8:aa:bb::ff${i}`)));
  const since = (Date.now() - started) / 1000;
  const servedAfter = after.filter((r) => r.status === 200).length;
  t.ok(after.some((r) => r.status === 429), `any other address of the /64 too (${servedAfter} of 10 served, ${since} s after the burst began)`);
  t.ok(served + servedAfter <= most(checkoutPerMinute, since), "the /64 as a whole within the budget and its refill");
  t.equal((await status("2001:db8:aa:bc::1")).status, 200, "the next /64 has its own budget");
});

t.test("the terminal's create: limited per cashier session and per client address", async (t) => {
  const session = (cashier: string) => createCashierSession(em(), { merchantId: a.merchant, environment: "test", cashier, terminal: "Till 1" });
  const pay = (credential: string, address: string) =>
    call(s.base, "POST", "/api/v1/terminal/pos/payment", { key: credential, idempotencyKey: idemKey(), body: sampleIntent, ...from(address) });
  const posIntents = async () => (await em().execute<{ n: number }[]>(`select count(*)::int as n from payment_intents where merchant_id = ? and source = 'pos'`, [a.merchant]))[0]?.n;

  const stolen = await session("Ana");
  const answers = await Promise.all(Array.from({ length: terminal.perSession + 3 }, () => pay(stolen.session, "192.0.2.10")));
  t.equal(answers.filter((r) => r.status === 200).length, terminal.perSession, "the session's budget is served");
  const refused = answers.filter((r) => r.status !== 200);
  t.equal(refused.length, 3);
  for (const r of refused) {
    t.equal(r.status, 429);
    t.equal(r.body.error?.code, "rate_limited");
    t.match(r.headers.get("retry-after") ?? "", /^[1-9][0-9]*$/);
  }
  t.equal(await posIntents(), terminal.perSession, "the refused creates took no deposit address");
  t.notMatch(JSON.stringify(refused.map((r) => r.body)), stolen.session, "no session token in a refusal");

  const grpc = await createClient(TerminalService, transport)
    .createPosPayment({ network: "ethereum", asset: "USDC", requestedAmount: "1" }, { headers: { authorization: `Bearer ${stolen.session}`, "idempotency-key": idemKey(), "x-forwarded-for": "192.0.2.99" } })
    .then(
      () => undefined,
      (e: unknown) => ConnectError.from(e),
    );
  t.equal(grpc?.code, Code.ResourceExhausted, "over gRPC, from anywhere, the session is still over its budget");
  t.same(grpc?.findDetails(ErrorDetailSchema).map((d) => d.code), ["rate_limited"]);

  // Fresh sessions from the same address: the address's budget (perAddress) stops them where each session's would not.
  const more = await Promise.all([await session("Bo"), await session("Cy")].flatMap((c) => Array.from({ length: 3 }, () => pay(c.session, "192.0.2.10"))));
  t.equal(more.filter((r) => r.status === 200).length, terminal.perAddress - terminal.perSession, "the address's budget is what is left of it");
  t.equal((await pay((await session("Di")).session, "192.0.2.11")).status, 200, "a session at another address creates");
});
