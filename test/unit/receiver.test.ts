// Self-test of test/helpers/receiver.ts: a test CA made with openssl, trusted
// process-wide (no `ca` option anywhere), and an HTTPS receiver that records
// exact bytes and answers as scripted.
import { X509Certificate } from "node:crypto";
import type http from "node:http";
import https from "node:https";
import type { TLSSocket } from "node:tls";
import t from "tap";
import { makeTestCa, mostOpenAtOnce, startReceiver, trustTestCa } from "../helpers/receiver.ts";

const hostname = "hooks.example.test";
const ca = await makeTestCa(t, [hostname]);
const rx = await startReceiver(t, { key: ca.key, cert: ca.cert });

interface Result {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
  authorized: boolean;
}

function post(path: string, body: Buffer, opts: { servername?: string; headers?: Record<string, string> } = {}): Promise<Result> {
  const servername = opts.servername ?? hostname;
  return new Promise((resolve, reject) => {
    const req = https.request(
      {
        host: "127.0.0.1",
        port: rx.port,
        servername,
        method: "POST",
        path,
        agent: false, // a fresh connection (and TLS handshake) per call
        headers: { host: servername, "content-type": "application/octet-stream", "content-length": String(body.length), ...opts.headers },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("error", reject);
        res.on("end", () =>
          resolve({
            status: res.statusCode ?? 0,
            headers: res.headers,
            body: Buffer.concat(chunks).toString("utf8"),
            authorized: (res.socket as TLSSocket).authorized,
          }),
        );
      },
    );
    req.on("error", reject);
    req.end(body);
  });
}

// Not trusted yet: the handshake must fail, so what passes below is trustTestCa's doing.
await t.rejects(post("/untrusted", Buffer.from("u")), { code: "UNABLE_TO_VERIFY_LEAF_SIGNATURE" }, "untrusted before trustTestCa");
trustTestCa(ca.caPem);

t.test("the CA files exist and the server cert names the host", async (t) => {
  t.match(ca.caPem, /^-----BEGIN CERTIFICATE-----/);
  t.match(ca.cert, /^-----BEGIN CERTIFICATE-----/);
  t.match(ca.key, /PRIVATE KEY-----/);
  const caCert = new X509Certificate(ca.caPem);
  const leaf = new X509Certificate(ca.cert);
  t.ok(caCert.ca, "CA:TRUE");
  t.ok(leaf.checkIssued(caCert) && leaf.verify(caCert.publicKey), "leaf signed by the CA");
  t.equal(leaf.checkHost(hostname), hostname);
  t.equal(leaf.checkIP("127.0.0.1"), "127.0.0.1");
  t.equal(leaf.checkHost("other.example.test"), undefined);
  t.same(leaf.keyUsage, ["1.3.6.1.5.5.7.3.1"], "serverAuth EKU");
  t.equal(leaf.publicKey.asymmetricKeyDetails?.namedCurve, "prime256v1");
});

t.test("POST over verified TLS is recorded byte for byte; replies are scriptable", async (t) => {
  const body = Buffer.concat([Buffer.from('{"id":"evt_1","amount":1099}\r\n'), Buffer.from([0x00, 0xff, 0xfe, 0x80])]);
  const before = Date.now();
  const first = await post("/hooks/a?x=1", body, { headers: { "webhook-signature": "v1,abc=" } });
  t.equal(first.status, 200);
  t.equal(first.body, "ok");
  t.ok(first.authorized, "TLS handshake verified against the default trust store");

  const [r] = await rx.waitFor(1);
  t.ok(r);
  if (!r) return;
  t.equal(r.method, "POST");
  t.equal(r.url, "/hooks/a?x=1");
  t.ok(r.body.equals(body), "exact raw bytes");
  t.equal(r.headers.host, hostname);
  t.equal(r.headers["webhook-signature"], "v1,abc=");
  t.equal(r.headers["content-type"], "application/octet-stream");
  t.ok(r.at >= before && r.at <= Date.now(), "arrival time");

  const seen: number[] = [];
  rx.setResponder((req, n) => {
    seen.push(n);
    return { status: 503, body: `busy ${req.url}`, headers: { "retry-after": "7" } };
  });
  const second = await post("/hooks/b", Buffer.from("again"));
  t.equal(second.status, 503);
  t.equal(second.body, "busy /hooks/b");
  t.equal(second.headers["retry-after"], "7");
  t.same(seen, [2], "responder gets the 1-based index");
  const all = await rx.waitFor(2);
  t.equal(all.length, 2);
  t.equal(all[1]?.body.toString(), "again");
  rx.setResponder(() => ({ status: 200, body: "ok" }));
});

t.test("a servername not in the cert fails verification", async (t) => {
  const count = rx.requests.length;
  await t.rejects(post("/hooks/x", Buffer.from("nope"), { servername: "other.example.test" }), { code: "ERR_TLS_CERT_ALTNAME_INVALID" });
  t.equal(rx.requests.length, count, "nothing recorded");
});

t.test("waitFor times out with a clear error", async (t) => {
  const n = rx.requests.length;
  await t.rejects(rx.waitFor(n + 1, 50), { message: new RegExp(`only ${n} request\\(s\\) arrived within 50 ms`) });
});

t.test("delay, destroy and hang", async (t) => {
  rx.setResponder((req) => {
    if (req.url === "/delay") return { status: 202, delayMs: 100 };
    if (req.url === "/destroy") return { status: 200, destroy: true };
    return { status: 200, hang: true };
  });
  const started = Date.now();
  const delayed = await post("/delay", Buffer.from("d"));
  t.equal(delayed.status, 202);
  t.ok(Date.now() - started >= 90, "answered after the delay");
  await t.rejects(post("/destroy", Buffer.from("x")), { code: "ECONNRESET" });
  // A hanging request: recorded, never answered; teardown must still close the server.
  const hanging = post("/hang", Buffer.from("h"));
  hanging.catch(() => {}); // settled (reset) when the receiver closes at teardown
  const all = await rx.waitFor(rx.requests.length + 1);
  t.equal(all.at(-1)?.url, "/hang");
});

t.test("mostOpenAtOnce counts requests open together; one closing as another opens did not overlap", async (t) => {
  const r = (at: number, closedAt?: number) => ({ at, method: "POST", url: "/", headers: {}, body: Buffer.alloc(0), ...(closedAt === undefined ? {} : { closedAt }) });
  t.equal(mostOpenAtOnce([]), 0);
  t.equal(mostOpenAtOnce([r(0, 10), r(10, 20), r(20, 30)]), 1, "back to back");
  t.equal(mostOpenAtOnce([r(0, 10), r(5, 20), r(6, 7), r(25)]), 3);
  t.equal(mostOpenAtOnce([r(0), r(100), r(50, 60)]), 2, "one still open counts to the end");
});
