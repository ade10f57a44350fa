import t from "tap";
import { checkTrustedProxy, ClientAddresses } from "../../services/platform/client-address.ts";
import { loadConfig } from "../../services/platform/config.ts";

t.test("X-Forwarded-For is believed only from trusted proxies, read from the right", async (t) => {
  const c = new ClientAddresses(["127.0.0.1", "::1", "10.0.0.0/8"]);
  t.equal(c.of("203.0.113.5", "198.51.100.1"), "203.0.113.5", "an untrusted peer's header is ignored");
  t.equal(c.of("127.0.0.1", "198.51.100.1"), "198.51.100.1", "a trusted peer names the client");
  t.equal(c.of("::ffff:127.0.0.1", "198.51.100.1"), "198.51.100.1", "an IPv4-mapped peer is the same peer");
  t.equal(c.of("127.0.0.1", "198.51.100.1, 10.1.2.3"), "198.51.100.1", "trusted hops are skipped");
  t.equal(c.of("127.0.0.1", "6.6.6.6, 198.51.100.1"), "198.51.100.1", "what the client wrote on the left is not believed");
  t.equal(c.of("127.0.0.1", "not-an-address"), "127.0.0.1", "garbage stops the walk at the last trusted hop");
  t.equal(c.of("127.0.0.1", undefined), "127.0.0.1", "no header: the peer");
  t.equal(new ClientAddresses([]).of("127.0.0.1", "198.51.100.1"), "127.0.0.1", "no trusted proxies: always the peer");
});

t.test("TRUSTED_PROXIES: addresses and CIDR ranges, checked at start", async (t) => {
  t.equal(checkTrustedProxy("10.0.0.0/8"), undefined);
  t.equal(checkTrustedProxy("fd00::/8"), undefined);
  t.match(checkTrustedProxy("10.0.0.0/33"), /prefix/);
  t.match(checkTrustedProxy("proxy.local"), /not an IP/);
  t.same(loadConfig({ TRUSTED_PROXIES: "" }).trustedProxies, [], "empty: trust no proxy");
  t.same(loadConfig({}).trustedProxies, [], "default: none, only the socket's peer counts");
  t.same(loadConfig({ TRUSTED_PROXIES: "127.0.0.1,::1" }).trustedProxies, ["127.0.0.1", "::1"], "loopback when a proxy on the host is meant");
  t.throws(() => loadConfig({ TRUSTED_PROXIES: "10.0.0.1,nope" }), { message: /TRUSTED_PROXIES: "nope" is not an IP/ }, "one clear line naming the bad entry");
});
