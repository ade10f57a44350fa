/**
 * Serves the hosted checkout page beside the API, under the path of
 * CHECKOUT_BASE_URL: the page, its status JSON and its two asset files. Any
 * other path there, a malformed id (checked on the raw path, before any lookup)
 * or an unknown one is the plain 404 page.
 */
import type http from "node:http";
import { Code, ConnectError, createClient, createContextValues, type Transport } from "@connectrpc/connect";
import type { PageHandler } from "../../gateway/server.ts";
import { ErrorDetailSchema } from "../../gen/payments/v1/options_pb.ts";
import { CheckoutService, type ShopperPaymentIntent } from "../../gen/payments/v1/shopper_pb.ts";
import { clientAddressKey } from "../platform/client-address.ts";
import { newId } from "../platform/ids.ts";
import type { Logger } from "../platform/logger.ts";
import { assetUrls, checkoutAssets, type Asset } from "./assets.ts";
import { brandStylesheet, brandStylesheetPattern, brandStylesheetVersion, withImageOrigin } from "./brand-style.ts";
import { logoOrigin } from "../vocabulary/shop-look.ts";
import { checkoutStatus, renderCheckoutPage, renderErrorPage, renderNotFoundPage, shownMethod, type PagePaths } from "./page.ts";

export interface CheckoutPagesOptions {
  /** CHECKOUT_BASE_URL: its path is where the pages are served ("" or "/": the root, never under /api/). */
  checkoutBaseUrl: string;
  /**
   * The shopper view of an intent, or undefined when there is no such intent. `clientAddress` is
   * whom the lookup counts against (GetCheckout is limited per client address).
   */
  getCheckout: (id: string, clientAddress: string) => Promise<{ data: ShopperPaymentIntent; testMode: boolean; merchantName?: string; merchantLogoUrl?: string; merchantBrandColor?: string } | undefined>;
  /** Where failures of getCheckout are logged (the shopper sees none of it). */
  logger?: Logger;
  /** The clock the page's countdown starts from. */
  now?: () => Date;
}

/** The id shape newId("pi") makes: anything else is not looked up. */
const idPattern = /^pi_[0-9A-Za-z]{24}$/;
/** The longest path after the prefix that can be ours ("/<id>/status.json" is 40). */
const maxRestLength = 64;

/** No inline code, nothing from elsewhere, no framing, no forms, no <base>. */
export const contentSecurityPolicy =
  "default-src 'none'; style-src 'self'; script-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

export const commonHeaders: Readonly<Record<string, string>> = {
  "X-Content-Type-Options": "nosniff",
  "Referrer-Policy": "no-referrer",
};
const htmlHeaders: Readonly<Record<string, string>> = {
  ...commonHeaders,
  "Content-Type": "text/html; charset=utf-8",
  "Cache-Control": "no-store",
  "Content-Security-Policy": contentSecurityPolicy,
  "X-Frame-Options": "DENY",
};
const jsonHeaders: Readonly<Record<string, string>> = {
  ...commonHeaders,
  "Content-Type": "application/json; charset=utf-8",
  "Cache-Control": "no-store",
  "Content-Security-Policy": "default-src 'none'; frame-ancestors 'none'",
};

/** The path part of CHECKOUT_BASE_URL without trailing slashes: "/checkout", or "" for the root. */
export function checkoutPathOf(checkoutBaseUrl: string): string {
  return pagesPathOf(checkoutBaseUrl, "CHECKOUT_BASE_URL");
}

/** The path part of a pages' base URL setting without trailing slashes; never under /api/ (the API's own paths). */
export function pagesPathOf(baseUrl: string, setting: string): string {
  const base = new URL(baseUrl).pathname.replace(/\/+$/, "");
  if (base === "/api" || base.startsWith("/api/")) {
    throw new Error(`${setting} must not be under /api/ (the API's own paths), got "${baseUrl}"`);
  }
  return base;
}

export function send(req: http.IncomingMessage, res: http.ServerResponse, status: number, body: Buffer, headers: Record<string, string>): void {
  res.writeHead(status, { ...headers, "Content-Length": body.length });
  res.end(req.method === "HEAD" ? undefined : body);
}

/** Sends one of a page's asset files (cached for a year: its URL carries its hash); false when there is no such file. */
export function sendAsset(req: http.IncomingMessage, res: http.ServerResponse, assets: Readonly<Record<string, Asset>>, name: string): boolean {
  const file = Object.hasOwn(assets, name) ? assets[name] : undefined;
  if (!file) return false;
  const etag = `"${file.version}"`;
  const headers = {
    ...commonHeaders,
    "Content-Type": file.contentType,
    "Cache-Control": "public, max-age=31536000, immutable",
    ETag: etag,
  };
  if (req.headers["if-none-match"] === etag) {
    res.writeHead(304, headers);
    res.end();
  } else {
    send(req, res, 200, file.body, headers);
  }
  return true;
}

