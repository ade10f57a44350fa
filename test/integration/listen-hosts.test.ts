// HOST opens the merchant API to a network; the rpc port (AdminService, ChainService, reflection)
// and the ops port (/metrics) stay on loopback unless RPC_HOST / OPS_HOST say otherwise. The
// service is started as an operator starts it (main.ts), and reached as another machine would:
// through an address of this machine other than 127.0.0.1.
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import net from "node:net";
import { networkInterfaces, tmpdir } from "node:os";
import path from "node:path";
import t from "tap";
import { createTestDatabase, deleteStream, natsUrl, uniqueName } from "../helpers/harness.ts";
import { freePort, spawnService } from "../helpers/processes.ts";

/** Whether a TCP connection to host:port is accepted (false when refused). */
function connects(host: string, port: number): Promise<boolean> {
  return new Promise((resolve, reject) => {
    const socket = net.connect({ host, port });
    socket.setTimeout(5000, () => {
      socket.destroy();
      reject(new Error(`${host}:${port} neither accepted nor refused within 5 s`));
    });
    socket.once("connect", () => {
      socket.destroy();
      resolve(true);
    });
    socket.once("error", (err: NodeJS.ErrnoException) => (err.code === "ECONNREFUSED" ? resolve(false) : reject(err)));
  });
}

// 127.0.0.2 is this machine, yet a listener on 127.0.0.1 does not take it while one on 0.0.0.0
// does: the check holds on a machine with no network too. An interface's own address is what
// another machine would use, when there is one.
const external = Object.values(networkInterfaces())
  .flat()
  .find((a) => a && a.family === "IPv4" && !a.internal)?.address;
const elsewhere = ["127.0.0.2", ...(external ? [external] : [])];

t.test("HOST=0.0.0.0: the REST port answers on every address, the rpc and ops ports only on loopback", async (t) => {
  const databaseUrl = await createTestDatabase(t);
  const prefix = uniqueName("t");
  t.teardown(() => deleteStream(prefix));
  const dataDir = mkdtempSync(path.join(tmpdir(), "listen-hosts-"));
  t.teardown(() => rmSync(dataDir, { recursive: true, force: true }));
  const ports = new Set<number>();
  while (ports.size < 3) ports.add(await freePort());
  const [port, rpcPort, opsPort] = [...ports] as [number, number, number];
  const service = spawnService(t, ["rpc", "gateway"], {
    DATABASE_URL: databaseUrl,
    NATS_URL: natsUrl,
    JETSTREAM_PREFIX: prefix,
    SECRET_ENCRYPTION_KEY: randomBytes(32).toString("hex"),
    DATA_DIR: dataDir,
    LOG_LEVEL: "warn",
    HOST: "0.0.0.0",
    RPC_HOST: undefined,
    OPS_HOST: undefined,
    PORT: String(port),
    RPC_PORT: String(rpcPort),
    OPS_PORT: String(opsPort),
  });
  await service.started;

  for (const address of elsewhere) {
    const rest = await fetch(`http://${address}:${port}/api/v1/merchants/m_x/payment-intents`);
    t.equal(rest.status, 401, `the REST API answers on ${address} (401 without a key)`);
    t.notOk(await connects(address, rpcPort), `the rpc port refuses a connection on ${address}`);
    t.notOk(await connects(address, opsPort), `the ops port refuses a connection on ${address}`);
  }
  t.ok(await connects("127.0.0.1", rpcPort), "the rpc port is on 127.0.0.1");
  t.equal((await fetch(`http://127.0.0.1:${opsPort}/healthz`)).status, 200, "the ops port answers on 127.0.0.1");

  const banner = service.stdout();
  t.match(banner, `REST API     http://0.0.0.0:${port}/`, "the banner shows the REST API on HOST");
  t.match(banner, `gRPC/Connect http://127.0.0.1:${rpcPort} `, "the rpc port on loopback");
  t.match(banner, `health       http://127.0.0.1:${opsPort}/healthz`, "the ops port on loopback");
});
