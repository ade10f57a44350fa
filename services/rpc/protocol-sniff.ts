import type net from "node:net";

/** What every HTTP/2 client sends first (RFC 9113 3.4); no HTTP/1.x request line starts with it. */
const h2Preface = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "latin1");

/** What a connection's first bytes say it speaks: HTTP/2 with prior knowledge, HTTP/1.x, or not yet known. */
export function protocolOf(head: Buffer): "h2" | "http1" | "undecided" {
  const n = Math.min(head.length, h2Preface.length);
  if (!head.subarray(0, n).equals(h2Preface.subarray(0, n))) return "http1";
  return n < h2Preface.length ? "undecided" : "h2";
}

/**
 * Reads a connection's first bytes until they are, or cannot be, the HTTP/2 preface, then puts
 * them back for whichever server takes it. A connection that sends nothing is closed once idle.
 */
export function sniff(socket: net.Socket, idleMs: number, decide: (isH2: boolean) => void): void {
  let head = Buffer.alloc(0);
  const onTimeout = () => socket.destroy();
  // A reset, or an end, before the decision: nothing to hand over.
  const onError = () => socket.destroy();
  const onData = (chunk: Buffer) => {
    head = Buffer.concat([head, chunk]);
    const protocol = protocolOf(head);
    if (protocol === "undecided") return;
    socket.off("data", onData);
    socket.off("timeout", onTimeout);
    socket.off("error", onError);
    socket.off("end", onError);
    socket.setTimeout(0);
    socket.pause();
    socket.unshift(head);
    decide(protocol === "h2");
  };
  socket.setTimeout(idleMs);
  socket.on("timeout", onTimeout);
  socket.on("error", onError);
  socket.on("end", onError);
  socket.on("data", onData);
}