export function checkoutPages(o: CheckoutPagesOptions): PageHandler {
  const base = checkoutPathOf(o.checkoutBaseUrl);
  const paths: PagePaths = { base, ...assetUrls(base) };
  const now = o.now ?? (() => new Date());
  const notFound = Buffer.from(renderNotFoundPage(paths));
  const internal = Buffer.from(renderErrorPage("internal", paths));
  const unavailable = Buffer.from(renderErrorPage("unavailable", paths));
  const methodNotAllowed = Buffer.from(renderErrorPage("method_not_allowed", paths));
  const tooManyRequests = Buffer.from(renderErrorPage("rate_limited", paths));

  /** Whether a path is the checkout's to answer (by the raw path or the normalized one); an encoded or backslash separator counts. */
  function owns(path: string): boolean {
    if (base === "") return path !== "/api" && !path.startsWith("/api/");
    if (!path.startsWith(base)) return false;
    const next = path.slice(base.length, base.length + 3);
    return next === "" || next.startsWith("/") || next.startsWith("\\") || /^%(2f|5c)/i.test(next);
  }

  return async (req, res, url, clientAddress) => {
    const raw = (req.url ?? "/").split("?")[0] ?? "";
    if (base === "" ? !owns(raw) || !owns(url.pathname) : !owns(raw) && !owns(url.pathname)) return false;

    const method = req.method ?? "GET";
    if (method !== "GET" && method !== "HEAD") {
      req.resume();
      send(req, res, 405, methodNotAllowed, { ...htmlHeaders, Allow: "GET, HEAD" });
      return true;
    }
    const sendNotFound = () => send(req, res, 404, notFound, htmlHeaders);

    // The raw path, before any decoding or dot-segment removal: nothing of ours is encoded or has dots to resolve.
    const rest = raw.startsWith(base) ? raw.slice(base.length) : undefined;
    if (rest === undefined || !rest.startsWith("/") || rest.length > maxRestLength || /[%\\]|\.\./.test(rest)) {
      sendNotFound();
      return true;
    }
    const parts = rest.slice(1).split("/");
    const [first = "", second, ...more] = parts;

    if (first === "assets" && second !== undefined && more.length === 0) {
      const brand = brandStylesheetPattern.exec(second)?.[1];
      // A brand colour's stylesheet, made from the hex digits of its name (brand-style.ts).
      const assets = brand ? { [second]: { body: brandStylesheet(brand), contentType: "text/css; charset=utf-8", version: brandStylesheetVersion(brand) } } : checkoutAssets;
      if (!sendAsset(req, res, assets, second)) sendNotFound();
      return true;
    }

    const json = second === "status.json";
    if (!idPattern.test(first) || more.length > 0 || (second !== undefined && !json)) {
      sendNotFound();
      return true;
    }

    let status: number;
    let body: Buffer;
    let headers: Record<string, string> = htmlHeaders;
    try {
      const found = await o.getCheckout(first, clientAddress);
      if (!found) {
        sendNotFound();
        return true;
      }
      status = 200;
      // An intent offering several methods: the one the shopper picked (page.ts shownMethod), until a payment chooses.
      const picked = url.searchParams.get("method");
      if (json) {
        body = Buffer.from(JSON.stringify(checkoutStatus(shownMethod(found.data, picked).view)));
        headers = jsonHeaders;
      } else {
        body = Buffer.from(
          await renderCheckoutPage(found.data, found.testMode, now(), paths, found.merchantName, { logoUrl: found.merchantLogoUrl, brandColor: found.merchantBrandColor }, picked),
        );
        // The shop's logo loads from its origin: img-src names it, on this page only.
        const origin = logoOrigin(found.merchantLogoUrl);
        if (origin) headers = { ...htmlHeaders, "Content-Security-Policy": withImageOrigin(contentSecurityPolicy, origin) };
      }
    } catch (err) {
      const refused = ConnectError.from(err);
      const retryAfter = refused.findDetails(ErrorDetailSchema).some((d) => d.code === "rate_limited") ? refused.metadata.get("retry-after") : null;
      if (retryAfter !== null) {
        // The page and its status share the address's budget; the page's script backs off on any refusal.
        const requestId = refused.metadata.get("x-request-id") ?? newId("req");
        const envelope = { error: { code: "rate_limited", message: "Too many requests from this address; retry later.", request_id: requestId } };
        const refusal = json ? Buffer.from(JSON.stringify(envelope)) : tooManyRequests;
        send(req, res, 429, refusal, { ...(json ? jsonHeaders : htmlHeaders), "Retry-After": retryAfter, "X-Request-Id": requestId });
        return true;
      }
      const code = refused.code;
      const busy = code === Code.Unavailable || code === Code.DeadlineExceeded || code === Code.ResourceExhausted;
      if (!busy) o.logger?.error({ err, path: raw }, "checkout page failed");
      status = busy ? 503 : 500;
      body = busy ? unavailable : internal;
      if (busy) headers = { ...htmlHeaders, "Retry-After": "1" };
    }
    send(req, res, status, body, headers);
    return true;
  };
}

/** The page's lookup through the core (CheckoutService over the gateway's transport): not found is undefined. */
export function checkoutLookup(transport: Transport): CheckoutPagesOptions["getCheckout"] {
  const client = createClient(CheckoutService, transport);
  return async (publicId, clientAddress) => {
    try {
      // The address as the gateway's own routes pass it: a context value in this process, X-Forwarded-For to an rpc process.
      const { data, testMode, merchantName, merchantLogoUrl, merchantBrandColor } = await client.getCheckout(
        { publicId },
        { timeoutMs: 10_000, headers: { "x-forwarded-for": clientAddress }, contextValues: createContextValues().set(clientAddressKey, clientAddress) },
      );
      return data && { data, testMode, merchantName, merchantLogoUrl, merchantBrandColor };
    } catch (err) {
      if (err instanceof ConnectError && err.code === Code.NotFound) return undefined;
      throw err;
    }
  };
}
