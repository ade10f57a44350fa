import t from "tap";
import {
  checkUrlSyntax,
  maxUrlLength,
  nonPublicReason,
  PolicyRejection,
  resolveTarget,
  type Lookup,
} from "../../services/delivery/url-policy.ts";
import { parseConnectTo, type ConnectTo } from "../../services/platform/connect-to.ts";

/** The bit of a tap test the helpers below use. */
type Tap = Pick<typeof t, "fail">;

/** The PolicyRejection `fn` throws (fails the test if it throws anything else or nothing). */
function rejection(t: Tap, fn: () => unknown): PolicyRejection | undefined {
  try {
    fn();
  } catch (err) {
    if (err instanceof PolicyRejection) return err;
    t.fail(`expected a PolicyRejection, got ${String(err)}`);
    return undefined;
  }
  t.fail("expected a PolicyRejection, nothing was thrown");
  return undefined;
}

async function asyncRejection(t: Tap, p: Promise<unknown>): Promise<PolicyRejection | undefined> {
  try {
    await p;
  } catch (err) {
    if (err instanceof PolicyRejection) return err;
    t.fail(`expected a PolicyRejection, got ${String(err)}`);
    return undefined;
  }
  t.fail("expected a PolicyRejection, the promise resolved");
  return undefined;
}

type Answer = { address: string; family: number };
/** A fake lookup answering from a table, recording the names asked for. */
function fakeLookup(table: Record<string, string[]>): Lookup & { calls: string[] } {
  const calls: string[] = [];
  const fn = async (hostname: string): Promise<Answer[]> => {
    calls.push(hostname);
    const addrs = table[hostname];
    if (!addrs) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: "ENOTFOUND", hostname });
    return addrs.map((address) => ({ address, family: address.includes(":") ? 6 : 4 }));
  };
  return Object.assign(fn, { calls });
}

const noLookup: Lookup = async (hostname) => {
  throw new Error(`lookup must not be called (asked for ${hostname})`);
};

t.test("PolicyRejection", async (t) => {
  const e = new PolicyRejection("the URL must use https");
  t.ok(e instanceof Error);
  t.equal(e.reason, "the URL must use https");
  t.equal(e.message, "the URL must use https");
  t.equal(e.name, "PolicyRejection");
  t.equal(maxUrlLength, 2048);
});

t.test("nonPublicReason: public addresses", async (t) => {
  for (const ip of [
    "8.8.8.8",
    "1.1.1.1",
    "93.184.216.34",
    "100.63.255.255", // just below CGNAT
    "100.128.0.0", // just above CGNAT
    "172.15.255.255",
    "172.32.0.0",
    "192.0.3.1",
    "198.17.255.255",
    "198.20.0.0",
    "223.255.255.255",
    "2606:4700:4700::1111",
    "2001:4860:4860::8888",
    "2a00:1450:4001:80b::200e",
    "::ffff:8.8.8.8",
    "::ffff:808:808",
    "64:ff9b::8.8.8.8",
    "2002:0808:0808::1",
    "[2606:4700:4700::1111]",
  ]) {
    t.equal(nonPublicReason(ip), undefined, `${ip} is public`);
  }
});

t.test("nonPublicReason: IPv4 special-purpose blocks", async (t) => {
  const cases: [string, RegExp][] = [
    ["127.0.0.1", /^loopback$/],
    ["127.255.255.254", /^loopback$/],
    ["0.0.0.0", /^unspecified$/],
    ["0.1.2.3", /^unspecified$/],
    ["10.0.0.1", /^private$/],
    ["10.255.255.255", /^private$/],
    ["172.16.0.1", /^private$/],
    ["172.31.255.255", /^private$/],
    ["192.168.1.1", /^private$/],
    ["169.254.0.1", /^link-local$/],
    ["169.254.169.254", /^link-local$/],
    ["100.64.0.1", /^carrier-grade NAT$/],
    ["100.127.255.255", /^carrier-grade NAT$/],
    ["224.0.0.1", /^multicast$/],
    ["239.255.255.250", /^multicast$/],
    ["255.255.255.255", /^broadcast$/],
    ["240.0.0.1", /^reserved$/],
    ["255.255.255.254", /^reserved$/],
    ["192.0.0.8", /IETF/],
    ["192.0.2.1", /^documentation$/],
    ["198.51.100.7", /^documentation$/],
    ["203.0.113.9", /^documentation$/],
    ["198.18.0.1", /^benchmarking$/],
    ["198.19.255.255", /^benchmarking$/],
    ["192.88.99.1", /6to4 relay/],
  ];
  for (const [ip, re] of cases) t.match(nonPublicReason(ip), re, `${ip}`);
});

