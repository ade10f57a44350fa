import { hkdfSync, randomBytes } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";

/**
 * The server's master key (SECRET_ENCRYPTION_KEY). Without one, a key is
 * generated once under DATA_DIR with mode 0600 and reused from then on.
 */
export function loadOrCreateKey(configured: Buffer | undefined, dataDir: string): Buffer {
  if (configured) return configured;
  const file = path.join(dataDir, "secret.key");
  if (existsSync(file)) {
    const key = Buffer.from(readFileSync(file, "utf8").trim(), "hex");
    if (key.length !== 32) throw new Error(`${file} does not hold a 32-byte hex key`);
    return key;
  }
  mkdirSync(dataDir, { recursive: true, mode: 0o755 });
  const key = randomBytes(32);
  writeFileSync(file, key.toString("hex") + "\n", { mode: 0o600, flag: "wx" });
  return key;
}

/** A key for one purpose, derived from the master key, so purposes never share key material. */
export function deriveKey(master: Buffer, purpose: string): Buffer {
  return Buffer.from(hkdfSync("sha256", master, Buffer.alloc(0), purpose, 32));
}
