import { getOption, hasOption, type DescMethodServerStreaming, type DescMethodUnary, type DescService } from "@bufbuild/protobuf";
import { route as routeOption, type Route } from "../gen/payments/v1/options_pb.ts";

/** One REST route, read from an RPC's (payments.v1.route) option. */
export interface RestRoute {
  /** A server-streaming RPC's route answers Server-Sent Events, or a streamed file when its option names a media_type (GET only). */
  rpc: DescMethodUnary | DescMethodServerStreaming;
  option: Route;
  httpMethod: string;
  template: string;
  /** Names of the {params} in the path, each a string field of the request. */
  params: string[];
  pattern: RegExp;
  /** Whether the JSON body maps onto the request (body: "*"). */
  takesBody: boolean;
}

export type RouteMatch =
  | { kind: "found"; route: RestRoute; params: Record<string, string> }
  | { kind: "wrong_method"; allow: string[] }
  | { kind: "not_found" };

/** Builds the route table from the services' descriptors; a malformed option fails at start-up. */
export function buildRoutes(services: readonly DescService[]): RestRoute[] {
  const routes: RestRoute[] = [];
  for (const service of services) {
    for (const rpc of service.methods) {
      if (!hasOption(rpc, routeOption)) continue;
      const option = getOption(rpc, routeOption);
      if (option.method === "") continue;
      const where = `${service.typeName}.${rpc.name}`;
      if (rpc.methodKind !== "unary" && rpc.methodKind !== "server_streaming") throw new Error(`${where}: only unary and server-streaming RPCs can have a REST route`);
      if (rpc.methodKind === "server_streaming" && option.method !== "GET") throw new Error(`${where}: a server-streaming RPC's route is a GET (Server-Sent Events)`);
      if (option.mediaType !== "") {
        // A streamed file: each message's one string field `chunk` is the next piece of the body.
        const [chunk, ...others] = rpc.output.fields;
        if (rpc.methodKind !== "server_streaming") throw new Error(`${where}: only a server-streaming RPC's route can set media_type`);
        if (!/^[a-z]+\/[a-z0-9.+-]+$/.test(option.mediaType) || option.mediaType.endsWith("json") || option.mediaType === "text/event-stream") throw new Error(`${where}: media_type ${option.mediaType} is not a file's media type`);
        if (chunk?.name !== "chunk" || chunk.fieldKind !== "scalar" || chunk.scalar !== 9 /* string */ || others.length > 0) throw new Error(`${where}: a media_type route's response has one field, string chunk`);
        if (!/^[a-z0-9][a-z0-9._-]*$/.test(option.fileName)) throw new Error(`${where}: file_name must be a plain file name`);
      } else if (option.fileName !== "") {
        throw new Error(`${where}: file_name is for a media_type route`);
      }
      if (option.method !== "GET" && option.method !== "POST") {
        throw new Error(`${where}: unsupported REST method ${option.method}`);
      }
      if (option.body !== "" && option.body !== "*") throw new Error(`${where}: body must be "" or "*"`);
      if (option.method === "GET" && option.body !== "") throw new Error(`${where}: GET routes take no body`);
      const params: string[] = [];
      const source = option.path
        .split("/")
        .map((segment) => {
          const param = /^\{([a-z_][a-z0-9_]*)\}$/.exec(segment);
          if (!param) return segment.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
          const name = param[1] as string;
          const field = rpc.input.fields.find((f) => f.name === name);
          if (!field || field.fieldKind !== "scalar" || field.scalar !== 9 /* string */) {
            throw new Error(`${where}: path parameter {${name}} is not a string field of ${rpc.input.typeName}`);
          }
          params.push(name);
          return "([^/]+)";
        })
        .join("/");
      const duplicate = routes.find((r) => r.template === option.path && r.httpMethod === option.method);
      if (duplicate) throw new Error(`${where}: ${option.method} ${option.path} is already routed`);
      routes.push({
        rpc: rpc as DescMethodUnary | DescMethodServerStreaming,
        option,
        httpMethod: option.method,
        template: option.path,
        params,
        pattern: new RegExp(`^${source}$`),
        takesBody: option.body === "*",
      });
    }
  }
  // A literal segment wins over a {param} in its place (…/webhook-events/stream over …/{event_id}),
  // whatever order the proto declares them in: matchRoute tries routes with fewer params first.
  return routes.sort((a, b) => a.params.length - b.params.length);
}

export function matchRoute(routes: readonly RestRoute[], httpMethod: string, path: string): RouteMatch {
  const allow = new Set<string>();
  for (const route of routes) {
    const m = route.pattern.exec(path);
    if (!m) continue;
    if (route.httpMethod !== httpMethod) {
      allow.add(route.httpMethod);
      continue;
    }
    const params: Record<string, string> = {};
    try {
      route.params.forEach((name, i) => (params[name] = decodeURIComponent(m[i + 1] as string)));
    } catch {
      return { kind: "not_found" };
    }
    return { kind: "found", route, params };
  }
  return allow.size > 0 ? { kind: "wrong_method", allow: [...allow].sort() } : { kind: "not_found" };
}

/** RFC 3986 pchar and "/": anything else (a backslash, a space, a raw non-ASCII byte) is never one of our paths. */
const pathChars = /^[A-Za-z0-9\-._~!$&'()*+,;=:@%/]*$/;
/** Bytes whose percent-encoding a canonical path never carries: unreserved ones (RFC 3986 6.2.2.2) and separators. */
const neverEncoded = /^[A-Za-z0-9\-._~/\\]$/;

/**
 * Whether a raw request path (no query) is in the one form our routes answer: origin-form,
 * no empty, "." or ".." segments (encoded or not), no backslash, and nothing percent-encoded
 * that has a plain spelling or acts as a separator. Proxies and URL parsers disagree on how
 * to normalize the rest, so a path that needs normalizing is refused instead of normalized.
 */
export function isCanonicalPath(path: string): boolean {
  if (path === "/") return true;
  if (!path.startsWith("/") || !pathChars.test(path)) return false;
  for (const segment of path.slice(1).split("/")) {
    if (segment === "") return false;
    const escapes = segment.match(/%(.{0,2})/g) ?? [];
    for (const escape of escapes) {
      if (!/^%[0-9A-Fa-f]{2}$/.test(escape)) return false;
      if (neverEncoded.test(String.fromCharCode(parseInt(escape.slice(1), 16)))) return false;
    }
    if (segment === "." || segment === "..") return false;
  }
  return true;
}