t.test("nonPublicReason: IPv6 blocks", async (t) => {
  const cases: [string, RegExp][] = [
    ["::1", /^loopback$/],
    ["::", /^unspecified$/],
    ["[::1]", /^loopback$/],
    ["fe80::1", /^link-local$/],
    ["febf:ffff::1", /^link-local$/],
    ["fe80::1%eth0", /^link-local$/],
    ["fc00::1", /^unique local$/],
    ["fd12:3456:789a::1", /^unique local$/],
    ["ff02::1", /^multicast$/],
    ["ff0e::101", /^multicast$/],
    ["2001:db8::1", /^documentation$/],
    ["2001:db8:ffff::1", /^documentation$/],
    ["3fff::1", /^documentation$/],
    ["fec0::1", /^site-local$/],
    ["100::1", /^discard-only$/],
    ["2001:0:4136:e378:8000:63bf:3fff:fdd2", /^Teredo$/],
    ["2001:2::1", /^benchmarking$/],
    ["4000::1", /^reserved$/], // outside 2000::/3
    ["5f00::1", /^reserved$/],
  ];
  for (const [ip, re] of cases) t.match(nonPublicReason(ip), re, `${ip}`);
});

t.test("nonPublicReason: IPv6 forms embedding IPv4 are judged by the IPv4 address", async (t) => {
  const cases: [string, RegExp][] = [
    ["::ffff:127.0.0.1", /^loopback \(IPv4-mapped 127\.0\.0\.1\)$/],
    ["::ffff:7f00:1", /^loopback \(IPv4-mapped 127\.0\.0\.1\)$/],
    ["::ffff:10.1.2.3", /^private \(IPv4-mapped 10\.1\.2\.3\)$/],
    ["::ffff:169.254.169.254", /^link-local/],
    ["::ffff:0.0.0.0", /^unspecified/],
    ["::127.0.0.1", /^loopback \(IPv4-compatible 127\.0\.0\.1\)$/],
    ["::10.0.0.1", /^private \(IPv4-compatible/],
    ["::ffff:0:192.168.0.1", /^private \(IPv4-translated 192\.168\.0\.1\)$/],
    ["64:ff9b::127.0.0.1", /^loopback \(NAT64 127\.0\.0\.1\)$/],
    ["64:ff9b::a9fe:a9fe", /^link-local \(NAT64 169\.254\.169\.254\)$/],
    ["64:ff9b::10.0.0.1", /^private \(NAT64/],
    ["64:ff9b:1::10.0.0.1", /^private \(local-use NAT64 10\.0\.0\.1\)$/],
    ["64:ff9b:1::8.8.8.8", /^local-use NAT64$/], // never globally reachable
    ["2002:7f00:1::", /^loopback \(6to4 127\.0\.0\.1\)$/],
    ["2002:a00:1::1", /^private \(6to4 10\.0\.0\.1\)$/],
    ["2002:c0a8:0101::1", /^private \(6to4 192\.168\.1\.1\)$/],
    ["2002:a9fe:a9fe::", /^link-local \(6to4 169\.254\.169\.254\)$/],
  ];
  for (const [ip, re] of cases) t.match(nonPublicReason(ip), re, `${ip}`);
});

t.test("nonPublicReason: not an IP literal fails closed", async (t) => {
  for (const s of ["", "example.com", "1.2.3", "01.2.3.4", "::g", "1::2::3"]) {
    t.equal(nonPublicReason(s), "not an IP address", JSON.stringify(s));
  }
});

t.test("checkUrlSyntax: accepted URLs", async (t) => {
  const u = checkUrlSyntax("https://hooks.example.com/webhooks?x=1");
  t.ok(u instanceof URL);
  t.equal(u.hostname, "hooks.example.com");
  t.equal(checkUrlSyntax("https://hooks.example.com:443/").port, "", "explicit :443 is fine");
  t.equal(checkUrlSyntax("HTTPS://Hooks.Example.COM/").hostname, "hooks.example.com");
  t.equal(checkUrlSyntax("https://8.8.8.8/").hostname, "8.8.8.8", "public IPv4 literal");
  t.equal(checkUrlSyntax("https://[2606:4700:4700::1111]/").hostname, "[2606:4700:4700::1111]", "public IPv6 literal");
  const long = `https://example.com/${"a".repeat(maxUrlLength - "https://example.com/".length)}`;
  t.equal(long.length, maxUrlLength);
  t.ok(checkUrlSyntax(long), "exactly 2048 characters");
});

t.test("checkUrlSyntax: refused URLs", async (t) => {
  const cases: [string, RegExp][] = [
    ["http://hooks.example.com/", /must use https, not http$/],
    ["ftp://hooks.example.com/", /must use https/],
    ["wss://hooks.example.com/", /must use https/],
    ["https://hooks.example.com:8443/", /^port 8443 is not allowed; webhooks are sent to port 443 only$/],
    ["https://hooks.example.com:80/", /port 80 .*443/],
    ["https://hooks.example.com:1/", /port 1 .*443/],
    ["https://u:p@hooks.example.com/", /user name or password/],
    ["https://u@hooks.example.com/", /user name or password/],
    ["https://:secret@hooks.example.com/", /user name or password/],
    ["not a url", /not a valid absolute URL/],
    ["", /not a valid absolute URL/],
    ["https://", /not a valid absolute URL/],
    ["/relative/path", /not a valid absolute URL/],
    ["https://exa mple.com/", /not a valid absolute URL/],
    ["https://127.0.0.1/", /^127\.0\.0\.1 is a loopback address$/],
    ["https://[::1]/", /^::1 is a loopback address$/],
    ["https://0x7f.1/", /^127\.0\.0\.1 is a loopback address$/],
    ["https://2130706433/", /^127\.0\.0\.1 is a loopback address$/],
    ["https://10.1.2.3/", /^10\.1\.2\.3 is a private address$/],
    ["https://169.254.169.254/latest/meta-data/", /^169\.254\.169\.254 is a link-local address$/],
    ["https://0.0.0.0/", /^0\.0\.0\.0 is an unspecified address$/],
    ["https://[::]/", /^:: is an unspecified address$/],
    ["https://[fd00::1]/", /is a unique local address$/],
    ["https://[::ffff:127.0.0.1]/", /^::ffff:7f00:1 is the IPv4-mapped form of 127\.0\.0\.1, a loopback address$/],
    ["https://[64:ff9b::10.0.0.1]/", /NAT64 form of 10\.0\.0\.1, a private address/],
    ["https://[2002:a00:1::]/", /6to4 form of 10\.0\.0\.1, a private address/],
    ["https://100.64.1.1/", /carrier-grade NAT/],
    ["https://255.255.255.255/", /broadcast/],
  ];
  for (const [url, re] of cases) {
    const e = rejection(t, () => checkUrlSyntax(url));
    t.match(e?.reason, re, JSON.stringify(url));
  }
});

t.test("checkUrlSyntax: length", async (t) => {
  const long = `https://example.com/${"a".repeat(3 * 1024)}`;
  t.match(rejection(t, () => checkUrlSyntax(long))?.reason, /at most 2048 characters/, "3 KB URL");
  const justOver = `https://example.com/${"a".repeat(maxUrlLength - "https://example.com/".length + 1)}`;
  t.match(rejection(t, () => checkUrlSyntax(justOver))?.reason, /2048/, "2049 characters");
  // Short input that percent-encoding expands past the limit.
  const expands = `https://example.com/${" ".repeat(1000)}x`;
  t.ok(expands.length <= maxUrlLength);
  t.match(rejection(t, () => checkUrlSyntax(expands))?.reason, /2048/, "normalised URL over the limit");
});

t.test("reasons never echo credentials", async (t) => {
  for (const url of [
    "https://alice:hunter2@hooks.example.com/",
    "http://alice:hunter2@hooks.example.com/",
    "https://alice:hunter2@hooks.example.com:8443/",
    `https://alice:hunter2@example.com/${"a".repeat(3000)}`,
    "https://alice:hunter2@10.0.0.1/",
  ]) {
    const e = rejection(t, () => checkUrlSyntax(url));
    t.notMatch(e?.reason, /hunter2|alice/, JSON.stringify(e?.reason));
  }
});

t.test("parseConnectTo", async (t) => {
  t.same(parseConnectTo(undefined), []);
  t.same(parseConnectTo(""), []);
  t.same(parseConnectTo("  "), []);
  t.same(parseConnectTo("hooks.example.test:443:127.0.0.1:40123"), [
    { host: "hooks.example.test", port: 443, toHost: "127.0.0.1", toPort: 40123 },
  ]);
  t.same(parseConnectTo("Hooks.Example.TEST:443:[::1]:8443, other.test:443:10.0.0.5:1"), [
    { host: "hooks.example.test", port: 443, toHost: "::1", toPort: 8443 },
    { host: "other.test", port: 443, toHost: "10.0.0.5", toPort: 1 },
  ]);

  const bad: [string, RegExp][] = [
    ["hooks.example.test:443:127.0.0.1", /malformed entry/],
    ["hooks.example.test:443", /malformed entry/],
    [":443:127.0.0.1:1", /HOST1 must be a host name/],
    ["hooks.example.test::127.0.0.1:1", /bad port ""/],
    ["hooks.example.test:443:127.0.0.1:", /bad port ""/],
    ["hooks.example.test:0:127.0.0.1:1", /bad port "0"/],
    ["hooks.example.test:443:127.0.0.1:65536", /bad port "65536"/],
    ["hooks.example.test:https:127.0.0.1:1", /bad port "https"/],
    ["hooks.example.test:443:localhost:1", /HOST2 must be an IPv4 address or a bracketed IPv6/],
    ["hooks.example.test:443:::1:1", /malformed entry/],
    ["hooks.example.test:443:[127.0.0.1]:1", /HOST2/],
    ["hooks.example.test:443:[::1:1", /malformed entry/],
    ["127.0.0.1:443:127.0.0.1:1", /not an IP address/],
    ["0x7f.1:443:127.0.0.1:1", /not an IP address/],
    ["a/b:443:127.0.0.1:1", /HOST1 must be a host name/],
    ["hooks.example.test:443:127.0.0.1:1,", /empty entry/],
    ["a.test:443:127.0.0.1:1,a.test:443:127.0.0.1:2", /listed twice/],
  ];
  for (const [raw, re] of bad) {
    t.throws(() => parseConnectTo(raw), { message: re }, raw);
    try {
      parseConnectTo(raw);
    } catch (err) {
      const message = (err as Error).message;
      t.match(message, /^WEBHOOK_CONNECT_TO: /, "names the variable");
      t.notMatch(message, /\n/, "one line");
      t.notOk(err instanceof PolicyRejection, "a configuration error, not a policy rejection");
    }
  }
});

t.test("resolveTarget: IP literals need no DNS", async (t) => {
  t.same(await resolveTarget("https://8.8.8.8/hook", [], noLookup), {
    hostname: "8.8.8.8",
    address: "8.8.8.8",
    port: 443,
    servername: undefined,
    overridden: false,
  });
  t.same(await resolveTarget(new URL("https://[2606:4700:4700::1111]:443/"), [], noLookup), {
    hostname: "2606:4700:4700::1111",
    address: "2606:4700:4700::1111",
    port: 443,
    servername: undefined,
    overridden: false,
  });
  for (const [url, re] of [
    ["https://127.0.0.1/", /loopback/],
    ["https://[::1]/", /loopback/],
    ["https://0x7f.1/", /127\.0\.0\.1 is a loopback/],
    ["https://10.1.2.3/", /10\.1\.2\.3 is a private address/],
    ["https://169.254.169.254/", /link-local/],
  ] as const) {
    t.match((await asyncRejection(t, resolveTarget(url, [], noLookup)))?.reason, re, url);
  }
});

t.test("resolveTarget: syntax rules apply first", async (t) => {
  const lookup = fakeLookup({ "hooks.example.com": ["8.8.8.8"] });
  t.match((await asyncRejection(t, resolveTarget("http://hooks.example.com/", [], lookup)))?.reason, /https/);
  t.match((await asyncRejection(t, resolveTarget("https://hooks.example.com:8443/", [], lookup)))?.reason, /443/);
  t.match((await asyncRejection(t, resolveTarget("https://u:p@hooks.example.com/", [], lookup)))?.reason, /password/);
  t.match((await asyncRejection(t, resolveTarget("not a url", [], lookup)))?.reason, /valid absolute URL/);
  t.same(lookup.calls, [], "no lookup for a refused URL");
});

t.test("resolveTarget: DNS", async (t) => {
  const lookup = fakeLookup({
    "hooks.example.com": ["93.184.216.34", "2606:2800:220:1:248:1893:25c8:1946"],
    "v6.example.com": ["2606:4700:4700::1111"],
    "internal.example.com": ["10.0.0.7"],
    "mixed.example.com": ["8.8.8.8", "192.168.1.10"],
    "mixed6.example.com": ["2606:4700:4700::1111", "fd00::5"],
    "localhost.example.com": ["127.0.0.1", "::1"],
    "mapped.example.com": ["::ffff:10.0.0.1"],
    "metadata.example.com": ["169.254.169.254"],
    "empty.example.com": [],
    "garbage.example.com": ["not-an-ip"],
  });

  t.same(await resolveTarget("https://hooks.example.com/x", [], lookup), {
    hostname: "hooks.example.com",
    address: "93.184.216.34",
    port: 443,
    servername: "hooks.example.com",
    overridden: false,
  }, "first address, SNI is the host name");
  t.equal((await resolveTarget("https://v6.example.com/", [], lookup)).address, "2606:4700:4700::1111");
  t.equal((await resolveTarget("https://hooks.example.com./", [], lookup).catch(() => undefined)), undefined,
    "a trailing dot is looked up as given (not in the fake table)");
  t.same(lookup.calls.slice(-1), ["hooks.example.com."]);

  const refused: [string, RegExp][] = [
    ["https://internal.example.com/", /^host internal\.example\.com resolves to 10\.0\.0\.7, which is a private address$/],
    ["https://mixed.example.com/", /resolves to 192\.168\.1\.10, which is a private address/],
    ["https://mixed6.example.com/", /resolves to fd00::5, which is a unique local address/],
    ["https://localhost.example.com/", /127\.0\.0\.1, which is a loopback address/],
    ["https://mapped.example.com/", /IPv4-mapped form of 10\.0\.0\.1, a private address/],
    ["https://metadata.example.com/", /169\.254\.169\.254, which is a link-local address/],
    ["https://empty.example.com/", /^host empty\.example\.com could not be resolved$/],
    ["https://garbage.example.com/", /not-an-ip, which is not an IP address/],
    ["https://nowhere.example.com/", /^host nowhere\.example\.com could not be resolved$/],
  ];
  for (const [url, re] of refused) {
    t.match((await asyncRejection(t, resolveTarget(url, [], lookup)))?.reason, re, url);
  }
});

t.test("resolveTarget: DNS failures and timeouts are refusals", async (t) => {
  for (const code of ["ENOTFOUND", "EAI_AGAIN", "ENODATA", "ESERVFAIL"]) {
    const lookup: Lookup = async () => {
      throw Object.assign(new Error(`getaddrinfo ${code} x.test`), { code });
    };
    const e = await asyncRejection(t, resolveTarget("https://x.test/", [], lookup));
    t.equal(e?.reason, "host x.test could not be resolved", code);
    t.match((e?.cause as { code?: string } | undefined)?.code, code, "the DNS error is kept as the cause");
  }
  // A lookup that never answers: only the timeout can end the wait, so a refusal proves it fired.
  const never: Lookup = () => new Promise(() => {});
  const e = await asyncRejection(t, resolveTarget("https://slow.test/", [], never, { timeoutMs: 50 }));
  t.equal(e?.reason, "host slow.test could not be resolved", "timeout");
});

t.test("resolveTarget: real lookup of a .invalid name is refused", async (t) => {
  const e = await asyncRejection(t, resolveTarget("https://nonexistent.invalid/", []));
  t.equal(e?.reason, "host nonexistent.invalid could not be resolved");
});

t.test("resolveTarget: WEBHOOK_CONNECT_TO override", async (t) => {
  const connectTo: ConnectTo[] = parseConnectTo("hooks.example.test:443:127.0.0.1:40123,v6.example.test:443:[::1]:40124");
  t.same(await resolveTarget("https://hooks.example.test/webhook", connectTo, noLookup), {
    hostname: "hooks.example.test",
    address: "127.0.0.1",
    port: 40123,
    servername: "hooks.example.test",
    overridden: true,
  }, "mapped to loopback without a lookup");
  t.same(await resolveTarget("https://HOOKS.example.test:443/", connectTo, noLookup), {
    hostname: "hooks.example.test",
    address: "127.0.0.1",
    port: 40123,
    servername: "hooks.example.test",
    overridden: true,
  }, "case and an explicit :443 do not matter");
  t.match(await resolveTarget("https://v6.example.test/", connectTo, noLookup), {
    address: "::1",
    port: 40124,
    overridden: true,
  }, "IPv6 HOST2");

  // Other hosts still go through DNS and the address check.
  const lookup = fakeLookup({ "other.example.test": ["127.0.0.1"], "public.example.test": ["8.8.8.8"] });
  t.match((await asyncRejection(t, resolveTarget("https://other.example.test/", connectTo, lookup)))?.reason, /loopback/);
  t.match((await asyncRejection(t, resolveTarget("https://sub.hooks.example.test/", connectTo, lookup)))?.reason,
    /could not be resolved/, "no suffix matching");
  t.same(await resolveTarget("https://public.example.test/", connectTo, lookup), {
    hostname: "public.example.test",
    address: "8.8.8.8",
    port: 443,
    servername: "public.example.test",
    overridden: false,
  });

  // An entry for another port never matches: deliveries only go to 443.
  const otherPort = parseConnectTo("hooks.example.test:8443:127.0.0.1:40123");
  const lookup2 = fakeLookup({ "hooks.example.test": ["127.0.0.1"] });
  t.match((await asyncRejection(t, resolveTarget("https://hooks.example.test/", otherPort, lookup2)))?.reason,
    /hooks\.example\.test resolves to 127\.0\.0\.1, which is a loopback address/);
  t.same(lookup2.calls, ["hooks.example.test"]);
  t.match((await asyncRejection(t, resolveTarget("https://hooks.example.test:8443/", otherPort, lookup2)))?.reason,
    /port 8443 is not allowed/, "the port rule still applies");

  // The override does not relax the syntax rules.
  t.match((await asyncRejection(t, resolveTarget("http://hooks.example.test/", connectTo, noLookup)))?.reason, /https/);
});
