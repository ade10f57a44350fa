/**
 * The dashboard's API keys section: the merchant's keys of the session's environment with their
 * last use, a create form whose scopes are those the session holds, the new key's secret shown on
 * the create's answer only (never on a later page), and a revoke that asks first on a page of its
 * own (it works without the script).
 */
import type { ApiKey, CreatedApiKey } from "../../gen/payments/v1/api_keys_pb.ts";
import { escapeHtml as e } from "../checkout/page.ts";
import { scopes as allScopes } from "../vocabulary/scopes.ts";
import type { Scope } from "../vocabulary/scopes.ts";
import { can, csrfField, layout, notice, when, type DashboardPaths, type Viewer } from "./page.ts";

/** What each scope lets a key do, as the create form says it (every scope: a new one needs its text). */
const scopeTexts: Readonly<Record<Scope, string>> = {
  "payment_intents:read": "read payments",
  "payment_intents:write": "create and cancel payments",
  "webhooks:read": "read webhook endpoints, deliveries and events",
  "webhooks:write": "create, change, disable and test endpoints; replay deliveries",
  "merchant:readiness": "read go-live readiness",
  "webhooks:listen": "stream Live events to a developer's machine (listen)",
  "api_keys:read": "list API keys",
  "api_keys:write": "create and revoke API keys",
  "merchant:write": "change the shop's name, logo and brand colour",
};

/** One key as a card (not a table row: a 390 px phone shows it whole, without scrolling sideways). */
function keyItem(paths: DashboardPaths, v: Viewer, k: ApiKey, own: string | undefined): string {
  const status = k.revokedAt ? `<span class="status status-failed">revoked</span>` : `<span class="status status-enabled">active</span>`;
  const action =
    k.revokedAt || !can(v, "api_keys:write")
      ? ""
      : k.id === own
        ? `<p class="help">This session's key: revoke it from another key's session, or sign in with another key.</p>`
        : `<p><a class="button button-secondary" href="${e(`${paths.base}/api-keys/${k.id}/revoke`)}" aria-label="Revoke ${e(k.hint)}">Revoke…</a></p>`;
  const facts: [string, string][] = [
    ["Id", `<code>${e(k.id)}</code>`],
    ["Scopes", k.scopes.map((s) => `<code>${e(s)}</code>`).join(" ")],
    ["Created", when(k.createdAt)],
    ...(k.revokedAt ? ([["Revoked", when(k.revokedAt)]] as [string, string][]) : []),
    ["Last used", `<span class="last-used">${k.lastUsedAt ? when(k.lastUsedAt) : "Never"}</span>`],
  ];
  return `<li class="key-item" data-key="${e(k.id)}" data-status="${k.revokedAt ? "revoked" : "active"}">
<h3><code>${e(k.hint)}</code> ${status}</h3>
<dl class="facts">${facts.map(([name, value]) => `<div><dt>${e(name)}</dt><dd>${value}</dd></div>`).join("")}</dl>
${action}</li>`;
}

export function apiKeysPage(
  paths: DashboardPaths,
  v: Viewer,
  o: { keys: ApiKey[]; own?: string; next?: string; created?: CreatedApiKey; message?: string; chosen?: readonly string[]; notice?: string },
): string {
  const env = v.session.environment === "live" ? "Live" : "Test";
  const created = o.created
    ? `<section class="secret" aria-labelledby="secret-h" id="created">
<h2 id="secret-h">Key created: its secret</h2>
<p><strong>Copy it now: it is shown only this once.</strong> It is stored only as a hash, so nobody can show it again; if it is lost, create another key and revoke this one. Keep it on your server, never in a browser or an app.</p>
<p><code class="hash" id="new-secret">${e(o.created.apiKey)}</code></p>
<p><button type="button" class="button" data-copy="${e(o.created.apiKey)}" hidden>Copy secret</button> <span role="status" aria-live="polite" class="copy-status"></span></p>
</section>`
    : "";
  // Only the scopes this session holds: a key never gets more than its creator has.
  const held = allScopes.filter((s) => v.session.scopes.includes(s));
  const chosen = o.chosen ?? [];
  const create = can(v, "api_keys:write")
    ? `<section aria-labelledby="create-h"><h2 id="create-h">Create a ${env} key</h2>
${o.message ? notice(o.message, "error") : ""}<form method="post" action="${e(`${paths.base}/api-keys`)}" class="stack" id="create-key">
${csrfField(v.csrf)}
<fieldset><legend>Scopes (those this session holds)</legend>
${held.map((s, i) => `<label class="check"><input type="checkbox" name="scopes" value="${e(s)}" id="scope-${i}"${chosen.includes(s) ? " checked" : ""}> <code>${e(s)}</code>: ${e(scopeTexts[s] ?? s)}</label>`).join("\n")}
</fieldset>
<button type="submit" class="button">Create key</button>
</form></section>`
    : "";
  const list = o.keys.length === 0 ? `<p>No API keys in ${env}.</p>` : `<ul class="key-list" id="api-keys">\n${o.keys.map((k) => keyItem(paths, v, k, o.own)).join("\n")}\n</ul>`;
  const more = o.next ? `<p><a rel="next" href="${e(`${paths.base}/api-keys?cursor=${encodeURIComponent(o.next)}`)}">Older keys</a></p>` : "";
  return layout(paths, v, {
    title: "API keys",
    section: "api-keys",
    notice: o.notice,
    main: `${created}
<section aria-labelledby="keys-h"><h2 id="keys-h">${env} keys</h2>
<p class="help">Each key is shown by its first characters; its secret is never shown after it is created. Last use is recorded to the minute.</p>
${list}
${more}</section>
${create}`,
  });
}

/** Asks before a key is revoked: its calls fail from then on, and its dashboard sessions end. */
export function revokeKeyPage(paths: DashboardPaths, v: Viewer, k: ApiKey): string {
  return layout(paths, v, {
    title: `Revoke ${k.hint}`,
    section: "api-keys",
    main: `<p class="notice notice-warning" role="status">Revoking key <code>${e(k.hint)}</code> (<code>${e(k.id)}</code>) cannot be undone: every call made with it fails from then on (401 invalid_api_key), and dashboard sessions signed in with it end.</p>
<p>Scopes: ${k.scopes.map((s) => `<code>${e(s)}</code>`).join(" ")}. Last used: ${k.lastUsedAt ? when(k.lastUsedAt) : "never"}.</p>
<form method="post" action="${e(`${paths.base}/api-keys/${k.id}/revoke`)}" class="inline" id="revoke-key">${csrfField(v.csrf)}<input type="hidden" name="confirm" value="1"><button type="submit" class="button button-danger">Revoke key</button></form>
<a class="button button-secondary" href="${e(`${paths.base}/api-keys`)}">Keep it</a>`,
  });
}
