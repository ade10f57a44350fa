import type { EntityManager } from "../platform/db.ts";
import { executePrepared } from "../platform/prepared.ts";
import type { Ending } from "./fairness.ts";

/**
 * What every delivery worker shares about an endpoint, in PostgreSQL (the database each claim
 * needs anyway): so that an endpoint's in-flight cap and its circuit are the same with one worker
 * or five (issue 48). A worker's own gate (fairness.ts) still decides first; an attempt of an
 * endpoint not known fast then takes one of the endpoint's `cap` slots here before its claim, and
 * gives it back when it ends. A fast endpoint's attempts take none: the cap bounds only new, slow,
 * hanging and failing endpoints, and the hot path of a healthy one costs nothing more.
 *
 * A slot is a lease: it lapses `leaseMs` after it was taken, by when its attempt can no longer be
 * running (the worker checks that before it sends), so a worker that dies gives its slots back.
 * The circuit counts timeouts in a row from every worker; open, the endpoint has one slot.
 *
 * This module is the one writer of webhook_endpoint_slots and webhook_endpoint_circuits
 * (test/unit/one-writer.test.ts): takeSlots, endSlots, and forgetEndpoint for an endpoint deleted.
 */

export interface SlotRequest {
  /** The attempt's own token (unique per attempt). */
  holder: string;
  endpointId: string;
  /** The endpoint's cap as this worker's gate sees it (1 while its circuit is open anywhere). */
  cap: number;
  leaseMs: number;
}

export type SlotAnswer =
  | { granted: true; circuitOpen: boolean }
  /** Every slot is held: `oldestMs`, how long the oldest holder has had its slot (the endpoint's longest wait elsewhere). */
  | { granted: false; circuitOpen: boolean; oldestMs: number };

/**
 * Takes one free slot per request, a whole batch in one statement: each endpoint's requests get
 * distinct slot numbers among those free (no live lease) below its cap (1 while its circuit is
 * open). Two workers that pick the same free slot at once: the second's insert finds the first's
 * lease live and takes nothing (it tries again later), so a cap is never exceeded.
 */
export async function takeSlots(em: EntityManager, batch: readonly SlotRequest[]): Promise<SlotAnswer[]> {
  const rows = await executePrepared<{ holder: string; granted: boolean; circuit_open: boolean; oldest_ms: number | null }>(
    em,
    `with input as (
       select i.*, row_number() over (partition by i.endpoint_id order by i.holder) as k
         from json_to_recordset(?::json) as i(holder text, endpoint_id text, cap int, lease_ms int)
     ), caps as (
       select i.endpoint_id, case when coalesce(c.open, false) then 1 else max(i.cap) end as cap, coalesce(c.open, false) as open
         from input i left join webhook_endpoint_circuits c on c.endpoint_id = i.endpoint_id
        group by i.endpoint_id, c.open
     ), free as (
       select caps.endpoint_id, n as slot, row_number() over (partition by caps.endpoint_id order by n) as k
         from caps join generate_series(0, ?::int - 1) as n on n < caps.cap
        where not exists (select 1 from webhook_endpoint_slots s where s.endpoint_id = caps.endpoint_id and s.slot = n and s.until > clock_timestamp())
     ), taken as (
       insert into webhook_endpoint_slots as s (endpoint_id, slot, holder, taken_at, until)
       select i.endpoint_id, f.slot, i.holder, clock_timestamp(), clock_timestamp() + make_interval(secs => i.lease_ms / 1000.0)
         from input i join free f on f.endpoint_id = i.endpoint_id and f.k = i.k
       on conflict (endpoint_id, slot) do update set holder = excluded.holder, taken_at = excluded.taken_at, until = excluded.until
        where s.until <= clock_timestamp()
       returning s.holder
     )
     select i.holder, (t.holder is not null) as granted, caps.open as circuit_open,
            (select (extract(epoch from clock_timestamp() - min(s.taken_at)) * 1000)::int from webhook_endpoint_slots s
              where s.endpoint_id = i.endpoint_id and s.until > clock_timestamp()) as oldest_ms
       from input i join caps on caps.endpoint_id = i.endpoint_id left join taken t on t.holder = i.holder`,
    [JSON.stringify(batch.map((b) => ({ holder: b.holder, endpoint_id: b.endpointId, cap: b.cap, lease_ms: b.leaseMs }))), Math.max(1, ...batch.map((b) => b.cap))],
    // Planned with the batch's largest cap as a constant: estimated at a few rows rather than the
    // thousand a series of unknown length gets, the statement stays far below JIT's threshold
    // (jit_above_cost), whose compilation took 600 ms of a 1 ms statement.
    { replan: true },
  );
  const byHolder = new Map(rows.map((r) => [r.holder, r]));
  return batch.map((b): SlotAnswer => {
    const r = byHolder.get(b.holder);
    const circuitOpen = r?.circuit_open ?? false;
    return r?.granted ? { granted: true, circuitOpen } : { granted: false, circuitOpen, oldestMs: Math.max(0, r?.oldest_ms ?? 0) };
  });
}

