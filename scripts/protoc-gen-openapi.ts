// protoc-gen-openapi: writes gen/openapi.json, an OpenAPI 3.1 description of the REST gateway,
// from the same (payments.v1.route) options the gateway builds its route table from.
// buf generate runs it (buf.gen.yaml, strategy "all": one document for every proto file).
import { readFileSync, realpathSync } from "node:fs";
import path from "node:path";
import {
  create,
  createFileRegistry,
  getOption,
  hasOption,
  ScalarType,
  type AnyDesc,
  type DescEnum,
  type DescExtension,
  type DescFile,
  type DescField,
  type DescMessage,
  type FileRegistry,
} from "@bufbuild/protobuf";
import {
  CodeGeneratorResponse_Feature,
  CodeGeneratorResponseSchema,
  FileDescriptorSetSchema,
  type CodeGeneratorRequest,
} from "@bufbuild/protobuf/wkt";
import { getComments, runNodeJs, type Plugin } from "@bufbuild/protoplugin";
import { idempotencyKeyPattern } from "../services/idempotency/key.ts";
import { errorTable } from "../services/platform/error-codes.ts";
import { maxAmountLength } from "../services/vocabulary/amount.ts";
import { assets } from "../services/vocabulary/assets.ts";
import { amountPattern, httpsUrlPattern, timestampPattern } from "../services/vocabulary/formats.ts";
import { valueSets } from "../services/vocabulary/value-sets.ts";
import { findCurrency } from "../services/vocabulary/currencies.ts";

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
type Schema = { [key: string]: Json };

const root = path.resolve(import.meta.dirname, "..");
const outputName = "openapi.json";

/** The (payments.v1.route) option as read through the request's own descriptors (gen/ may be cleaned away while this runs). */
interface RouteOption {
  method: string;
  path: string;
  body: string;
  scope: string;
  idempotencyKeyRequired: boolean;
  credential: number;
  rateLimited: boolean;
  liveScope?: string;
  /** A server stream answered as a file of this media type (gateway/server.ts sendFile); "" for Server-Sent Events. */
  mediaType: string;
  fileName: string;
  /** A GET the object's state can refuse with 409. */
  stateDependent?: boolean;
}

/** The (payments.v1.field) rules as read through the request's own descriptors (services/rpc/field-rules.ts enforces them). */
interface FieldRules {
  minLen?: number;
  maxLen?: number;
  min?: bigint;
  max?: bigint;
  oneOf: string;
  amount: number;
  maxPairs?: number;
  keyMinLen?: number;
  keyMaxLen?: number;
  valueMaxLen?: number;
  httpsUrl: boolean;
  maxItems?: number;
  minItems?: number;
  exclusiveGroup: string;
  requires: string[];
}

/** AmountRule's values (options.proto). */
const amountRule = { unspecified: 0, requested: 1, observed: 2, price: 3 } as const;

/** The documented error codes and their statuses, from the error table (a module with no imports: gen/ may be cleaned away while this runs). */
export function readErrorCodes(): Map<string, number> {
  return new Map(Object.entries(errorTable).map(([code, e]) => [code, e.status]));
}

function comment(desc: Exclude<AnyDesc, DescFile>): string | undefined {
  const text = getComments(desc).leading?.trim();
  if (!text) return undefined;
  // Proto comments wrap at ~100 columns; a description reads as one paragraph per blank line.
  return text
    .split(/\n\s*\n/)
    .map((p) => p.split("\n").map((l) => l.trim()).join(" "))
    .join("\n\n");
}

function withDescription(schema: Schema, description: string | undefined): Schema {
  return description ? { ...schema, description } : schema;
}

const int64Types = new Set([ScalarType.INT64, ScalarType.UINT64, ScalarType.SINT64, ScalarType.FIXED64, ScalarType.SFIXED64]);
const unsignedTypes = new Set([ScalarType.UINT32, ScalarType.FIXED32, ScalarType.UINT64, ScalarType.FIXED64]);

type Direction = "response" | "request";

