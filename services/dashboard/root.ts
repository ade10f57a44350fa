/**
 * The public port's root and its icon: `GET /` goes to the dashboard (a newcomer's first guess
 * answered a JSON 404), and `/favicon.ico`, which every browser asks for on every page, is an icon
 * instead of a logged 404. Only these two paths: everything else is left to the other pages and the API.
 */
import { readFileSync } from "node:fs";
import path from "node:path";
import type { PageHandler } from "../../gateway/server.ts";
import { asset } from "../checkout/assets.ts";
import { commonHeaders, sendAsset } from "../checkout/handler.ts";

const icon = { "favicon.ico": asset(readFileSync(path.join(import.meta.dirname, "browser", "favicon.svg"), "utf8"), "image/svg+xml") };

export function rootPages(o: { dashboardBaseUrl: string }): PageHandler {
  return async (req, res, url) => {
    if (req.method !== "GET" && req.method !== "HEAD") return false;
    if (url.pathname === "/favicon.ico") return sendAsset(req, res, icon, "favicon.ico");
    if (url.pathname !== "/" || url.search !== "") return false;
    res.writeHead(302, { ...commonHeaders, Location: o.dashboardBaseUrl, "Cache-Control": "no-store", "Content-Length": 0 });
    res.end();
    return true;
  };
}
