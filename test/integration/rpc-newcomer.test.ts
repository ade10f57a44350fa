// The rpc port as a newcomer meets it: Connect and gRPC-Web over plain HTTP/1.1 (fetch, curl,
// browsers) beside gRPC over h2c on the same port, gRPC server reflection for `buf curl`
// without the proto files (GRPC_REFLECTION), and the runnable examples of docs/api.md ("gRPC").
import { execFile } from "node:child_process";
import { accessSync, constants, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import http from "node:http";
import net from "node:net";
import path from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { create, fromBinary, type MessageInitShape } from "@bufbuild/protobuf";
import { FileDescriptorProtoSchema } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError, createClient, type Transport } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
import t from "tap";
import * as v1 from "../../gen/grpc/reflection/v1/reflection_pb.ts";
import * as v1alpha from "../../gen/grpc/reflection/v1alpha/reflection_pb.ts";
import { ErrorDetailSchema } from "../../gen/payments/v1/options_pb.ts";
import { IntentService } from "../../gen/payments/v1/payment_intents_pb.ts";
import { services } from "../../services/app/routes.ts";
import { startRpcServer } from "../../services/rpc/server.ts";
import { idemKey, merchantWithKey, sampleIntent, startTestApp, until } from "../helpers/harness.ts";

const root = path.resolve(import.meta.dirname, "../..");
const buf = path.join(root, "node_modules/.bin/buf");

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

function run(file: string, args: string[], env: Record<string, string> = {}, cwd = root): Promise<Run> {
  return new Promise((resolve) => {
    execFile(
      file,
      args,
      { cwd, env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "/tmp", ...env }, timeout: 30_000, encoding: "utf8" },
      (err, stdout, stderr) => resolve({ code: err ? (typeof err.code === "number" ? err.code : null) : 0, stdout, stderr }),
    );
  });
}

/** `npx buf curl …`, as docs/api.md shows it (npx runs node_modules/.bin/buf). */
const bufCurl = (...args: string[]) => run(buf, ["curl", ...args]);

const { app, rpcUrl } = await startTestApp(t, {}, ["rpc"]);
const a = await merchantWithKey(app);
const auth = { authorization: `Bearer ${a.key}` };
const intent = await createClient(IntentService, createGrpcTransport({ baseUrl: rpcUrl })).createPaymentIntent(
  { merchant: a.merchant, network: sampleIntent.network, asset: sampleIntent.asset, requestedAmount: sampleIntent.requested_amount },
  { headers: { ...auth, "idempotency-key": idemKey() } },
);
const publicId = intent.data?.publicId ?? "";
const getPath = "/payments.v1.IntentService/GetPaymentIntent";

t.test("Connect unary JSON over HTTP/1.1 with plain fetch", async (t) => {
  const res = await fetch(`${rpcUrl}${getPath}`, {
    method: "POST",
    headers: { "content-type": "application/json", ...auth },
    body: JSON.stringify({ merchant: a.merchant, public_id: publicId }),
  });
  t.equal(res.status, 200);
  const body = (await res.json()) as { data?: { publicId?: string; status?: string } };
  t.equal(body.data?.publicId, publicId, "the intent comes back");
  t.equal(body.data?.status, "pending");

  const missing = await fetch(`${rpcUrl}${getPath}`, {
    method: "POST",
    headers: { "content-type": "application/json", ...auth },
    body: JSON.stringify({ merchant: a.merchant, public_id: "pi_unknown" }),
  });
  t.equal(missing.status, 404, "an error is the Connect error of HTTP/2");
  const err = (await missing.json()) as { code?: string; details?: { type?: string }[] };
  t.equal(err.code, "not_found");
  t.equal(err.details?.[0]?.type, "payments.v1.ErrorDetail", "with the ErrorDetail");
  t.match(missing.headers.get("x-request-id") ?? "", /^req_/, "and a request id");
});

