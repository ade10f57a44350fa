/**
 * A webhook endpoint's page and the deliveries page. Deliveries are a compact list, one line each
 * (event type, endpoint, status, the last answer's HTTP code, time), with the attempts and ids
 * folded in a <details> until asked for: no wide table, so nothing scrolls sideways on a phone
 * and there is no scrolling region a keyboard could not reach.
 */
import type { WebhookAttempt, WebhookDelivery, WebhookEndpoint } from "../../gen/payments/v1/webhooks_pb.ts";
import { escapeHtml as e } from "../checkout/page.ts";
import { actionForm, can, csrfField, dl, eventChoice, eventChoices, layout, when, type DashboardPaths, type Viewer } from "./page.ts";
import { pill } from "./status.ts";

/** Why a delivery was sent again (its cause); nothing for one made with its event. */
function causeNote(d: WebhookDelivery): string {
  if (d.replayOf) return `<p class="help">A replay of <code>${e(d.replayOf)}</code>.</p>\n`;
  if (d.cause === "replay") return `<p class="help">A replay.</p>\n`;
  if (d.cause === "recovery") return `<p class="help">Sent again by a recovery of the events the endpoint missed.</p>\n`;
  return "";
}

/** The last answer in a few words: "HTTP 200", "no answer" (a transport error), or "not tried yet". */
function lastAnswer(d: WebhookDelivery): string {
  const last = d.attempts.reduce<WebhookAttempt | undefined>((a, b) => (a === undefined || b.number > a.number ? b : a), undefined);
  if (!last) return "not tried yet";
  return last.statusCode !== undefined ? `HTTP ${last.statusCode}` : "no answer";
}

function attemptItem(a: WebhookAttempt): string {
  const code = a.statusCode !== undefined ? `HTTP ${a.statusCode}` : "no answer";
  const excerpt = a.responseExcerpt ? `<br><span class="help">Response:</span> <code class="excerpt">${e(a.responseExcerpt)}</code>` : "";
  return `<li class="attempt">Attempt ${a.number}, ${when(a.startedAt)}: ${pill(a.outcome)} <span class="http-code">${code}</span> in ${a.durationMs} ms${a.error ? ` <span class="help">(${e(a.error)})</span>` : ""}${excerpt}</li>`;
}

/**
 * Deliveries, newest first. Any delivery that has ended (delivered or failed) can be replayed, as
 * the API allows; one replayed already says by which delivery, and offers to replay it again.
 * `endpointUrls` names endpoints by URL where known (by id otherwise).
 */
export function deliveriesList(paths: DashboardPaths, v: Viewer, deliveries: WebhookDelivery[], idem: () => string, endpointUrls: ReadonlyMap<string, string> = new Map()): string {
  if (deliveries.length === 0) return `<p>No deliveries.</p>`;
  const replays = new Map<string, string[]>();
  for (const d of deliveries) if (d.replayOf) replays.set(d.replayOf, [...(replays.get(d.replayOf) ?? []), d.id]);
  return `<ol class="deliveries" id="deliveries">
${deliveries
  .map((d) => {
    const replayedAs = replays.get(d.id) ?? [];
    const replayedNote = replayedAs.length ? `<p class="help">Replayed as ${replayedAs.map((id) => `<code>${e(id)}</code>`).join(", ")}.</p>\n` : "";
    const ended = d.status === "delivered" || d.status === "failed";
    const replay = can(v, "webhooks:write") && ended ? actionForm(v, `${paths.base}/deliveries/${d.id}/replay`, replayedAs.length ? "Replay again" : "Replay", { idem: idem() }) : "";
    const url = endpointUrls.get(d.endpointId);
    const endpoint = `<a href="${e(`${paths.base}/webhooks/${d.endpointId}`)}" class="endpoint-link">${url ? e(url) : `<code>${e(d.endpointId)}</code>`}</a>`;
    const attempts =
      d.attempts.length === 0
        ? `<p>No attempt yet.</p>`
        : `<ol class="attempts">${[...d.attempts].sort((a, b) => a.number - b.number).map(attemptItem).join("")}</ol>`;
    return `<li class="delivery" data-delivery="${e(d.id)}" data-status="${e(d.status)}" data-cause="${e(d.cause)}">
<p class="delivery-line"><strong class="event-type">${e(d.eventType)}</strong> ${pill(d.status)} <span class="http-code">${lastAnswer(d)}</span> <span class="to">to ${endpoint}</span> <span class="help">${when(d.lastAttemptAt ?? d.createdAt)}</span></p>
${causeNote(d)}${replayedNote}<details class="more"><summary>Attempts (${d.attempts.length})</summary>
<p class="help">Delivery <code>${e(d.id)}</code> of event <a href="${e(`${paths.base}/deliveries?event=${d.eventId}`)}"><code>${e(d.eventId)}</code></a>, made ${when(d.createdAt)}.</p>
${attempts}
</details>
${replay}
</li>`;
  })
  .join("\n")}
</ol>`;
}

