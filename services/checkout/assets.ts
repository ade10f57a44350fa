/**
 * The checkout page's stylesheet and script, served as files (never inline, so
 * the page's Content-Security-Policy allows no inline code). Their URLs carry a
 * hash of their content, so they can be cached for a year.
 */
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import path from "node:path";
import { payableStatuses } from "../intents/funds.ts";
import { finalStatuses, otherAssetText, returnLinks, seenStatusText, seenText, statusTexts } from "./page.ts";

const browser = path.join(import.meta.dirname, "browser");
/** Mobile first; every text colour has a contrast of at least 4.5:1 on its background (most over 7:1); focus is always visible. */
const css = readFileSync(path.join(browser, "checkout.css"), "utf8");
/** The status texts go in where the script has placeholders for them (the page renders the same texts). */
const js = readFileSync(path.join(browser, "checkout.js"), "utf8")
  .replace("/*TEXTS*/ {}", JSON.stringify(statusTexts))
  .replace("/*FINAL*/ []", JSON.stringify(finalStatuses))
  .replace("/*PAYABLE*/ []", JSON.stringify(payableStatuses))
  .replace("/*RETURNS*/ {}", JSON.stringify(returnLinks))
  .replace('/*OTHER_ASSET_TEXT*/ ""', JSON.stringify(otherAssetText))
  .replace('/*SEEN_TEXT*/ ""', JSON.stringify(seenText))
  .replace("/*SEEN_STATUS*/ {}", JSON.stringify(seenStatusText));

export interface Asset {
  body: Buffer;
  contentType: string;
  /** A hash of the content: the URL's ?v= and the ETag. */
  version: string;
}

export function asset(text: string, contentType: string): Asset {
  const body = Buffer.from(text, "utf8");
  return { body, contentType, version: createHash("sha256").update(body).digest("hex").slice(0, 16) };
}

/** The files under <checkout path>/assets/, by name. */
export const checkoutAssets: Readonly<Record<string, Asset>> = {
  "checkout.css": asset(css, "text/css; charset=utf-8"),
  "checkout.js": asset(js, "text/javascript; charset=utf-8"),
};

/** The URLs the page links, each with its content hash. */
export function assetUrls(base: string): { css: string; js: string } {
  const url = (name: string) => `${base}/assets/${name}?v=${checkoutAssets[name]?.version ?? ""}`;
  return { css: url("checkout.css"), js: url("checkout.js") };
}
