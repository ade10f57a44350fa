// The README says the admin CLI prints one line on bad input: an unknown command, or none, says so
// and where the usage is, rather than the whole usage on stderr; asking for help still prints it.
import { spawnSync } from "node:child_process";
import path from "node:path";
import t from "tap";

const root = path.resolve(import.meta.dirname, "../..");
// Nothing the checks before a command runs need: no database or NATS is reached.
const env = { PATH: process.env.PATH ?? "", DATA_DIR: path.join(root, ".data-none") };
const run = (cli: string, ...args: string[]) => spawnSync(process.execPath, [path.join(root, "services/app", cli), ...args], { env, encoding: "utf8", timeout: 30_000 });

for (const [cli, name] of [["admin.ts", "admin"], ["ops-cli.ts", "ops"]] as const) {
  t.test(`${name}: an unknown command, or none, is one line on stderr, exit 2`, async (t) => {
    for (const args of [["nonsense"], ["merchant", "frobnicate"], []]) {
      const r = run(cli, ...args);
      const what = args.length ? `unknown command "${args.join(" ")}"` : "no command";
      t.equal(r.status, 2, `${what}: exit 2`);
      t.equal(r.stdout, "", `${what}: nothing on stdout`);
      t.equal(r.stderr, `${name}: ${what}: npm run -s ${name} -- help lists the commands\n`, `${what}: one line naming how to see the usage`);
    }
  });

  t.test(`${name}: help, --help and -h print the usage on stdout, exit 0`, async (t) => {
    for (const flag of ["help", "--help", "-h"]) {
      const r = run(cli, flag);
      t.equal(r.status, 0, flag);
      t.match(r.stdout, new RegExp(`^usage:\\n  ${name} `), `${flag}: the usage`);
      t.ok(r.stdout.split("\n").length > 10, `${flag}: all of it`);
      t.equal(r.stderr, "", `${flag}: no complaint`);
    }
  });
}

t.test("admin: a missing option is one line too", async (t) => {
  const r = run("admin.ts", "merchant", "create");
  t.equal(r.status, 2);
  t.equal(r.stderr, "admin: --name is required: npm run -s admin -- help lists each command's options\n");
});