t.test("the answer really is HTTP/1.1, and the connection is kept alive for the next call", async (t) => {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  t.teardown(() => agent.destroy());
  const sockets = new Set<net.Socket>();
  const post = () =>
    new Promise<{ version: string; status: number; body: string }>((resolve, reject) => {
      const req = http.request(`${rpcUrl}${getPath}`, { method: "POST", agent, headers: { "content-type": "application/json", ...auth } }, (res) => {
        let body = "";
        res.setEncoding("utf8");
        res.on("data", (c: string) => (body += c));
        res.on("end", () => resolve({ version: res.httpVersion, status: res.statusCode ?? 0, body }));
      });
      req.on("socket", (s) => sockets.add(s));
      req.on("error", reject);
      req.end(JSON.stringify({ merchant: a.merchant, public_id: publicId }));
    });
  for (let i = 0; i < 2; i++) {
    const res = await post();
    t.equal(res.version, "1.1");
    t.equal(res.status, 200);
    t.match(res.body, publicId);
  }
  t.equal(sockets.size, 1, "both calls on one connection");
});

t.test("Connect, gRPC-Web and gRPC clients on the same port", async (t) => {
  const transports: Record<string, Transport> = {
    "connect over HTTP/1.1": createConnectTransport({ baseUrl: rpcUrl, httpVersion: "1.1" }),
    "gRPC-Web over HTTP/1.1": createGrpcWebTransport({ baseUrl: rpcUrl, httpVersion: "1.1" }),
    "connect over h2c": createConnectTransport({ baseUrl: rpcUrl, httpVersion: "2" }),
    "gRPC-Web over h2c": createGrpcWebTransport({ baseUrl: rpcUrl, httpVersion: "2" }),
    "gRPC over h2c": createGrpcTransport({ baseUrl: rpcUrl }),
  };
  for (const [name, transport] of Object.entries(transports)) {
    const client = createClient(IntentService, transport);
    const got = await client.getPaymentIntent({ merchant: a.merchant, publicId }, { headers: auth });
    t.equal(got.data?.publicId, publicId, `${name}: the intent`);
    const err = await client.getPaymentIntent({ merchant: a.merchant, publicId: "pi_unknown" }, { headers: auth }).then(
      () => undefined,
      (e: unknown) => ConnectError.from(e),
    );
    t.equal(err?.code, Code.NotFound, `${name}: NotFound`);
    t.equal(err?.findDetails(ErrorDetailSchema)[0]?.code, "not_found", `${name}: with its ErrorDetail`);
    const unauthenticated = await client.getPaymentIntent({ merchant: a.merchant, publicId }).then(
      () => undefined,
      (e: unknown) => ConnectError.from(e),
    );
    t.equal(unauthenticated?.code, Code.Unauthenticated, `${name}: a credential is still required`);
  }
});

t.test("docs/api.md: plain curl calls a method over HTTP/1.1", async (t) => {
  // curl http://… speaks HTTP/1.1; before, the h2c-only port answered it with bytes curl took for HTTP/0.9.
  const curl = ["/usr/bin/curl", "/usr/local/bin/curl"].find((p) => {
    try {
      accessSync(p, constants.X_OK);
      return true;
    } catch {
      return false;
    }
  });
  if (!curl) {
    t.comment("curl is not installed: skipped");
    return;
  }
  const out = await run(curl, [
    "-sS",
    "-H",
    "Content-Type: application/json",
    "-H",
    `Authorization: Bearer ${a.key}`,
    "-d",
    JSON.stringify({ merchant: a.merchant, public_id: publicId }),
    `${rpcUrl}${getPath}`,
  ]);
  t.equal(out.code, 0, out.stderr);
  t.equal((JSON.parse(out.stdout) as { data?: { publicId?: string } }).data?.publicId, publicId);
});

