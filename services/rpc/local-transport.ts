import { create, isMessage, type DescMessage, type DescMethod, type DescService } from "@bufbuild/protobuf";
import {
  Code,
  ConnectError,
  createContextValues,
  createHandlerContext,
  type ConnectRouter,
  type ContextValues,
  type Interceptor,
  type StreamRequest,
  type StreamResponse,
  type Transport,
  type UnaryRequest,
  type UnaryResponse,
} from "@connectrpc/connect";
import { replayed } from "./stream-request.ts";

const callCompleted = new Error("the call completed");

type UnaryImpl = (message: unknown, ctx: ReturnType<typeof createHandlerContext>) => unknown;
type AnyNext = (req: UnaryRequest | StreamRequest) => Promise<UnaryResponse | StreamResponse>;

/**
 * A Transport that calls the service implementations in this process directly: the same
 * interceptors and handlers as the RPC server, without encoding the request and response to
 * bytes and back, which Connect's router transport does. The REST gateway uses it when it runs
 * in one process with the rpc role; handlers see the same context (headers, values, deadline).
 */
export function createLocalTransport(register: (router: ConnectRouter) => void, interceptors: readonly Interceptor[]): Transport {
  const impls = new Map<DescMethod, UnaryImpl>();
  // Collects the implementations only: the RPC server's own router checks the registrations.
  const collector: ConnectRouter = {
    handlers: [],
    service(service, implementation) {
      for (const method of service.methods) {
        const fn = (implementation as Record<string, unknown>)[method.localName];
        if (typeof fn === "function") impls.set(method, fn.bind(implementation) as UnaryImpl);
      }
      return collector;
    },
    rpc(method, impl) {
      impls.set(method, impl as UnaryImpl);
      return collector;
    },
  };
  register(collector);
  const chains = new Map<DescMethod, AnyNext>();

  function chainOf(method: DescMethod, service: DescService): AnyNext {
    let chain = chains.get(method);
    if (chain) return chain;
    const impl = impls.get(method);
    const handler: AnyNext = async (req) => {
      if (!impl) throw new ConnectError(`${service.typeName}.${method.name} is not implemented`, Code.Unimplemented);
      const ctx = contexts.get(req.contextValues);
      if (!ctx) throw new ConnectError("local call without its context", Code.Internal);
      const out = method.output as DescMessage;
      if (req.stream) {
        // A server stream: its one request message in, the handler's messages out as they come.
        let input: unknown;
        for await (const m of req.message) input = m;
        const outputs = impl(input, ctx) as AsyncIterable<unknown>;
        return {
          stream: true,
          service,
          method: req.method,
          header: ctx.responseHeader,
          trailer: ctx.responseTrailer,
          message: (async function* () {
            for await (const o of outputs) yield isMessage(o, out) ? o : create(out, o as never);
          })(),
        } as StreamResponse;
      }
      const output = await impl(req.message, ctx);
      return {
        stream: false,
        service,
        method: req.method,
        header: ctx.responseHeader,
        trailer: ctx.responseTrailer,
        message: isMessage(output, out) ? output : create(out, output as never),
      } as UnaryResponse;
    };
    // Interceptors wrap in order: the first one given sees the request first, as on the server.
    chain = interceptors.reduceRight<AnyNext>((next, interceptor) => interceptor(next as never) as AnyNext, handler);
    chains.set(method, chain);
    return chain;
  }
  // By the request's context values, which an interceptor passing on a copy of the request keeps.
  const contexts = new WeakMap<object, ReturnType<typeof createHandlerContext>>();

  /** A call's handler context, as the RPC server would make it. */
  function contextOf(method: DescMethod, signal: AbortSignal | undefined, timeoutMs: number | undefined, header: Headers | Record<string, string> | [string, string][] | undefined, contextValues: ContextValues | undefined) {
    const service = method.parent;
    return createHandlerContext({
      service,
      method,
      protocolName: "local",
      requestMethod: "POST",
      url: `/${service.typeName}/${method.name}`,
      timeoutMs,
      requestSignal: signal,
      requestHeader: header,
      contextValues: contextValues ?? createContextValues(),
    });
  }

  /** What a request carries besides its message, from its context. */
  function requestOf(ctx: ReturnType<typeof createHandlerContext>, method: DescMethod) {
    return { service: method.parent, method: method as never, requestMethod: "POST", url: ctx.url, signal: ctx.signal, header: ctx.requestHeader, contextValues: ctx.values };
  }

  return {
    async unary(method, signal, timeoutMs, header, input, contextValues) {
      const service = method.parent;
      const ctx = contextOf(method, signal, timeoutMs, header, contextValues);
      const req: UnaryRequest = { ...requestOf(ctx, method), stream: false, message: (isMessage(input, method.input) ? input : create(method.input, input)) as never };
      contexts.set(ctx.values, ctx);
      try {
        return (await chainOf(method, service)(req)) as never;
      } catch (err) {
        throw ConnectError.from(err);
      } finally {
        // Ends the deadline timer and anything still bound to the call's signal. With a reason
        // given, no DOMException (and its stack) is made on every call.
        ctx.abort(callCompleted);
      }
    },
    async stream(method, signal, timeoutMs, header, input, contextValues) {
      if (method.methodKind !== "server_streaming") throw new ConnectError("only server-streaming calls are supported in process", Code.Unimplemented);
      const service = method.parent;
      const ctx = contextOf(method, signal, timeoutMs, header, contextValues);
      const messages: unknown[] = [];
      for await (const m of input) messages.push(isMessage(m, method.input) ? m : create(method.input, m as never));
      const req: StreamRequest = { ...requestOf(ctx, method), stream: true, message: replayed(messages) as never };
      contexts.set(ctx.values, ctx);
      let res: StreamResponse;
      try {
        res = (await chainOf(method, service)(req)) as StreamResponse;
      } catch (err) {
        ctx.abort(callCompleted);
        throw ConnectError.from(err);
      }
      const messagesOut = res.message;
      return {
        ...res,
        // The call ends when its stream does (or its reader stops): only then is its context aborted.
        message: (async function* () {
          try {
            yield* messagesOut;
          } catch (err) {
            throw ConnectError.from(err);
          } finally {
            ctx.abort(callCompleted);
          }
        })(),
      } as never;
    },
  };
}
