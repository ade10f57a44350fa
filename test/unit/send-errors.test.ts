import t from "tap";
import { errorClassOf } from "../../services/delivery/send.ts";
import { classify } from "../../services/delivery/classify.ts";

/** An error shaped like the ones Node's net/tls/dns layers raise (code + Node's own message). */
function nodeError(code: string, message: string): NodeJS.ErrnoException {
  const err: NodeJS.ErrnoException = new Error(message);
  err.code = code;
  return err;
}

t.test("connection refused is a connect error", async (t) => {
  t.equal(errorClassOf(nodeError("ECONNREFUSED", "connect ECONNREFUSED 203.0.113.7:443")), "connect");
});

t.test("an unknown host is a dns error", async (t) => {
  t.equal(errorClassOf(nodeError("ENOTFOUND", "getaddrinfo ENOTFOUND hooks.example.invalid")), "dns");
});

t.test("a reset connection is a transport error", async (t) => {
  t.equal(errorClassOf(nodeError("ECONNRESET", "read ECONNRESET")), "transport");
  t.equal(errorClassOf(nodeError("ECONNRESET", "socket hang up")), "transport");
});

t.test("a broken pipe is a transport error", async (t) => {
  t.equal(errorClassOf(nodeError("EPIPE", "write EPIPE")), "transport");
});

t.test("certificate problems are tls errors", async (t) => {
  const cases: [string, string][] = [
    ["ERR_TLS_CERT_ALTNAME_INVALID", "Hostname/IP does not match certificate's altnames: Host: a.example. is not in the cert's altnames: DNS:b.example"],
    ["UNABLE_TO_VERIFY_LEAF_SIGNATURE", "unable to verify the first certificate"],
    ["DEPTH_ZERO_SELF_SIGNED_CERT", "self-signed certificate"],
  ];
  for (const [code, message] of cases) t.equal(errorClassOf(nodeError(code, message)), "tls", code);
});

t.test("tls codes are recognised by code alone, not by the wording of the message", async (t) => {
  for (const code of ["ERR_TLS_CERT_ALTNAME_INVALID", "UNABLE_TO_VERIFY_LEAF_SIGNATURE", "DEPTH_ZERO_SELF_SIGNED_CERT"]) {
    t.equal(errorClassOf(nodeError(code, "x")), "tls", code);
  }
});

t.test("an error with no code is a transport error", async (t) => {
  t.equal(errorClassOf(new Error("something odd")), "transport");
});

t.test("all of these are retried", async (t) => {
  const errs = [
    nodeError("ECONNREFUSED", "connect ECONNREFUSED 203.0.113.7:443"),
    nodeError("ENOTFOUND", "getaddrinfo ENOTFOUND hooks.example.invalid"),
    nodeError("ECONNRESET", "read ECONNRESET"),
    nodeError("EPIPE", "write EPIPE"),
    nodeError("DEPTH_ZERO_SELF_SIGNED_CERT", "self-signed certificate"),
  ];
  for (const err of errs) t.equal(classify({ error: errorClassOf(err) }), "retryable", err.code ?? err.message);
});