t.test("docs/api.md: buf curl lists the services and calls one, with reflection only", async (t) => {
  const listed = await bufCurl("--protocol", "grpc", "--http2-prior-knowledge", "--list-services", rpcUrl);
  t.equal(listed.code, 0, listed.stderr);
  const names = listed.stdout.trim().split("\n");
  for (const s of services) t.ok(names.includes(s.typeName), `lists ${s.typeName}`);
  t.ok(names.includes("grpc.reflection.v1.ServerReflection"), "and reflection itself");

  const methods = await bufCurl("--protocol", "grpc", "--http2-prior-knowledge", "--list-methods", rpcUrl);
  t.equal(methods.code, 0, methods.stderr);
  t.ok(methods.stdout.split("\n").includes("payments.v1.IntentService/GetPaymentIntent"), "lists every service's methods");

  // No --schema: the request and response types come from the server. Run from an empty
  // directory, so nothing local (proto/, buf.yaml) could stand in for reflection.
  const empty = mkdtempSync(path.join(tmpdir(), "buf-curl-"));
  t.teardown(() => rmSync(empty, { recursive: true, force: true }));
  const called = await run(
    buf,
    [
      "curl",
    "--protocol",
    "grpc",
    "--http2-prior-knowledge",
    "-H",
    `Authorization: Bearer ${a.key}`,
    "-d",
    JSON.stringify({ merchant: a.merchant, public_id: publicId }),
      `${rpcUrl}${getPath}`,
    ],
    {},
    empty,
  );
  t.equal(called.code, 0, called.stderr);
  const body = JSON.parse(called.stdout) as { data?: { publicId?: string; requestedAmount?: string } };
  t.equal(body.data?.publicId, publicId, "the intent");
  t.equal(body.data?.requestedAmount, sampleIntent.requested_amount);

  const refused = await bufCurl("--protocol", "grpc", "--http2-prior-knowledge", "-d", JSON.stringify({ merchant: a.merchant, public_id: publicId }), `${rpcUrl}${getPath}`);
  t.not(refused.code, 0, "without the Authorization header the call is refused");
  t.match(refused.stderr, /unauthenticated/);

  const alpha = await bufCurl("--protocol", "grpc", "--http2-prior-knowledge", "--reflect-protocol", "grpc-v1alpha", "--list-services", rpcUrl);
  t.equal(alpha.code, 0, alpha.stderr);
  t.ok(alpha.stdout.split("\n").includes("payments.v1.IntentService"), "v1alpha reflection lists them too");
});

type ReflectionRequest = MessageInitShape<typeof v1.ServerReflectionRequestSchema>;

/** One reflection stream: sends each request, returns the answers in order. */
async function reflect(transport: Transport, version: typeof v1 | typeof v1alpha, requests: ReflectionRequest[]): Promise<v1.ServerReflectionResponse[]> {
  const client = createClient(version.ServerReflection as typeof v1.ServerReflection, transport);
  async function* send() {
    for (const r of requests) yield create(version.ServerReflectionRequestSchema as typeof v1.ServerReflectionRequestSchema, r);
  }
  const out: v1.ServerReflectionResponse[] = [];
  for await (const res of client.serverReflectionInfo(send(), { timeoutMs: 20_000 })) out.push(res);
  return out;
}

function fileNames(res: v1.ServerReflectionResponse | undefined): string[] {
  if (res?.messageResponse.case !== "fileDescriptorResponse") return [];
  return res.messageResponse.value.fileDescriptorProto.map((b) => fromBinary(FileDescriptorProtoSchema, b).name);
}

