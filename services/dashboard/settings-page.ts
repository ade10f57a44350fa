/**
 * The dashboard's Shop settings: the merchant's name, logo URL and brand colour (MerchantService),
 * one form posted with the CSRF token. A refused value comes back on the form with what was typed
 * and the API's message; nothing is changed then.
 */
import type { MerchantProfile } from "../../gen/payments/v1/merchants_pb.ts";
import { escapeHtml as e } from "../checkout/page.ts";
import { maxLogoUrlLength, maxNameLength } from "../vocabulary/shop-look.ts";
import { csrfField, layout, notice, type DashboardPaths, type Viewer } from "./page.ts";

/** What the form holds: the stored values, or those just typed when they were refused. */
export interface ShopSettingsValues {
  name: string;
  logoUrl: string;
  brandColor: string;
}

export function valuesOf(p: MerchantProfile | undefined): ShopSettingsValues {
  return { name: p?.name ?? "", logoUrl: p?.logoUrl ?? "", brandColor: p?.brandColor ?? "" };
}

export function settingsPage(paths: DashboardPaths, v: Viewer, o: { values: ShopSettingsValues; profile?: MerchantProfile; message?: string; notice?: string }): string {
  const p = o.profile;
  const colour = p?.brandColor
    ? `<p>Brand colour <code>${e(p.brandColor)}</code>, with ${p.brandTextColor === "#000000" ? "black" : "white"} text on it (whichever contrasts more).</p>`
    : `<p>No brand colour: the checkout page uses its own.</p>`;
  const field = (id: string, name: string, label: string, value: string, help: string, extra: string) =>
    `<div class="field"><label for="${id}">${label}</label>
<input id="${id}" name="${name}" value="${e(value)}" aria-describedby="${id}-help"${extra}>
<p class="help" id="${id}-help">${help}</p></div>`;
  return layout(paths, v, {
    title: "Shop settings",
    section: "settings",
    notice: o.notice,
    main: `<section aria-labelledby="look-h"><h2 id="look-h">Name and look</h2>
<p class="help">Shown in this dashboard's header, on your checkout pages ("Pay ${e(p?.name || "My Shop")}") and on your terminal. They are the shop's in Test and Live alike.</p>
${colour}
${o.message ? notice(o.message, "error") : ""}<form method="post" action="${e(`${paths.base}/settings`)}" class="stack" id="shop-settings">
${csrfField(v.csrf)}
${field("shop-name", "name", "Shop name", o.values.name, `1 to ${maxNameLength} characters.`, ` required maxlength="${maxNameLength}" autocomplete="organization"`)}
${field("shop-logo-url", "logo_url", "Logo URL (optional)", o.values.logoUrl, `An https:// address of an image (PNG, JPEG, WebP or SVG), at most ${maxLogoUrlLength} characters. Shoppers' browsers load it; it is shown at most 160×64 pixels. Leave empty for none.`, ` type="url" inputmode="url" maxlength="${maxLogoUrlLength}" spellcheck="false"`)}
${field("shop-brand-color", "brand_color", "Brand colour (optional)", o.values.brandColor, "Six hex digits, as #1a7f37. Leave empty for none.", ` maxlength="7" spellcheck="false" autocomplete="off"`)}
<button type="submit" class="button">Save</button>
</form></section>`,
  });
}
