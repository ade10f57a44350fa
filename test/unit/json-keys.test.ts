import fc from "fast-check";
import t from "tap";
import { repeatedKey } from "../../services/platform/json-keys.ts";

t.test("the first repeated key, as a path", async (t) => {
  const cases: [string, string | undefined][] = [
    ['{"a":1,"b":2}', undefined],
    ['{"a":1,"a":2}', "a"],
    ['{"a":1,"\\u0061":2}', "a"],
    ['{"a":{"x":1},"b":{"x":1}}', undefined],
    ['{"a":{"x":1,"x":2}}', "a.x"],
    ['{"items":[{"n":1},{"n":1},{"n":1,"m":2,"n":3}]}', "items[2].n"],
    ['{"s":"{\\"a\\":1,\\"a\\":2}","t":"\\\\"}', undefined],
    ['{"a":[1,2,{"a":1}],"b":"a"}', undefined],
    ['{"":1,"":2}', ""],
    ['[{"a":1},{"a":1}]', undefined],
  ];
  for (const [text, want] of cases) t.equal(repeatedKey(text), want, text);
});

t.test("JSON.stringify never repeats a key; one key written twice is found", async (t) => {
  fc.assert(
    fc.property(fc.dictionary(fc.string(), fc.jsonValue()), fc.string(), (object, key) => {
      const text = JSON.stringify(object);
      if (repeatedKey(text) !== undefined) return false;
      const doubled = `{${JSON.stringify(key)}:1,${text.slice(1, -1)}${text === "{}" ? "" : ","}${JSON.stringify(key)}:2}`;
      return repeatedKey(doubled) === key;
    }),
  );
});