t.test("reflection v1 and v1alpha answer from the generated descriptors", async (t) => {
  const transport = createGrpcTransport({ baseUrl: rpcUrl });
  for (const version of [v1, v1alpha]) {
    const name = version === v1 ? "v1" : "v1alpha";
    const [list, bySymbol, byMethod, byFile, again, unknown, extension, numbers] = await reflect(transport, version, [
      { messageRequest: { case: "listServices", value: "" } },
      { messageRequest: { case: "fileContainingSymbol", value: "payments.v1.IntentService" } },
      { messageRequest: { case: "fileContainingSymbol", value: "payments.v1.IntentService.GetPaymentIntent" } },
      { messageRequest: { case: "fileByFilename", value: "payments/v1/options.proto" } },
      { messageRequest: { case: "fileContainingSymbol", value: "payments.v1.PaymentIntent" } },
      { messageRequest: { case: "fileContainingSymbol", value: "payments.v1.NoSuchThing" } },
      { messageRequest: { case: "fileContainingExtension", value: { containingType: "google.protobuf.MethodOptions", extensionNumber: routeOptionNumber() } } },
      { messageRequest: { case: "allExtensionNumbersOfType", value: "google.protobuf.MethodOptions" } },
    ]);
    t.equal(list?.messageResponse.case, "listServicesResponse", `${name}: list_services`);
    const listed = list?.messageResponse.case === "listServicesResponse" ? list.messageResponse.value.service.map((s) => s.name) : [];
    t.ok(services.every((s) => listed.includes(s.typeName)), `${name}: every payments service`);
    const files = fileNames(bySymbol);
    t.equal(files[0], "payments/v1/payment_intents.proto", `${name}: the file declaring the symbol first`);
    t.ok(files.includes("payments/v1/options.proto"), `${name}: with its dependencies (options.proto)`);
    t.ok(files.includes("google/protobuf/descriptor.proto"), `${name}: down to google/protobuf`);
    t.same(fileNames(byMethod), ["payments/v1/payment_intents.proto"], `${name}: a method's file, its dependencies already sent`);
    t.same(fileNames(byFile), ["payments/v1/options.proto"], `${name}: by file name`);
    t.same(fileNames(again), ["payments/v1/payment_intents.proto"], `${name}: asked again, the file comes again`);
    const parsed = fromBinary(FileDescriptorProtoSchema, (bySymbol?.messageResponse.value as v1.FileDescriptorResponse).fileDescriptorProto[0]!);
    t.ok(parsed.service.some((s) => s.name === "IntentService" && s.method.some((m) => m.name === "GetPaymentIntent" && m.options)), `${name}: methods keep their route options`);
    t.equal(unknown?.messageResponse.case, "errorResponse", `${name}: an unknown symbol`);
    t.equal(unknown?.messageResponse.case === "errorResponse" ? unknown.messageResponse.value.errorCode : -1, Code.NotFound);
    t.same(fileNames(extension), ["payments/v1/options.proto"], `${name}: the file of the (payments.v1.route) extension`);
    t.ok(numbers?.messageResponse.case === "allExtensionNumbersResponse" && numbers.messageResponse.value.extensionNumber.includes(routeOptionNumber()), `${name}: extension numbers`);
  }
});

function routeOptionNumber(): number {
  const options = services[0]!.file.dependencies.find((f) => f.proto.name === "payments/v1/options.proto");
  const route = options?.extensions.find((x) => x.name === "route");
  if (!route) throw new Error("payments/v1/options.proto has no route extension");
  return route.number;
}

t.test("docs/api.md: the Connect client example runs", async (t) => {
  const out = await run(process.execPath, ["examples/connect-client.ts"], { RPC_URL: rpcUrl, API_KEY: a.key, MERCHANT: a.merchant });
  t.equal(out.code, 0, out.stderr);
  const printed = JSON.parse(out.stdout) as { public_id?: string; status?: string; requested_amount?: string };
  t.match(printed.public_id, /^pi_/);
  t.equal(printed.status, "pending");
  t.equal(printed.requested_amount, "12.50");
  const got = await createClient(IntentService, createGrpcTransport({ baseUrl: rpcUrl })).getPaymentIntent(
    { merchant: a.merchant, publicId: printed.public_id ?? "" },
    { headers: auth },
  );
  t.equal(got.data?.publicId, printed.public_id, "the intent it created exists");

  const bad = await run(process.execPath, ["examples/connect-client.ts"], { RPC_URL: rpcUrl, API_KEY: "sk_test_wrong", MERCHANT: a.merchant });
  t.equal(bad.code, 1, "a refused call exits 1");
  t.match(bad.stderr, /^Unauthenticated invalid_api_key: /, "naming the error and its documented code");
});

async function reflectionRefusal(rpc: string): Promise<ConnectError | undefined> {
  return reflect(createGrpcTransport({ baseUrl: rpc }), v1, [{ messageRequest: { case: "listServices", value: "" } }]).then(
    () => undefined,
    (e: unknown) => ConnectError.from(e),
  );
}

