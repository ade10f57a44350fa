import t from "tap";
import { sampleProblems, samplesOf } from "../helpers/doc-samples.ts";

t.test("samplesOf reads each '# {' comment with its continuation lines", async (t) => {
  const lines = ['curl -s x', '# {"data":{"id":"a",', '#  "status":"pending"}}', "echo", '# {"error":{}}', "# not a sample"];
  t.same(samplesOf(lines), ['{"data":{"id":"a","status":"pending"}}', '{"error":{}}']);
  t.same(samplesOf(["# Idempotent-Replayed: true"]), [], "a header line is not a sample");
});

t.test("sampleProblems: shown fields present, a full sample complete, literal strings equal", async (t) => {
  const out = { data: { id: "pi_1", status: "pending", source: "api" } };
  t.same(sampleProblems('{"data":{"id":"pi_...","status":"pending","source":"api"}}', out), [], "a sample that holds");
  t.match(sampleProblems('{"data":{"id":"pi_...","status":"pending"}}', out), [/does not show "source"/], "a field the sample leaves out");
  t.same(sampleProblems('{"data":{...,"status":"pending"}}', out), [], "unless it elides fields");
  t.match(sampleProblems('{"data":{...,"state":"pending"}}', out), [/shows "state"/], "a field the output does not have");
  t.match(sampleProblems('{"data":{...,"status":"paid"}}', out), [/"status":"paid", the output "pending"/], "a literal that is wrong");
  t.same(sampleProblems('{"data":[...],"has_more":false}', { data: [{ x: 1 }], has_more: false }), [], "[...] elides items");
});
