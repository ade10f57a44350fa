// What the browser tests share: Debian's Chromium (or CHROMIUM_PATH), axe-core's verdict on a page,
// and where screenshots for a person to look at go (not compared).
import { existsSync, mkdirSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import type { Page } from "playwright-core";

export const executablePath = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";
/** A test's `skip` when there is no Chromium. */
export const noBrowser = existsSync(executablePath) ? false : `no Chromium at ${executablePath}: install it (apt-get install chromium) or set CHROMIUM_PATH`;

const axeSource = readFileSync(createRequire(import.meta.url).resolve("axe-core/axe.min.js"), "utf8");

/** axe-core in the page (through DevTools, outside the page's CSP): the serious and critical violations. */
export async function axeViolations(page: Page): Promise<string[]> {
  await page.evaluate(axeSource);
  const result = (await page.evaluate("axe.run(document, { resultTypes: ['violations'] })")) as { violations: { id: string; impact: string; nodes: { target: string[] }[] }[] };
  return result.violations.filter((v) => v.impact === "serious" || v.impact === "critical").map((v) => `${v.id} (${v.impact}): ${v.nodes.map((n) => n.target.join(" ")).join(", ")}`);
}

/** .tap/screenshots/, made on first use. */
export function screenshotsDir(): string {
  const dir = path.join(import.meta.dirname, "..", "..", ".tap", "screenshots");
  mkdirSync(dir, { recursive: true });
  return dir;
}