t.test("GRPC_REFLECTION=off: reflection is Unimplemented, the services answer", async (t) => {
  const off = await startTestApp(t, { GRPC_REFLECTION: "off" }, ["rpc"]);
  const b = await merchantWithKey(off.app);
  const err = await reflectionRefusal(off.rpcUrl);
  t.equal(err?.code, Code.Unimplemented);
  t.match(err?.rawMessage, /GRPC_REFLECTION=off/, "the message names the switch");
  const alpha = await reflect(createGrpcTransport({ baseUrl: off.rpcUrl }), v1alpha, [{ messageRequest: { case: "listServices", value: "" } }]).then(
    () => undefined,
    (e: unknown) => ConnectError.from(e),
  );
  t.equal(alpha?.code, Code.Unimplemented, "v1alpha too");
  const listed = await bufCurl("--protocol", "grpc", "--http2-prior-knowledge", "--list-services", off.rpcUrl);
  t.not(listed.code, 0, "buf curl cannot list services");
  t.match(listed.stderr, /unimplemented/i);
  const list = await createClient(IntentService, createConnectTransport({ baseUrl: off.rpcUrl, httpVersion: "1.1" })).listPaymentIntents(
    { merchant: b.merchant, limit: 1 },
    { headers: { authorization: `Bearer ${b.key}` } },
  );
  t.same(list.data, [], "a payments method still answers");
});

t.test("default (auto): reflection stops once the installation has a Live API key; GRPC_REFLECTION=on keeps it", async (t) => {
  const auto = await startTestApp(t, {}, ["rpc"]);
  const on = await startTestApp(t, { GRPC_REFLECTION: "on" }, ["rpc"]);
  t.equal(await reflectionRefusal(auto.rpcUrl), undefined, "Test keys only: served");
  await merchantWithKey(auto.app, "live");
  await merchantWithKey(on.app, "live");
  const err = await reflectionRefusal(auto.rpcUrl);
  t.equal(err?.code, Code.Unimplemented, "a Live key: Unimplemented, without a restart");
  t.match(err?.rawMessage, /Live API keys.*GRPC_REFLECTION=on/, "the message says why and how to turn it on");
  t.equal(await reflectionRefusal(on.rpcUrl), undefined, "GRPC_REFLECTION=on: served with Live keys");
});

t.test("one port, both protocols: idle connections close, close() is graceful for each", async (t) => {
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  let started = 0;
  const server = await startRpcServer(
    (router) =>
      router.service(IntentService, {
        // Holds every call until released: calls in flight when close() begins.
        async getPaymentIntent(req) {
          started++;
          await released;
          return { data: { publicId: req.publicId } };
        },
      }),
    [],
    "127.0.0.1",
    0,
    // Long enough for the calls held below: a connection quiet for this long is closed, call or not.
    { bodyLimitBytes: 1024 * 1024, idleTimeoutMs: 1500 },
  );
  const url = `http://127.0.0.1:${server.port}`;

  // A connection that never says anything is not held open.
  const silent = net.connect(server.port, "127.0.0.1");
  silent.on("error", () => undefined);
  const silentClosed = new Promise<string>((resolve) => silent.once("close", () => resolve("closed")));
  t.equal(await Promise.race([silentClosed, sleep(10_000).then(() => "still open")]), "closed", "a connection that sends nothing is closed once idle");

  const h1 = createClient(IntentService, createConnectTransport({ baseUrl: url, httpVersion: "1.1" }));
  const h2 = createClient(IntentService, createGrpcTransport({ baseUrl: url }));
  // Settled at once: a failure shows as a failed assertion below, not as an unhandled rejection.
  const inFlight = [h1.getPaymentIntent({ publicId: "pi_h1" }), h2.getPaymentIntent({ publicId: "pi_h2" })].map((p) =>
    p.then(
      (res) => res.data?.publicId,
      (e: unknown) => `failed: ${ConnectError.from(e).message}`,
    ),
  );
  await until("both calls are in the handler", async () => started === 2, 10_000, () => `${started} started`);
  const closed = server.close();
  release();
  const [a1, a2] = await Promise.all(inFlight);
  t.equal(a1, "pi_h1", "the HTTP/1.1 call in flight is answered");
  t.equal(a2, "pi_h2", "the h2c call in flight is answered");
  await closed;
  t.pass("close() resolves once both are done");
  const refused = await h1.getPaymentIntent({ publicId: "pi_after" }).then(
    () => undefined,
    (e: unknown) => ConnectError.from(e),
  );
  t.equal(refused?.code, Code.Unavailable, "then the port is closed");
});
