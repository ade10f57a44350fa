/**
 * Serves the refund claim pages under CHECKOUT_BASE_URL, at /refunds/<claim token>: GET shows the
 * refund, POST takes the customer's address (a plain form, answered 303 to the page, so a reload
 * sends nothing twice). Any other path under /refunds/ is the not-found page. The calls go through
 * the core (RefundClaimService over the gateway's transport), limited per client address.
 */
import type http from "node:http";
import { Code, ConnectError, createClient, createContextValues, type Transport } from "@connectrpc/connect";
import type { PageHandler } from "../../gateway/server.ts";
import { ErrorDetailSchema } from "../../gen/payments/v1/options_pb.ts";
import { RefundClaimService, type RefundClaim } from "../../gen/payments/v1/refunds_pb.ts";
import { assetUrls } from "../checkout/assets.ts";
import { checkoutPathOf, commonHeaders, send } from "../checkout/handler.ts";
import { renderErrorPage, type PagePaths } from "../checkout/page.ts";
import { clientAddressKey } from "../platform/client-address.ts";
import type { Logger } from "../platform/logger.ts";
import { renderClaimNotFound, renderClaimPage } from "./claim-page.ts";
import { claimTokenPattern } from "./refunds.ts";

/** No script at all; the form posts to the page itself. */
export const claimContentSecurityPolicy = "default-src 'none'; style-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

const htmlHeaders: Readonly<Record<string, string>> = {
  ...commonHeaders,
  "Content-Type": "text/html; charset=utf-8",
  "Cache-Control": "no-store",
  "Content-Security-Policy": claimContentSecurityPolicy,
  "X-Frame-Options": "DENY",
};

/** The most a form's body may be: an address and its name, with room to spare. */
const maxFormBytes = 2048;

export function refundClaimPages(o: { checkoutBaseUrl: string; transport: Transport; logger?: Logger }): PageHandler {
  const base = checkoutPathOf(o.checkoutBaseUrl);
  const prefix = `${base}/refunds/`;
  const paths: PagePaths = { base, ...assetUrls(base) };
  const client = createClient(RefundClaimService, o.transport);
  const notFound = Buffer.from(renderClaimNotFound(paths));
  const page = (kind: Parameters<typeof renderErrorPage>[0]) => Buffer.from(renderErrorPage(kind, paths));

  return async (req, res, url, clientAddress) => {
    const raw = (req.url ?? "/").split("?")[0] ?? "";
    if (!raw.startsWith(prefix) && !url.pathname.startsWith(prefix)) return false;
    const token = raw.startsWith(prefix) ? raw.slice(prefix.length) : "";
    const method = req.method ?? "GET";
    if (method !== "GET" && method !== "HEAD" && method !== "POST") {
      req.resume();
      send(req, res, 405, page("method_not_allowed"), { ...htmlHeaders, Allow: "GET, HEAD, POST" });
      return true;
    }
    if (!claimTokenPattern.test(token)) {
      req.resume();
      send(req, res, 404, notFound, htmlHeaders);
      return true;
    }
    const options = { timeoutMs: 10_000, headers: { "x-forwarded-for": clientAddress }, contextValues: createContextValues().set(clientAddressKey, clientAddress) };
    const show = (status: number, claim: RefundClaim, problem?: { error: string; entered: string }) =>
      send(req, res, status, Buffer.from(renderClaimPage(claim, paths, raw, problem)), htmlHeaders);
    try {
      if (method !== "POST") {
        const { data } = await client.getRefundClaim({ token }, options);
        if (data) show(200, data);
        return true;
      }
      // A body that is not a small form is taken as an empty one: the page says an address is needed.
      const form = (await readForm(req)) ?? new URLSearchParams();
      const entered = (form.get("address") ?? "").trim();
      try {
        await client.submitRefundAddress({ token, address: entered }, options);
      } catch (err) {
        const refused = ConnectError.from(err);
        if (refused.code !== Code.InvalidArgument && refused.code !== Code.FailedPrecondition) throw err;
        // The address is wrong (or the refund took one already): the page again, saying what and keeping what was typed.
        const { data } = await client.getRefundClaim({ token }, options);
        if (data) show(refused.code === Code.InvalidArgument ? 400 : 409, data, { error: sayAddressProblem(refused.rawMessage), entered });
        return true;
      }
      res.writeHead(303, { ...commonHeaders, Location: raw, "Cache-Control": "no-store", "Content-Length": 0 });
      res.end();
    } catch (err) {
      const refused = ConnectError.from(err);
      if (refused.code === Code.NotFound) {
        send(req, res, 404, notFound, htmlHeaders);
        return true;
      }
      const retryAfter = refused.findDetails(ErrorDetailSchema).some((d) => d.code === "rate_limited") ? refused.metadata.get("retry-after") : null;
      if (retryAfter !== null) {
        send(req, res, 429, page("rate_limited"), { ...htmlHeaders, "Retry-After": retryAfter });
        return true;
      }
      const busy = refused.code === Code.Unavailable || refused.code === Code.DeadlineExceeded;
      if (!busy) o.logger?.error({ err, path: "/refunds/…" }, "refund claim page failed");
      send(req, res, busy ? 503 : 500, page(busy ? "unavailable" : "internal"), busy ? { ...htmlHeaders, "Retry-After": "1" } : htmlHeaders);
    }
    return true;
  };
}

/** `"address" is not a valid …` as the page says it: "This address is not a valid …". */
export function sayAddressProblem(message: string): string {
  const m = /^"address" (.*)$/s.exec(message);
  return m ? `This address ${m[1]}` : message;
}

/** The form's fields, or undefined for a body that is not a small urlencoded form. */
async function readForm(req: http.IncomingMessage): Promise<URLSearchParams | undefined> {
  const type = (req.headers["content-type"] ?? "").split(";")[0]?.trim().toLowerCase();
  if (type !== "application/x-www-form-urlencoded") {
    req.resume();
    return undefined;
  }
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > maxFormBytes) {
      req.resume();
      return undefined;
    }
    chunks.push(chunk);
  }
  return new URLSearchParams(Buffer.concat(chunks).toString("utf8"));
}
