import type { EntityManager } from "../platform/db.ts";
import { SecretBox, SecretUnreadable } from "../platform/secrets.ts";

/** The process was given a key that cannot open this database's signing secrets: it must not start. */
export class SecretKeyMismatch extends Error {
  constructor(problem: string) {
    super(
      `${problem}. Start every process with the key the database was set up with (SECRET_ENCRYPTION_KEY, or DATA_DIR/secret.key of the first host); ` +
        `to change keys, give the new one as SECRET_ENCRYPTION_KEY and the old one as SECRET_ENCRYPTION_KEY_PREVIOUS, then run "admin secrets reseal" (docs/operations.md: rotating the encryption key)`,
    );
    this.name = "SecretKeyMismatch";
  }
}

interface CheckRow {
  key_id: string;
  check_value: string;
}

/** The key ids of every sealed secret that carries one. */
async function sealedKeyIds(em: EntityManager): Promise<string[]> {
  const rows = await em.execute<{ key_id: string }[]>(
    `select distinct encode(substring(c from 2 for 8), 'hex') as key_id
       from (select secret_ciphertext as c from webhook_endpoints union all
             select previous_secret_ciphertext from webhook_endpoints where previous_secret_ciphertext is not null) s
      where get_byte(c, 0) = 1`,
  );
  return rows.map((r) => r.key_id);
}

/**
 * Refuses (SecretKeyMismatch) a key that is not the one the database's signing secrets are sealed
 * under. The first process to start records its key's check value; a database from before key
 * checks is accepted only if the key opens one of its secrets. The box then seals under the key
 * the check names (the previous one, during a rotation, until the reseal).
 */
export async function checkSecretKey(em: EntityManager, box: SecretBox): Promise<void> {
  let [row] = await em.execute<CheckRow[]>(`select key_id, check_value from secret_key_check where id = 1`);
  if (!row) {
    const [sample] = await em.execute<{ id: string; secret_ciphertext: Buffer }[]>(`select id, secret_ciphertext from webhook_endpoints limit 1`);
    if (sample) {
      try {
        box.open(sample.id, sample.secret_ciphertext);
      } catch (err) {
        if (!(err instanceof SecretUnreadable)) throw err;
        throw new SecretKeyMismatch("SECRET_ENCRYPTION_KEY cannot open the signing secrets already in this database (a changed or missing key)");
      }
    }
    await em.execute(`insert into secret_key_check (id, key_id, check_value, updated_at) values (1, ?, ?, now()) on conflict (id) do nothing`, [
      box.current.keyId,
      box.current.check,
    ]);
    [row] = await em.execute<CheckRow[]>(`select key_id, check_value from secret_key_check where id = 1`);
  }
  if (row!.check_value !== box.current.check && row!.check_value !== box.previous?.check) {
    throw new SecretKeyMismatch(
      `SECRET_ENCRYPTION_KEY is not the key this database's signing secrets are sealed with (its key check value differs from the one stored for key ${row!.key_id})`,
    );
  }
  const unknown = (await sealedKeyIds(em)).filter((id) => !box.has(id));
  if (unknown.length > 0) {
    throw new SecretKeyMismatch(`signing secrets in this database are sealed under encryption key ${unknown.join(", ")}, which this process was not given`);
  }
  box.sealUnder(row!.key_id);
}

/**
 * Re-encrypts every signing secret not yet under the current key (SECRET_ENCRYPTION_KEY), opening
 * it with the current or the previous key, a batch of endpoints per transaction, then records the
 * current key's check value. A secret neither key opens is left as it is, and the check value is
 * not moved: the run fails, naming those endpoints.
 */
export async function resealSecrets(em: EntityManager, box: SecretBox): Promise<{ key_id: string; resealed: number; endpoints: number }> {
  let after = "";
  let resealed = 0;
  let endpoints = 0;
  const unreadable: string[] = [];
  const stale = (sealed: Buffer | null) => sealed !== null && SecretBox.keyIdOf(sealed) !== box.current.keyId;
  for (;;) {
    const batch = await em.transactional(async (tx) => {
      const rows = await tx.execute<{ id: string; secret_ciphertext: Buffer; previous_secret_ciphertext: Buffer | null }[]>(
        `select id, secret_ciphertext, previous_secret_ciphertext from webhook_endpoints where id > ? order by id limit 500 for update`,
        [after],
      );
      for (const r of rows) {
        if (!stale(r.secret_ciphertext) && !stale(r.previous_secret_ciphertext)) continue;
        try {
          const reseal = (sealed: Buffer | null) => (sealed === null ? null : box.seal(r.id, box.open(r.id, sealed)));
          await tx.execute(`update webhook_endpoints set secret_ciphertext = ?, previous_secret_ciphertext = ? where id = ?`, [
            reseal(r.secret_ciphertext),
            reseal(r.previous_secret_ciphertext),
            r.id,
          ]);
          resealed++;
        } catch (err) {
          if (!(err instanceof SecretUnreadable)) throw err;
          unreadable.push(r.id);
        }
      }
      return rows;
    });
    endpoints += batch.length;
    if (batch.length === 0) break;
    after = batch[batch.length - 1]!.id;
  }
  if (unreadable.length > 0) {
    throw new SecretKeyMismatch(
      `${unreadable.length} endpoint secret(s) open under neither SECRET_ENCRYPTION_KEY nor SECRET_ENCRYPTION_KEY_PREVIOUS (${unreadable.slice(0, 10).join(", ")}); the others were resealed, the key check is unchanged`,
    );
  }
  await em.execute(
    `insert into secret_key_check (id, key_id, check_value, updated_at) values (1, ?, ?, now())
     on conflict (id) do update set key_id = excluded.key_id, check_value = excluded.check_value, updated_at = excluded.updated_at`,
    [box.current.keyId, box.current.check],
  );
  return { key_id: box.current.keyId, resealed, endpoints };
}
