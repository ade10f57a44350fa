// The second node's part in what counts (witness.ts): how far the watcher reads, and what agreement is.
import t from "tap";
import { agreed, headToRead, witnessedHead } from "../../services/watcher/witness.ts";

t.test("the watcher reads no further than a second node has seen", async (t) => {
  t.equal(headToRead(120, 118), 118, "a witness two blocks behind: read to its head, the rest waits for it");
  t.equal(headToRead(120, 125), 120, "a witness ahead: the node's own head");
  t.equal(headToRead(120, undefined), 120, "no witness answers: the node's head (the batch then waits for agreement)");
  t.equal(witnessedHead([undefined, 90, 95]), 95, "the highest head any witness answers");
  t.equal(witnessedHead([undefined, undefined]), undefined, "none answers");
  t.equal(witnessedHead([]), undefined);
});

t.test("a batch's last block is agreed when any second node answers its hash", async (t) => {
  const hash = "0xabc1";
  t.ok(agreed(hash, [undefined, "0xabc1"]), "one of two agrees");
  t.ok(agreed(hash, ["0xABC1"]), "hashes compare without case");
  t.notOk(agreed(hash, ["0xdef2"]), "another block at that height: a node on another branch, or a lie");
  t.notOk(agreed(hash, [undefined]), "no block there, or no answer: not agreed");
  t.notOk(agreed(hash, []), "nobody asked");
});
