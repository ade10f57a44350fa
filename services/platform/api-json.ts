import {
  fromJson,
  getOption,
  hasOption,
  isFieldSet,
  toJson,
  type DescField,
  type DescMessage,
  type JsonValue,
  type Message,
} from "@bufbuild/protobuf";
import type { Timestamp } from "@bufbuild/protobuf/wkt";
import { field as fieldRules } from "../../gen/payments/v1/options_pb.ts";
import { validationError } from "./errors.ts";
import { timestampPattern } from "../vocabulary/formats.ts";

/**
 * JSON <-> proto for the REST gateway: proto field names only, unknown or
 * mistyped fields refused with the field named in `param`.
 */

function describeType(field: DescField): string {
  switch (field.fieldKind) {
    case "map":
      return "an object of string values";
    case "list":
      return "an array";
    case "enum":
      return "a string";
    case "message":
      if (field.message.typeName === "google.protobuf.Timestamp") return 'an RFC 3339 timestamp such as "2026-01-31T12:00:00Z"';
      return "an object";
    case "scalar":
      switch (field.scalar) {
        case 9:
          return "a string";
        case 8:
          return "a boolean";
        case 1:
        case 2:
          return "a number";
        // The field's whole range: a number outside it is refused by decoding, before any validator.
        case 13:
        case 7:
          return "a whole number from 0 to 4294967295";
        case 4:
        case 6:
          return "a whole number from 0 to 18446744073709551615";
        case 3:
        case 16:
        case 18:
          return "a whole number from -9223372036854775808 to 9223372036854775807";
        default:
          return "a whole number from -2147483648 to 2147483647";
      }
  }
}

/** Whether a JSON value has the JSON type the field needs (proto JSON is laxer: it takes "12" for 12). */
function hasJsonType(field: DescField, value: JsonValue): boolean {
  if (value === null) return true;
  if (field.fieldKind === "scalar") {
    if (field.scalar === 9) return typeof value === "string";
    if (field.scalar === 8) return typeof value === "boolean";
    if (field.scalar === 12) return typeof value === "string";
    return typeof value === "number";
  }
  if (field.fieldKind === "map") return typeof value === "object" && !Array.isArray(value);
  if (field.fieldKind === "list") return Array.isArray(value);
  return true;
}

type Source = "body" | "query";

const rfc3339 = new RegExp(timestampPattern);

/**
 * Whether a string is an RFC 3339 timestamp (the proto JSON form: "T", "Z" or an offset) of a real
 * calendar date and time. Date.parse alone would roll "2026-02-30" over into March.
 */
export function isRfc3339(value: string): boolean {
  const m = rfc3339.exec(value);
  if (!m) return false;
  const [year, month, day, hour, minute, second, offsetHour, offsetMinute] = m.slice(1).map((part) => Number(part ?? "0"));
  if (year === undefined || month === undefined || day === undefined || year < 1 || month < 1 || month > 12 || day < 1) return false;
  const leap = year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0);
  const days = [31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][month - 1] ?? 0;
  // No leap second (":60"): a proto Timestamp has none.
  return day <= days && Number(hour) <= 23 && Number(minute) <= 59 && Number(second) <= 59 && Number(offsetHour) <= 23 && Number(offsetMinute) <= 59;
}

const loneSurrogate = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

/**
 * JSON's \ud800 escapes can spell text that is not Unicode, which proto strings refuse. Request
 * fields are strings or flat maps and lists of them: one level down is enough, and a body nested
 * deeper is refused for its type anyway (recursing into it could exhaust the stack).
 */
function hasLoneSurrogate(value: JsonValue, depth = 0): boolean {
  if (typeof value === "string") return loneSurrogate.test(value);
  if (typeof value !== "object" || value === null || depth > 0) return false;
  return Object.entries(value).some(([k, v]) => loneSurrogate.test(k) || hasLoneSurrogate(v, depth + 1));
}

function isTimestamp(field: DescField): boolean {
  return field.fieldKind === "message" && field.message.typeName === "google.protobuf.Timestamp";
}

/**
 * Builds the request message from the path parameters and the JSON body or
 * query string. Path parameters win over nothing: naming one in the body or
 * query is an error, so a body can never retarget a request.
 */
export function decodeRequest<T extends Message>(
  schema: DescMessage,
  pathParams: Record<string, string>,
  input: Record<string, JsonValue>,
  source: Source,
): T {
  const json: Record<string, JsonValue> = {};
  for (const [key, value] of Object.entries(input)) {
    const field = schema.fields.find((f) => f.name === key);
    if (!field || key in pathParams) {
      const meant = suggestFieldName(key, schema.fields.map((f) => f.name).filter((name) => !(name in pathParams)));
      const hint = meant === undefined ? "." : `; did you mean "${meant}"?`;
      throw validationError(key, source === "query" ? `Unknown query parameter "${key}"${hint}` : `Unknown field "${key}"${hint}`);
    }
    json[key] = source === "query" ? fromQueryValue(field, value) : value;
    if (source === "body" && !hasJsonType(field, value)) {
      const number = field.fieldKind === "scalar" && field.scalar === 9 && typeof value === "number" ? value : undefined;
      throw validationError(key, number === undefined ? `"${key}" must be ${describeType(field)}.` : numberForStringMessage(key, number));
    }
    if (isTimestamp(field) && value !== null && (typeof value !== "string" || !isRfc3339(value))) {
      const shaped = typeof value === "string" && rfc3339.test(value);
      throw validationError(key, shaped ? `"${key}" is not a real date and time.` : `"${key}" must be ${describeType(field)}.`);
    }
  }
  Object.assign(json, pathParams);
  try {
    return fromJson(schema, json) as T;
  } catch {
    // Find the field at fault, to name it.
    for (const [key, value] of Object.entries(json)) {
      try {
        fromJson(schema, { [key]: value });
      } catch {
        const field = schema.fields.find((f) => f.name === key) as DescField;
        if (hasLoneSurrogate(value)) throw validationError(key, `"${key}" must be valid Unicode text (it has an unpaired surrogate).`);
        throw validationError(key, `"${key}" must be ${describeType(field)}.`);
      }
    }
    throw validationError("", "The request could not be decoded.");
  }
}