/**
 * JSON Schemas of messages as the gateway encodes them (services/platform/api-json.ts encodeResponse:
 * proto field names, every field present, unset optional fields and unset messages null, 64-bit
 * integers as strings, enums by name, timestamps RFC 3339 with milliseconds) and decodes them.
 */
class Schemas {
  readonly components = new Map<string, Schema>();
  private readonly names = new Map<string, string>();

  private readonly registry: FileRegistry;
  private readonly rulesExt: DescExtension;

  constructor(registry: FileRegistry) {
    this.registry = registry;
    const ext = registry.getExtension("payments.v1.field");
    if (!ext) throw new Error("payments.v1.field is not among the request's files");
    this.rulesExt = ext;
  }

  rules(field: DescField): FieldRules | undefined {
    return hasOption(field, this.rulesExt) ? (getOption(field, this.rulesExt) as unknown as FieldRules) : undefined;
  }

  private componentName(message: DescMessage, suffix = ""): string {
    const name = message.name + suffix;
    const owner = this.names.get(name);
    if (owner !== undefined && owner !== message.typeName + suffix) throw new Error(`two messages named ${name}: ${owner} and ${message.typeName}`);
    this.names.set(name, message.typeName + suffix);
    return name;
  }

  /** A $ref to the response-side schema of a message, adding it to the components once. */
  ref(message: DescMessage): Schema {
    const name = this.componentName(message);
    if (!this.components.has(name)) {
      this.components.set(name, {}); // placeholder: a message may refer to itself
      this.components.set(name, this.responseObject(message));
    }
    return { $ref: `#/components/schemas/${name}` };
  }

  private responseObject(message: DescMessage, nonNullData = false): Schema {
    const properties: Record<string, Json> = {};
    for (const field of message.fields) {
      let schema = this.field(field, "response");
      // The data of a response envelope is always set; null would mean a bug.
      if (nonNullData && field.name === "data" && field.fieldKind === "message") schema = this.ref(field.message);
      properties[field.name] = withDescription(schema, comment(field));
    }
    return withDescription(
      { type: "object", properties, required: message.fields.map((f) => f.name), additionalProperties: false },
      comment(message),
    );
  }

  /** A response message (the data envelope): its `data` is never null. */
  responseEnvelope(message: DescMessage): Schema {
    const name = this.componentName(message);
    if (!this.components.has(name)) this.components.set(name, this.responseObject(message, true));
    return { $ref: `#/components/schemas/${name}` };
  }

  /** The JSON body of a body:"*" route: the request's fields but the path's. */
  requestBody(message: DescMessage, pathParams: readonly string[]): Schema {
    const name = this.componentName(message);
    if (this.components.has(name)) throw new Error(`${message.typeName} is used as a request body and elsewhere`);
    const fields = message.fields.filter((f) => !pathParams.includes(f.name));
    const properties: Record<string, Json> = {};
    for (const field of fields) properties[field.name] = withDescription(this.field(field, "request"), comment(field));
    const dependent = this.dependentRules(fields);
    this.components.set(
      name,
      withDescription(
        {
          type: "object",
          properties,
          // A list with min_items is required too: sent empty, it is refused as not sent.
          required: fields.filter((f) => isRequired(f) || (f.fieldKind === "list" && (this.rules(f)?.minItems ?? 0) > 0)).map((f) => f.name),
          additionalProperties: false,
          ...(dependent.length > 0 ? { allOf: dependent } : {}),
        },
        comment(message),
      ),
    );
    return { $ref: `#/components/schemas/${name}` };
  }

  field(field: DescField, direction: Direction): Schema {
    const max = this.rules(field)?.max;
    if (direction === "response" && field.fieldKind === "scalar" && int64Types.has(field.scalar) && max !== undefined && max <= BigInt(Number.MAX_SAFE_INTEGER)) {
      // The gateway writes it as a JSON number: its declared range fits a double exactly.
      const schema: Schema = { type: "integer", ...(unsignedTypes.has(field.scalar) ? { minimum: 0 } : {}), maximum: Number(max) };
      return field.proto.proto3Optional ? nullable(schema) : schema;
    }
    const schema = this.plainField(field, direction);
    const rules = direction === "request" ? this.rules(field) : undefined;
    return rules ? withRules(schema, rules, field) : schema;
  }

