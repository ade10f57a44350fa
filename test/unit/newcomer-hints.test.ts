// The suggestions error messages make to a newcomer: the snake_case field meant by another
// spelling, the quoted form of an amount sent as a JSON number, and an amount in an asset's form.
import fc from "fast-check";
import t from "tap";
import { numberForStringMessage, suggestFieldName } from "../../services/platform/api-json.ts";
import { checkAmount, exampleAmount } from "../../services/vocabulary/amount.ts";

const createFields = ["network", "asset", "requested_amount", "merchant_reference", "expires_in_seconds", "metadata"];

t.test("another spelling of a field suggests its snake_case name", async (t) => {
  t.equal(suggestFieldName("merchantReference", createFields), "merchant_reference", "camelCase");
  t.equal(suggestFieldName("MerchantReference", createFields), "merchant_reference", "PascalCase");
  t.equal(suggestFieldName("merchant-reference", createFields), "merchant_reference", "kebab-case");
  t.equal(suggestFieldName("expiresInSeconds", createFields), "expires_in_seconds", "three words");
  t.equal(suggestFieldName("Network", createFields), "network", "one word, capitalized");
});

t.test("a name that is no spelling of a field suggests nothing", async (t) => {
  t.equal(suggestFieldName("amount", createFields), undefined, "a different word");
  t.equal(suggestFieldName("merchantRef", createFields), undefined, "an abbreviation");
  t.equal(suggestFieldName("merchant_reference", createFields), undefined, "the field itself (it is not unknown)");
  t.equal(suggestFieldName("merchantReference", []), undefined, "no fields");
});

t.test("every snake_case name is found from its camelCase spelling", async (t) => {
  const word = fc.stringMatching(/^[a-z][a-z0-9]{0,7}$/);
  fc.assert(
    fc.property(fc.array(word, { minLength: 1, maxLength: 4 }), (words) => {
      const snake = words.join("_");
      const camel = words.map((w, i) => (i === 0 ? w : w[0]!.toUpperCase() + w.slice(1))).join("");
      return suggestFieldName(camel, ["other", snake]) === (camel === snake ? undefined : snake);
    }),
    { numRuns: 200 },
  );
});

t.test("an amount sent as a JSON number is shown as the string it should be", async (t) => {
  const float = numberForStringMessage("requested_amount", 12.5);
  t.match(float, /must be a decimal string such as "12\.50"/, "the expected form");
  t.match(float, /send "12\.5"/, "and the value as it should have been sent");
  t.match(numberForStringMessage("amount", 6.25), /such as "12\.50".*send "6\.25"/, "any amount field");
  t.match(numberForStringMessage("requested_amount", 12), /send "12"/, "a whole number");
  const exponent = numberForStringMessage("requested_amount", 1e21);
  t.match(exponent, /such as "12\.50"/, "a number with an exponent still shows the form");
  t.notMatch(exponent, /send/, "but is not echoed in a form the API refuses");
  t.notMatch(numberForStringMessage("requested_amount", -5), /send/, "nor is a negative one");
  t.equal(numberForStringMessage("merchant_reference", 1001), '"merchant_reference" must be a string, not a JSON number: send "1001".', "a string field that is no amount");
});

t.test("the example amount has the asset's form, and the asset accepts it", async (t) => {
  t.equal(exampleAmount(6), "12.50");
  t.equal(exampleAmount(2), "12.50");
  t.equal(exampleAmount(1), "12.5");
  t.equal(exampleAmount(0), "12");
  for (const decimals of [0, 1, 2, 6, 8, 9, 18]) {
    t.ok(checkAmount(exampleAmount(decimals), decimals).ok, `${decimals} decimals: ${exampleAmount(decimals)} is valid`);
  }
});

t.test("an amount refused for its decimals says so by kind", async (t) => {
  const check = checkAmount("12.1234567", 6);
  t.same(check.ok ? undefined : check.problem, "decimals");
  const format = checkAmount("12,50", 6);
  t.same(format.ok ? undefined : format.problem, "format");
});