/**
 * The field a client most likely meant by a name we do not know: the same words in another
 * spelling ("merchantReference", "MerchantReference", "merchant-reference" for "merchant_reference").
 */
export function suggestFieldName(name: string, fields: readonly string[]): string | undefined {
  const words = (s: string) => s.replace(/[-_]/g, "").toLowerCase();
  const wanted = words(name);
  return fields.find((f) => f !== name && words(f) === wanted);
}

/** Amounts travel as decimal strings, so a JSON number there is a float that may already have lost digits. */
function isAmountField(name: string): boolean {
  return name === "amount" || name.endsWith("_amount");
}

/** What to say when a string field was sent as a JSON number: the same value in quotes, when it can be written plainly. */
export function numberForStringMessage(key: string, value: number): string {
  const plain = String(value);
  const quoted = /^(0|[1-9][0-9]*)(\.[0-9]+)?$/.test(plain) ? JSON.stringify(plain) : undefined;
  if (isAmountField(key)) {
    return `"${key}" must be a decimal string such as "12.50", not a JSON number${quoted ? `: send ${quoted}` : ""}.`;
  }
  return `"${key}" must be a string, not a JSON number${quoted ? `: send ${quoted}` : ""}.`;
}

function fromQueryValue(field: DescField, value: JsonValue): JsonValue {
  if (field.fieldKind === "scalar" && field.scalar === 8) {
    if (value === "true") return true;
    if (value === "false") return false;
  }
  // Proto JSON would read "0x10" or "1e2" as numbers; a query string integer is plain digits.
  if (field.fieldKind === "scalar" && ![1, 2, 8, 9, 12].includes(field.scalar) && !/^-?[0-9]+$/.test(String(value))) {
    throw validationError(field.name, `"${field.name}" must be ${describeType(field)}.`);
  }
  if (field.fieldKind === "list" || field.fieldKind === "map") {
    throw validationError(field.name, `"${field.name}" cannot be given in the query string.`);
  }
  return value;
}

/**
 * Proto JSON with field names as in the proto, every implicit field present,
 * and unset optional fields as null: a client sees every field, every time.
 * Timestamps always carry milliseconds ("…:01.000Z", as Date#toISOString writes them and
 * as event bodies are delivered), where proto JSON would drop zero fractions ("…:01Z").
 */
export function encodeResponse(schema: DescMessage, message: Message): JsonValue {
  return addNulls(schema, message, toJson(schema, message, { useProtoFieldName: true, alwaysEmitImplicit: true }));
}

/** A timestamp of whole milliseconds as toISOString writes it; finer ones as proto JSON does. */
function withMillis(ts: Timestamp, protoJson: string): string {
  if (ts.nanos % 1_000_000 !== 0) return protoJson;
  return new Date(Number(ts.seconds) * 1000 + ts.nanos / 1_000_000).toISOString();
}

/** A 64-bit integer field whose declared max (its field rules) fits a double exactly: written as a JSON number. */
function fitsJsonNumber(field: DescField): boolean {
  // Read once per field: reading an option decodes it each time, and every event body asks.
  let fits = fitsByField.get(field);
  if (fits === undefined) {
    const max = hasOption(field, fieldRules) ? getOption(field, fieldRules).max : undefined;
    fits = max !== undefined && max <= BigInt(Number.MAX_SAFE_INTEGER);
    fitsByField.set(field, fits);
  }
  return fits;
}
const fitsByField = new WeakMap<DescField, boolean>();

/**
 * The proto JSON of a message with nulls for unset fields, millisecond timestamps and safe 64-bit
 * numbers, as a new object whose keys are in the order the proto declares them, nulls included,
 * so responses read like the docs. (Built anew: putting keys back in order on the same object
 * means deleting them, which leaves it slow to read and to serialise.)
 */
function addNulls(schema: DescMessage, message: Message, json: JsonValue): JsonValue {
  if (typeof json !== "object" || json === null || Array.isArray(json)) return json;
  if (schema.typeName.startsWith("google.protobuf.")) return json;
  const out: { [key: string]: JsonValue } = {};
  for (const field of schema.fields) {
    const value = (message as unknown as Record<string, unknown>)[field.localName];
    const given = json[field.name];
    if (field.fieldKind === "message") {
      if (!isFieldSet(message, field)) out[field.name] = null;
      else if (field.message.typeName === "google.protobuf.Timestamp") out[field.name] = withMillis(value as Timestamp, given as string);
      else if (given !== undefined) out[field.name] = addNulls(field.message, value as Message, given);
    } else if (field.fieldKind === "list" && field.listKind === "message") {
      if (Array.isArray(given)) out[field.name] = (value as Message[]).map((m, i) => addNulls(field.message, m, given[i] as JsonValue));
      else if (given !== undefined) out[field.name] = given;
    } else if (field.fieldKind === "scalar" && field.proto.proto3Optional && !isFieldSet(message, field)) {
      out[field.name] = null;
    } else if (field.fieldKind === "scalar" && typeof value === "bigint" && fitsJsonNumber(field)) {
      out[field.name] = Number(value);
    } else if (given !== undefined) {
      out[field.name] = given;
    }
  }
  return out;
}