export function endpointPage(paths: DashboardPaths, v: Viewer, o: { endpoint: WebhookEndpoint; deliveries: WebhookDelivery[]; idem: () => string; next?: string; notice?: string }): string {
  const ep = o.endpoint;
  const write = can(v, "webhooks:write");
  const disabled = ep.status !== "enabled";
  const banner = disabled
    ? `<p class="notice notice-warning" id="disabled-banner" role="status">This endpoint is disabled${ep.disabledAt ? ` since ${when(ep.disabledAt)}` : ""}: it gets no deliveries. To recover, fix the receiver, enable the endpoint again${write ? " (below)" : ""}, then replay the failed deliveries you need (each delivery's Replay button), or ask your operator to recover the events it missed (admin endpoint enable --recover-since).</p>\n`
    : "";
  const actions = write
    ? `<section aria-labelledby="ep-actions-h"><h2 id="ep-actions-h">Actions</h2>
${disabled ? actionForm(v, `${paths.base}/webhooks/${ep.id}/enable`, "Enable endpoint", { id: "enable" }) : `${actionForm(v, `${paths.base}/webhooks/${ep.id}/test`, "Send test event", { id: "send-test" })} ${actionForm(v, `${paths.base}/webhooks/${ep.id}/disable`, "Disable endpoint", { danger: true, id: "disable" })}`}
</section>`
    : "";
  // Its event types and description, changed in place (UpdateWebhookEndpoint): for events from now on.
  const edit = write
    ? `<section aria-labelledby="ep-edit-h"><h2 id="ep-edit-h">Settings</h2>
<form method="post" action="${e(`${paths.base}/webhooks/${ep.id}/update`)}" class="stack" id="edit-endpoint">
${csrfField(v.csrf)}
<label for="ep-description">Description</label><input id="ep-description" name="description" maxlength="256" value="${e(ep.description ?? "")}">
<fieldset><legend>Events to send (from now on)</legend>
${eventChoices.map((type, i) => eventChoice(type, i, ep.enabledEvents)).join("\n")}
</fieldset>
<button type="submit" class="button">Save</button>
</form></section>`
    : "";
  const more = o.next ? `<p><a rel="next" href="${e(`${paths.base}/webhooks/${ep.id}?cursor=${encodeURIComponent(o.next)}`)}">Older deliveries</a></p>` : "";
  return layout(paths, v, {
    title: `Endpoint ${ep.url}`,
    section: "webhooks",
    notice: (o.notice ?? "") + banner,
    main: `${dl([
      ["Id", `<code>${e(ep.id)}</code>`],
      ["Status", pill(ep.status, { id: "endpoint-status" })],
      ["Events", e(ep.enabledEvents.join(", "))],
      ["Description", e(ep.description ?? "—")],
      ["Created", when(ep.createdAt)],
    ])}
${actions}
${edit}
<section aria-labelledby="deliveries-h"><h2 id="deliveries-h">Deliveries</h2>
${deliveriesList(paths, v, o.deliveries, o.idem, new Map([[ep.id, ep.url]]))}
${more}</section>`,
  });
}

export function deliveriesPage(paths: DashboardPaths, v: Viewer, o: { eventId?: string; deliveries: WebhookDelivery[]; idem: () => string; endpointUrls?: ReadonlyMap<string, string>; notice?: string }): string {
  return layout(paths, v, {
    title: o.eventId ? `Deliveries of ${o.eventId}` : "Deliveries",
    section: "webhooks",
    notice: o.notice,
    main: deliveriesList(paths, v, o.deliveries, o.idem, o.endpointUrls),
  });
}