  private plainField(field: DescField, direction: Direction): Schema {
    switch (field.fieldKind) {
      case "scalar": {
        const schema = this.scalar(field.scalar, direction);
        return direction === "response" && field.proto.proto3Optional ? nullable(schema) : schema;
      }
      case "enum": {
        const schema = this.enumSchema(field.enum);
        return direction === "response" && field.proto.proto3Optional ? nullable(schema) : schema;
      }
      case "message": {
        const schema = this.message(field.message, direction);
        return direction === "response" ? nullable(schema) : schema;
      }
      case "list": {
        const items =
          field.listKind === "scalar"
            ? this.scalar(field.scalar, direction)
            : field.listKind === "enum"
              ? this.enumSchema(field.enum)
              : this.message(field.message, direction);
        return { type: "array", items };
      }
      case "map": {
        const values =
          field.mapKind === "scalar"
            ? this.scalar(field.scalar, direction)
            : field.mapKind === "enum"
              ? this.enumSchema(field.enum)
              : this.message(field.message, direction);
        return { type: "object", additionalProperties: values };
      }
    }
  }

  /**
   * Rules that depend on another field of the same body, as if/then pairs: the assets of the
   * request's network, and an amount's decimal places by the request's asset.
   */
  private dependentRules(fields: readonly DescField[]): Json[] {
    const bySet = (set: string) => fields.find((f) => this.rules(f)?.oneOf === set);
    const out: Json[] = [];
    for (const field of fields) {
      const rules = this.rules(field);
      const dependsOn = rules?.oneOf ? valueSets[rules.oneOf]?.dependsOn : undefined;
      const given = dependsOn ? bySet(dependsOn.set) : undefined;
      if (dependsOn && given) {
        for (const value of valueSets[dependsOn.set]?.values ?? []) {
          out.push({
            if: { properties: { [given.name]: { const: value } }, required: [given.name] },
            then: { properties: { [field.name]: { type: "string", enum: [...dependsOn.valuesFor(value)] } } },
          });
        }
      }
    }
    // Exactly one field of each exclusive group; a field's companions come with it.
    const groups = new Map<string, string[]>();
    for (const field of fields) {
      const rules = this.rules(field);
      if (rules?.exclusiveGroup) groups.set(rules.exclusiveGroup, [...(groups.get(rules.exclusiveGroup) ?? []), field.name]);
      for (const other of rules?.requires ?? []) out.push({ if: { properties: { [field.name]: {} }, required: [field.name] }, then: { properties: { [other]: {} }, required: [other] } });
    }
    for (const names of groups.values()) out.push({ oneOf: names.map((name) => ({ properties: { [name]: {} }, required: [name] })) });
    // A price's places are its currency's.
    const currency = bySet("currency");
    for (const field of fields) {
      if (this.rules(field)?.amount !== amountRule.price || !currency) continue;
      for (const c of valueSets.currency?.values ?? []) {
        const decimals = findCurrency(c)?.decimals;
        out.push({
          if: { properties: { [currency.name]: { const: c } }, required: [currency.name] },
          then: { properties: { [field.name]: { type: "string", pattern: amountPattern(true, decimals) } } },
        });
      }
    }
    const network = bySet("network");
    const asset = bySet("asset");
    for (const field of fields) {
      const rule = this.rules(field)?.amount ?? amountRule.unspecified;
      if (rule === amountRule.unspecified || rule === amountRule.price || !network || !asset) continue;
      for (const a of assets) {
        out.push({
          if: { properties: { [network.name]: { const: a.network }, [asset.name]: { const: a.asset } }, required: [network.name, asset.name] },
          then: { properties: { [field.name]: { type: "string", pattern: amountPattern(rule === amountRule.requested, a.decimals) } } },
        });
      }
    }
    return out;
  }

