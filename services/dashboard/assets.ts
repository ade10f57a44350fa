/**
 * The dashboard's stylesheet and script, served as files (never inline: the pages' CSP allows no
 * inline code), under <dashboard path>/assets/, their URLs versioned by a hash of their content.
 */
import { readFileSync } from "node:fs";
import path from "node:path";
import { asset, type Asset } from "../checkout/assets.ts";

const browser = path.join(import.meta.dirname, "browser");

export const dashboardAssets: Readonly<Record<string, Asset>> = {
  "dashboard.css": asset(readFileSync(path.join(browser, "dashboard.css"), "utf8"), "text/css; charset=utf-8"),
  "dashboard.js": asset(readFileSync(path.join(browser, "dashboard.js"), "utf8"), "text/javascript; charset=utf-8"),
};

export function dashboardAssetUrls(base: string): { css: string; js: string } {
  const url = (name: string) => `${base}/assets/${name}?v=${dashboardAssets[name]?.version ?? ""}`;
  return { css: url("dashboard.css"), js: url("dashboard.js") };
}