export interface SlotEnd {
  endpointId: string;
  /** The slot's holder; undefined for an attempt that held none (its endpoint was fast). */
  holder: string | undefined;
  /** How the attempt ended (undefined: it made no request). */
  ending: Ending | undefined;
}

/**
 * Gives slots back and moves each endpoint's circuit on, a batch in one statement: a timeout adds
 * one to its timeouts in a row (open at `circuitTimeouts`, 0: never); an answer, any HTTP status,
 * closes it. Returns, per item, whether the endpoint's circuit is open now (undefined: unchanged).
 */
export async function endSlots(em: EntityManager, batch: readonly SlotEnd[], circuitTimeouts: number): Promise<(boolean | undefined)[]> {
  // One change per endpoint per batch, in the order its attempts ended: an answer starts the count again.
  const circuit = new Map<string, { timeouts: number; answered: boolean }>();
  for (const b of batch) {
    if (b.ending === undefined || b.ending === "other") continue;
    const c = circuit.get(b.endpointId) ?? { timeouts: 0, answered: false };
    if (b.ending === "timeout") c.timeouts++;
    else {
      c.answered = true;
      c.timeouts = 0;
    }
    circuit.set(b.endpointId, c);
  }
  const rows = await executePrepared<{ endpoint_id: string; open: boolean }>(
    em,
    // The delete runs whether or not the query reads it (a data-modifying CTE always does).
    `with released as (
       delete from webhook_endpoint_slots where holder = any(?::text[])
     ), input as (
       select * from json_to_recordset(?::json) as i(endpoint_id text, timeouts int, answered boolean)
     ), answered as (
       update webhook_endpoint_circuits c set timeouts_in_row = input.timeouts, open = ? > 0 and input.timeouts >= ?, updated_at = now()
         from input where c.endpoint_id = input.endpoint_id and input.answered and (c.timeouts_in_row > 0 or c.open or input.timeouts > 0)
       returning c.endpoint_id, c.open
     ), timedout as (
       insert into webhook_endpoint_circuits as c (endpoint_id, timeouts_in_row, open, updated_at)
       select endpoint_id, timeouts, ? > 0 and timeouts >= ?, now() from input where not answered and timeouts > 0
       on conflict (endpoint_id) do update set timeouts_in_row = c.timeouts_in_row + excluded.timeouts_in_row,
         open = c.open or (? > 0 and c.timeouts_in_row + excluded.timeouts_in_row >= ?), updated_at = now()
       returning c.endpoint_id, c.open
     )
     select endpoint_id, open from answered union all select endpoint_id, open from timedout`,
    [
      batch.flatMap((b) => (b.holder === undefined ? [] : [b.holder])),
      JSON.stringify([...circuit].map(([endpoint_id, c]) => ({ endpoint_id, timeouts: c.timeouts, answered: c.answered }))),
      circuitTimeouts,
      circuitTimeouts,
      circuitTimeouts,
      circuitTimeouts,
      circuitTimeouts,
      circuitTimeouts,
    ],
  );
  const open = new Map(rows.map((r) => [r.endpoint_id, r.open]));
  return batch.map((b) => open.get(b.endpointId));
}

/**
 * Removes a deleted endpoint's circuit and slots, in the caller's transaction (the endpoint's
 * delete, webhooks/operations.ts): these tables have no foreign key to the endpoint (a worker's
 * hot path writes them without touching webhook_endpoints), so nothing else would remove them.
 */
export async function forgetEndpoint(em: EntityManager, endpointId: string): Promise<void> {
  await em.execute(`delete from webhook_endpoint_circuits where endpoint_id = ?`, [endpointId]);
  await em.execute(`delete from webhook_endpoint_slots where endpoint_id = ?`, [endpointId]);
}