  private scalar(scalar: ScalarType, direction: Direction): Schema {
    switch (scalar) {
      case ScalarType.STRING:
        return { type: "string" };
      case ScalarType.BOOL:
        return { type: "boolean" };
      case ScalarType.BYTES:
        return { type: "string", contentEncoding: "base64" };
      case ScalarType.DOUBLE:
      case ScalarType.FLOAT:
        return { type: "number" };
      default: {
        const unsigned = unsignedTypes.has(scalar);
        if (int64Types.has(scalar)) {
          // Proto JSON writes 64-bit integers as strings; the gateway reads a JSON body's as numbers.
          return direction === "response"
            ? { type: "string", pattern: unsigned ? "^[0-9]+$" : "^-?[0-9]+$" }
            : { type: "integer", ...(unsigned ? { minimum: 0 } : {}), format: "int64" };
        }
        return unsigned ? { type: "integer", minimum: 0, maximum: 4294967295 } : { type: "integer", format: "int32" };
      }
    }
  }

  private enumSchema(desc: DescEnum): Schema {
    return withDescription({ type: "string", enum: desc.values.map((v) => v.name) }, comment(desc));
  }

  private message(message: DescMessage, direction: Direction): Schema {
    switch (message.typeName) {
      case "google.protobuf.Timestamp":
        return direction === "request" ? { type: "string", format: "date-time", pattern: timestampPattern } : { type: "string", format: "date-time" };
      case "google.protobuf.Duration":
        return { type: "string", pattern: "^-?[0-9]+(\\.[0-9]+)?s$" };
      case "google.protobuf.Struct":
        return { type: "object" };
      case "google.protobuf.Value":
        return {};
      case "google.protobuf.ListValue":
        return { type: "array" };
      case "google.protobuf.Empty":
        return { type: "object", additionalProperties: false };
    }
    if (message.typeName.startsWith("google.protobuf.")) throw new Error(`${message.typeName} has no JSON Schema here yet`);
    if (direction === "request") throw new Error(`${message.typeName}: nested messages in requests have no JSON Schema here yet`);
    return this.ref(message);
  }

  enumName(typeName: string, value: number): string {
    const desc = this.registry.getEnum(typeName);
    const found = desc?.values.find((v) => v.number === value);
    if (!found) throw new Error(`${typeName} has no value ${value}`);
    return found.name;
  }
}

/** A field's schema with its (payments.v1.field) rules, as services/rpc/field-rules.ts checks them. */
function withRules(schema: Schema, rules: FieldRules, field: DescField): Schema {
  const out: Schema = { ...schema };
  if (rules.minLen !== undefined) out.minLength = rules.minLen;
  if (rules.maxLen !== undefined) out.maxLength = rules.maxLen;
  if (rules.min !== undefined) out.minimum = Number(rules.min);
  if (rules.max !== undefined) out.maximum = Number(rules.max);
  if (rules.oneOf !== "") {
    const set = valueSets[rules.oneOf];
    if (!set) throw new Error(`${field.parent.typeName}.${field.name}: no value set "${rules.oneOf}"`);
    if (field.fieldKind === "list") out.items = { ...(out.items as Schema), enum: [...set.values] };
    else out.enum = [...set.values];
  }
  if (rules.maxItems !== undefined) out.maxItems = rules.maxItems;
  if (rules.minItems !== undefined) out.minItems = rules.minItems;
  if (rules.amount !== amountRule.unspecified) {
    out.pattern = amountPattern(rules.amount !== amountRule.observed);
    out.maxLength = Math.min(maxAmountLength, rules.maxLen ?? maxAmountLength);
  }
  if (rules.httpsUrl) {
    out.format = "uri";
    out.pattern = httpsUrlPattern;
  }
  if (field.fieldKind === "map") {
    if (rules.maxPairs !== undefined) out.maxProperties = rules.maxPairs;
    const names: Schema = {};
    if (rules.keyMinLen !== undefined) names.minLength = rules.keyMinLen;
    if (rules.keyMaxLen !== undefined) names.maxLength = rules.keyMaxLen;
    if (Object.keys(names).length > 0) out.propertyNames = names;
    if (rules.valueMaxLen !== undefined) out.additionalProperties = { ...(out.additionalProperties as Schema), maxLength: rules.valueMaxLen };
  }
  return out;
}

