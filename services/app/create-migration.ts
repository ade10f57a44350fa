// Writes a migration for the difference between the entities and a fresh database
// (DATABASE_URL, default: a scratch database on the machine's PostgreSQL).
import { openDatabase } from "./database.ts";

const url = process.env.DATABASE_URL;
if (!url) {
  console.error("create-migration: set DATABASE_URL to a database with every existing migration applied");
  process.exit(2);
}
const db = await openDatabase(url);
try {
  await db.migrator.up();
  const result = await db.migrator.create("services/platform/migrations", false, false, process.argv[2]);
  console.log(result.fileName ? `wrote ${result.fileName}; add it to services/platform/migrations/index.ts` : "no changes");
} finally {
  await db.close();
}
