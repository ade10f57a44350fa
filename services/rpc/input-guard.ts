import { getOption, hasOption, type DescField, type DescMessage, type Message } from "@bufbuild/protobuf";
import { reflect, type ReflectMessage } from "@bufbuild/protobuf/reflect";
import type { Interceptor } from "@connectrpc/connect";
import { route as routeOption } from "../../gen/payments/v1/options_pb.ts";
import { apiError, validationError } from "../platform/errors.ts";
import { oneMessage } from "./stream-request.ts";

/**
 * Refuses text no handler can store, once, for every RPC (REST through the gateway and gRPC
 * alike): PostgreSQL rejects the NUL character in text, which would surface as a 500 wherever
 * the value reached a query. A path parameter is an id, and an id with a NUL names nothing:
 * 404 not_found; anywhere else: 400 validation_failed naming the field.
 */
export function createInputGuard(): Interceptor {
  const pathParams = new Map<DescMessage, ReadonlySet<string>>();
  return (next) => async (incoming) => {
    let req = incoming;
    let message: unknown = req.stream ? undefined : req.message;
    // A server stream's one message (oneMessage hands the request on readable again).
    if (req.stream && req.method.methodKind === "server_streaming") ({ req, message } = await oneMessage(req));
    if (message !== undefined) {
      let params = pathParams.get(req.method.input);
      if (!params) {
        params = pathParamsOf(hasOption(req.method, routeOption) ? getOption(req.method, routeOption).path : "");
        pathParams.set(req.method.input, params);
      }
      const bad = findNul(reflect(req.method.input, message as Message), "");
      if (bad !== undefined) {
        if (params.has(bad)) throw apiError("not_found", `No such ${bad.replace(/_/g, " ")}.`, bad);
        throw validationError(bad, `"${bad}" must not contain the NUL character (\\u0000).`);
      }
    }
    return next(req);
  };
}

/** The {names} of a route's path template. */
function pathParamsOf(template: string): ReadonlySet<string> {
  return new Set([...template.matchAll(/\{([a-z_][a-z0-9_]*)\}/g)].map((m) => m[1] as string));
}

const hasNul = (value: unknown): boolean => typeof value === "string" && value.includes("\0");

/**
 * The path of the first field holding a NUL: proto field names joined by ".", list items as
 * "name[i]"; a map is named as a whole (its key may be the bad text itself).
 */
function findNul(message: ReflectMessage, prefix: string): string | undefined {
  for (const field of message.fields) {
    if (!message.isSet(field)) continue;
    const name = prefix + field.name;
    const found = inField(message, field, name);
    if (found !== undefined) return found;
  }
  return undefined;
}

function inField(message: ReflectMessage, field: DescField, name: string): string | undefined {
  switch (field.fieldKind) {
    case "scalar":
      return hasNul(message.get(field)) ? name : undefined;
    case "message":
      return findNul(message.get(field), `${name}.`);
    case "list": {
      let i = 0;
      for (const item of message.get(field)) {
        const at = `${name}[${i++}]`;
        if (field.listKind === "message") {
          const found = findNul(item as ReflectMessage, `${at}.`);
          if (found !== undefined) return found;
        } else if (hasNul(item)) {
          return at;
        }
      }
      return undefined;
    }
    case "map":
      for (const [key, value] of message.get(field)) {
        if (hasNul(key)) return name;
        if (field.mapKind === "message" ? findNul(value as ReflectMessage, `${name}.`) !== undefined : hasNul(value)) return name;
      }
      return undefined;
    default:
      return undefined;
  }
}