/** A proto3 field without `optional` that a client must send (lists, maps and messages may be left out). */
function isRequired(field: DescField): boolean {
  return (field.fieldKind === "scalar" || field.fieldKind === "enum") && !field.proto.proto3Optional;
}

function nullable(schema: Schema): Schema {
  if (typeof schema.type === "string" && schema.enum === undefined) return { ...schema, type: [schema.type, "null"] };
  return { anyOf: [schema, { type: "null" }] };
}

/** How each credential kind authenticates: the bearer token's form, and the security scheme named after it. */
const credentials: Record<string, { scheme: string; description: string } | null> = {
  CREDENTIAL_UNSPECIFIED: {
    scheme: "merchantApiKey",
    description: "A merchant API key, `Authorization: Bearer sk_test_…` or `sk_live_…`; the key decides the merchant and the environment.",
  },
  CREDENTIAL_TEST_API_KEY: null, // the same scheme: a Test key
  CREDENTIAL_SITE_GATEWAY: {
    scheme: "siteCredential",
    description: "A Site Gateway credential, `Authorization: Bearer site_test_…` or `site_live_…`; browsers may call its routes from the credential's allowed origins (CORS).",
  },
  CREDENTIAL_CASHIER_SESSION: {
    scheme: "cashierSession",
    description: "A point-of-sale cashier session, `Authorization: Bearer pos_test_…` or `pos_live_…`; it expires.",
  },
  CREDENTIAL_PUBLIC: null,
  CREDENTIAL_INTERNAL: null,
};

function schemeOf(credential: string): string | undefined {
  if (credential === "CREDENTIAL_TEST_API_KEY") return "merchantApiKey";
  return credentials[credential]?.scheme;
}

function credentialText(credential: string, scope: string): string {
  const scopeText = scope ? ` with the scope \`${scope}\`` : "";
  switch (credential) {
    case "CREDENTIAL_UNSPECIFIED":
      return `Credential: a merchant API key (Test or Live)${scopeText}.`;
    case "CREDENTIAL_TEST_API_KEY":
      return `Credential: a merchant API key of the Test environment only${scopeText} (a Live key: 403 test_mode_only).`;
    case "CREDENTIAL_SITE_GATEWAY":
      return `Credential: a Site Gateway credential${scopeText}.`;
    case "CREDENTIAL_CASHIER_SESSION":
      return `Credential: a cashier session${scopeText}.`;
    case "CREDENTIAL_PUBLIC":
      return "Credential: none (public).";
    default:
      throw new Error(`${credential} has no REST routes`);
  }
}

const statusNames: Record<number, string> = {
  400: "BadRequest",
  401: "Unauthorized",
  403: "Forbidden",
  404: "NotFound",
  409: "Conflict",
  413: "PayloadTooLarge",
  415: "UnsupportedMediaType",
  429: "TooManyRequests",
  500: "InternalError",
  503: "Unavailable",
};

const statusTexts: Record<number, string> = {
  400: "The request is not valid.",
  401: "No credential, or not an active one of the kind the route takes.",
  403: "The credential may not call this route.",
  404: "No such object for this credential (another merchant's or environment's objects included), or no such route.",
  409: "The request conflicts with the object's state, with an earlier request under the same Idempotency-Key, or with the server's set-up (a Live create with no deposit-address source for the network, or on a network no watcher follows: network_not_watched); nothing was recorded.",
  413: "The request body is over the size limit (BODY_LIMIT_BYTES).",
  415: "The body is not `application/json` (charset utf-8 at most), or has a Content-Encoding other than identity.",
  429: "Too many requests from this client address; retry after Retry-After seconds.",
  500: "An internal error; its message has no internals.",
  503: "The service cannot reach the database (or the rpc role) now, or (rate_unavailable) a fiat-priced create found too few fresh, agreeing exchange rates and recorded nothing; retry after Retry-After seconds, with the same Idempotency-Key for a create.",
};

