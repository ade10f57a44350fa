import { create, isMessage, type DescMessage, type DescMethod, type DescService } from "@bufbuild/protobuf";
import {
  Code,
  ConnectError,
  createContextValues,
  createHandlerContext,
  type ConnectRouter,
  type Interceptor,
  type Transport,
  type UnaryRequest,
  type UnaryResponse,
} from "@connectrpc/connect";

const callCompleted = new Error("the call completed");

type UnaryImpl = (message: unknown, ctx: ReturnType<typeof createHandlerContext>) => unknown;
type AnyNext = (req: UnaryRequest) => Promise<UnaryResponse>;

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
      const output = await impl(req.message, ctx);
      const out = method.output as DescMessage;
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

  return {
    async unary(method, signal, timeoutMs, header, input, contextValues) {
      const service = method.parent;
      const ctx = createHandlerContext({
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
      const req: UnaryRequest = {
        stream: false,
        service,
        method: method as never,
        requestMethod: "POST",
        url: ctx.url,
        signal: ctx.signal,
        header: ctx.requestHeader,
        contextValues: ctx.values,
        message: (isMessage(input, method.input) ? input : create(method.input, input)) as never,
      };
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
    stream() {
      return Promise.reject(new ConnectError("streaming calls are not supported in process", Code.Unimplemented));
    },
  };
}
