// The rpc port tells HTTP/2 (prior knowledge) from HTTP/1.x by a connection's first bytes.
import net from "node:net";
import t from "tap";
import { protocolOf, sniff } from "../../services/rpc/protocol-sniff.ts";

const preface = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "latin1");

t.test("protocolOf: the HTTP/2 preface, a part of it, or anything else", async (t) => {
  t.equal(protocolOf(preface), "h2");
  t.equal(protocolOf(Buffer.concat([preface, Buffer.from([0, 0, 0, 4])])), "h2", "the preface and the first frame");
  t.equal(protocolOf(preface.subarray(0, 5)), "undecided", "a prefix: wait for more");
  t.equal(protocolOf(Buffer.alloc(0)), "undecided");
  t.equal(protocolOf(Buffer.from("POST /payments.v1.IntentService/GetPaymentIntent HTTP/1.1\r\n")), "http1");
  t.equal(protocolOf(Buffer.from("PRI * HTTP/1.1")), "http1", "diverges from the preface");
  t.equal(protocolOf(Buffer.from("P")), "undecided", "one byte that could start either");
});

t.test("sniff: a preface sent in pieces is put back whole for the HTTP/2 side; HTTP/1.1 at once", async (t) => {
  const decided: { isH2: boolean; bytes: string }[] = [];
  const server = net.createServer((socket) => {
    sniff(socket, 5000, (isH2) => {
      socket.once("data", (d: Buffer) => {
        decided.push({ isH2, bytes: d.toString("latin1") });
        socket.end();
      });
      socket.resume();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  t.teardown(() => server.close());
  const port = (server.address() as net.AddressInfo).port;
  const send = async (chunks: Buffer[]) => {
    const c = net.connect(port, "127.0.0.1");
    // The server may answer and close before the last piece is written.
    const closed = new Promise((r) => c.once("close", r));
    c.on("error", () => undefined);
    c.resume();
    await new Promise((r) => c.once("connect", r));
    for (const chunk of chunks) {
      if (!c.writable) break;
      c.write(chunk);
      await new Promise((r) => setTimeout(r, 20));
    }
    c.end();
    await closed;
  };
  await send([preface.subarray(0, 3), preface.subarray(3), Buffer.from("frames")]);
  await send([Buffer.from("GET / HTTP/1.1\r\n\r\n")]);
  t.equal(decided[0]?.isH2, true);
  t.match(decided[0]?.bytes, /^PRI \* HTTP\/2\.0\r\n\r\nSM\r\n\r\n/, "the preface's bytes are read again by whoever takes the socket");
  t.same(decided[1], { isH2: false, bytes: "GET / HTTP/1.1\r\n\r\n" });
});