function buildDocument(request: CodeGeneratorRequest): Json {
  const registry = createFileRegistry(create(FileDescriptorSetSchema, { file: request.protoFile }));
  const ext = registry.getExtension("payments.v1.route") as DescExtension | undefined;
  if (!ext) throw new Error("payments.v1.route is not among the request's files");
  const schemas = new Schemas(registry);
  const errorCodes = readErrorCodes();
  const codesOf = (status: number) => [...errorCodes].filter(([, s]) => s === status).map(([code]) => code);

  const paths: Record<string, Record<string, Json>> = {};
  const usedSchemes = new Set<string>();
  const usedStatuses = new Set<number>();
  const tags: { name: string; description?: string }[] = [];

  // Only the files given to generate: their imports (options.proto, the WKTs) declare no routes.
  const files = request.fileToGenerate.map((name) => registry.getFile(name)).filter((f) => f !== undefined);
  for (const file of files) {
    for (const service of file.services) {
      let tagged = false;
      for (const rpc of service.methods) {
        if (!hasOption(rpc, ext)) continue;
        const option = getOption(rpc, ext) as unknown as RouteOption;
        if (option.method === "") continue;
        const where = `${service.typeName}.${rpc.name}`;
        if (option.method !== "GET" && option.method !== "POST") throw new Error(`${where}: unsupported REST method ${option.method}`);
        if (!tagged) {
          const description = comment(service);
          tags.push({ name: service.name, ...(description ? { description } : {}) });
          tagged = true;
        }
        const credential = schemas.enumName("payments.v1.Credential", option.credential);
        const pathParams = [...option.path.matchAll(/\{([a-z_][a-z0-9_]*)\}/g)].map((m) => m[1] as string);
        const parameters: Json[] = [];
        for (const name of pathParams) {
          const field = rpc.input.fields.find((f) => f.name === name);
          if (!field) throw new Error(`${where}: path parameter {${name}} is not a field of ${rpc.input.typeName}`);
          parameters.push({ name, in: "path", required: true, schema: { type: "string" }, ...(comment(field) ? { description: comment(field) } : {}) });
        }
        if (option.method === "GET") {
          for (const field of rpc.input.fields) {
            if (pathParams.includes(field.name)) continue;
            if (field.fieldKind === "list" || field.fieldKind === "map") throw new Error(`${where}: ${field.name} cannot be a query parameter`);
            parameters.push({
              name: field.name,
              in: "query",
              required: isRequired(field),
              schema: schemas.field(field, "request"),
              ...(comment(field) ? { description: comment(field) } : {}),
            });
          }
        }
        if (option.idempotencyKeyRequired) parameters.push({ $ref: "#/components/parameters/IdempotencyKey" });

        const scheme = schemeOf(credential);
        if (scheme) usedSchemes.add(scheme);
        const statuses = [400, 404, 415, 500, 503];
        if (credential !== "CREDENTIAL_PUBLIC") statuses.push(401);
        if (credential === "CREDENTIAL_UNSPECIFIED" || credential === "CREDENTIAL_TEST_API_KEY") statuses.push(403);
        if (option.method === "POST") statuses.push(409, 413);
        else if (option.stateDependent) statuses.push(409);
        if (option.rateLimited) statuses.push(429);
        statuses.sort((a, b) => a - b);

        const successHeaders: Record<string, Json> = { "X-Request-Id": { $ref: "#/components/headers/XRequestId" } };
        if (option.idempotencyKeyRequired) successHeaders["Idempotent-Replayed"] = { $ref: "#/components/headers/IdempotentReplayed" };
        // A server-streaming RPC answers Server-Sent Events: each `data:` line one message's JSON.
        const streaming = rpc.methodKind === "server_streaming";
        const responses: Record<string, Json> = {
          "200": streaming && option.mediaType !== ""
            ? {
                // A streamed file (route option media_type): the messages' `chunk`s, one after another.
                description: `Success: a streamed ${option.mediaType} file (attachment "${option.fileName}"). A failure after the first bytes aborts the response (no last chunk of its chunked encoding), so a cut-off file is never taken for a whole one.`,
                headers: successHeaders,
                content: { [option.mediaType]: { schema: { type: "string" } } },
              }
            : streaming
            ? {
                description: "Success: a stream of Server-Sent Events, each `data:` line one JSON message of this schema, until the client disconnects.",
                headers: successHeaders,
                content: { "text/event-stream": { schema: schemas.responseEnvelope(rpc.output) } },
              }
            : {
                description: "Success: the data envelope.",
                headers: successHeaders,
                content: { "application/json": { schema: schemas.responseEnvelope(rpc.output) } },
              },
        };
        for (const status of statuses) {
          if (codesOf(status).length === 0) throw new Error(`errorCodes has no code for status ${status}`);
          usedStatuses.add(status);
          responses[String(status)] = { $ref: `#/components/responses/${statusNames[status]}` };
        }

        const notes = [credentialText(credential, option.scope)];
        if (option.liveScope) notes.push(`A Live key also needs the scope \`${option.liveScope}\`.`);
        if (option.idempotencyKeyRequired) notes.push("Requires an `Idempotency-Key` header; the same key and body replay the first response (`Idempotent-Replayed: true`).");
        if (option.rateLimited) notes.push(`${limitText(credential, option.method)}; over it: 429 rate_limited with Retry-After.`);
        const operation: Record<string, Json> = {
          operationId: rpc.name,
          tags: [service.name],
          summary: (comment(rpc) ?? rpc.name).split(/(?<=\.)\s/)[0] as string,
          description: [comment(rpc), ...notes].filter((x) => x).join("\n\n"),
          "x-credential": credential === "CREDENTIAL_UNSPECIFIED" ? "api_key" : credential.replace(/^CREDENTIAL_/, "").toLowerCase(),
          ...(option.scope ? { "x-scope": option.scope } : {}),
          ...(option.rateLimited ? { "x-rate-limited": true } : {}),
          "x-rpc": `${service.typeName}/${rpc.name}`,
          security: scheme ? [{ [scheme]: option.scope ? [option.scope] : [] }] : [],
          ...(parameters.length > 0 ? { parameters } : {}),
        };
        if (option.body === "*") {
          operation.requestBody = {
            required: true,
            content: { "application/json": { schema: schemas.requestBody(rpc.input, pathParams) } },
          };
        }
        operation.responses = responses;
        const item = (paths[option.path] ??= {});
        const method = option.method.toLowerCase();
        if (item[method]) throw new Error(`${where}: ${option.method} ${option.path} is already routed`);
        item[method] = operation;
      }
    }
  }

  const allCodes = [...errorCodes.keys()];
  const responses: Record<string, Json> = {};
  for (const status of [...usedStatuses].sort((a, b) => a - b)) {
    const codes = codesOf(status);
    const headers: Record<string, Json> = { "X-Request-Id": { $ref: "#/components/headers/XRequestId" } };
    if (status === 429 || status === 503) headers["Retry-After"] = { $ref: "#/components/headers/RetryAfter" };
    responses[statusNames[status] as string] = {
      description: `${statusTexts[status]} Codes: ${codes.join(", ")}.`,
      headers,
      content: {
        "application/json": {
          schema: {
            allOf: [{ $ref: "#/components/schemas/Error" }, { type: "object", properties: { error: { type: "object", properties: { code: { enum: codes } } } } }],
          },
        },
      },
    };
  }

  const securitySchemes: Record<string, Json> = {};
  for (const entry of Object.values(credentials)) {
    if (entry && usedSchemes.has(entry.scheme)) securitySchemes[entry.scheme] = { type: "http", scheme: "bearer", description: entry.description };
  }

  const componentSchemas: Record<string, Json> = {
    Error: {
      type: "object",
      description: "The error envelope of every failure. Over gRPC/Connect the same code and param travel as a payments.v1.ErrorDetail.",
      properties: {
        error: {
          type: "object",
          properties: {
            code: { type: "string", enum: allCodes, description: "Stable, documented error code." },
            message: { type: "string", description: "What went wrong, safe to show; never a secret." },
            param: { type: "string", description: "The request field the error is about, when there is one." },
            request_id: { type: "string", description: "The request's id, as in the X-Request-Id header." },
          },
          required: ["code", "message", "request_id"],
          additionalProperties: false,
        },
      },
      required: ["error"],
      additionalProperties: false,
    },
  };
  for (const name of [...schemas.components.keys()].sort()) componentSchemas[name] = schemas.components.get(name) as Schema;

  const pkg = JSON.parse(readFileSync(path.join(root, "package.json"), "utf8")) as { version: string; description: string };
  return {
    openapi: "3.1.0",
    jsonSchemaDialect: "https://spec.openapis.org/oas/3.1/dialect/base",
    info: {
      title: pkg.description,
      version: pkg.version,
      description: [
        "Generated by scripts/protoc-gen-openapi.ts from the (payments.v1.route) options in proto/: the same options the REST gateway builds its routes from. Do not edit; run `npx buf generate`.",
        'Success: `{"data": ...}`; lists: `{"data": [...], "has_more": bool, "next_cursor": string|null}`. Failure: `{"error": {"code", "message", "param"?, "request_id"}}`. Every response carries X-Request-Id.',
        "Every field of a response is present: unset optional fields are null, lists []. Timestamps are RFC 3339 UTC with milliseconds; 64-bit integers are strings; amounts are decimal strings.",
        "Also on every route: HEAD on a GET route answers like GET without a body; another method on a route's path is 405 method_not_allowed with Allow; a path that is not canonical is 404 route_not_found; headers over 16 KiB are 431 payload_too_large.",
      ].join("\n\n"),
    },
    servers: [{ url: "http://127.0.0.1:8080", description: "A local server (PORT 8080)." }],
    tags: tags as unknown as Json,
    paths: paths as unknown as Json,
    components: {
      schemas: componentSchemas,
      responses,
      parameters: {
        IdempotencyKey: {
          name: "Idempotency-Key",
          in: "header",
          required: true,
          description: "8 to 128 characters from A-Z a-z 0-9 . _ : - (surrounding whitespace is trimmed). Scoped by merchant and environment; results are kept 24 h.",
          schema: { type: "string", pattern: idempotencyKeyPattern },
        },
      },
      headers: {
        XRequestId: { description: "The request's id (also in an error's request_id).", schema: { type: "string" }, required: true },
        IdempotentReplayed: { description: '"true" when the response is the replay of an earlier request with the same Idempotency-Key.', schema: { type: "string", enum: ["true"] } },
        RetryAfter: { description: "Seconds to wait before retrying.", schema: { type: "string", pattern: "^[0-9]+$" } },
      },
      securitySchemes,
    },
  };
}

