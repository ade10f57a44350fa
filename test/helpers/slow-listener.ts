// A process that listens on a channel (argv: database URL, channel, file) and takes 200 ms of
// synchronous work per notification before writing it to the file: a busy service process.
import { appendFileSync } from "node:fs";
import { createLogger } from "../../services/platform/logger.ts";
import { listenForever } from "../../services/platform/pg-listen.ts";

const [databaseUrl, channel, file] = process.argv.slice(2) as [string, string, string];
listenForever({
  databaseUrl,
  channel,
  logger: createLogger("silent", 2),
  what: "slow listener",
  onNotification: (payload) => {
    const until = Date.now() + 200;
    while (Date.now() < until);
    appendFileSync(file, `${payload}\n`);
  },
  onListening: () => appendFileSync(file, "listening\n"),
});