export const plugin: Plugin = {
  name: "protoc-gen-openapi",
  version: "v1",
  run(request) {
    const document = buildDocument(request);
    return create(CodeGeneratorResponseSchema, {
      supportedFeatures: BigInt(CodeGeneratorResponse_Feature.PROTO3_OPTIONAL),
      file: [{ name: outputName, content: `${JSON.stringify(document, null, 2)}\n` }],
    });
  },
};

// Run by buf as a program; imported (by the tests) as a module.
if (process.argv[1] !== undefined && realpathSync(process.argv[1]) === import.meta.filename) runNodeJs(plugin);

/** Whom a rate-limited route's calls count against (services/rpc/interceptor.ts, limitOf). */
function limitText(credential: string, method: string): string {
  switch (credential) {
    case "CREDENTIAL_PUBLIC":
      return "Limited per client address (PUBLIC_RATE_LIMIT_PER_MINUTE)";
    case "CREDENTIAL_SITE_GATEWAY":
      return method === "GET" ? "Limited per site credential and client address (SITE_READ_RATE_LIMIT_PER_MINUTE)" : "Limited per site credential (SITE_RATE_LIMIT_PER_MINUTE)";
    case "CREDENTIAL_UNSPECIFIED":
    case "CREDENTIAL_TEST_API_KEY":
      return method === "GET" ? "Reads are limited per API key (API_READ_RATE_LIMIT per API_RATE_LIMIT_SECONDS, default 100 a second)" : "Writes are limited per API key (API_WRITE_RATE_LIMIT per API_RATE_LIMIT_SECONDS, default 100 a second)";
    default:
      return "Limited per credential";
  }
}
