import type { DescMessage, MessageShape } from "@bufbuild/protobuf";
import { Code, ConnectError, type StreamRequest } from "@connectrpc/connect";
import { ErrorDetailSchema } from "../../gen/payments/v1/options_pb.ts";
import { apiError } from "../platform/errors.ts";

/** An async iterable that gives the same messages each time it is read. */
export function replayed<T>(items: readonly T[]): AsyncIterable<T> {
  return {
    async *[Symbol.asyncIterator]() {
      yield* items;
    },
  };
}

/**
 * The one request message of a server-streaming call (the only streaming kind we serve), and the
 * request with it readable again: an interceptor that looks at what was sent reads the stream once
 * and hands the next one a request it can read in turn.
 */
export async function oneMessage<I extends DescMessage, O extends DescMessage>(req: StreamRequest<I, O>): Promise<{ req: StreamRequest<I, O>; message: MessageShape<I> }> {
  if (req.method.methodKind !== "server_streaming") throw apiError("route_not_found", "Only unary and server-streaming calls are supported.");
  const messages: MessageShape<I>[] = [];
  try {
    for await (const message of req.message) {
      messages.push(message);
      if (messages.length > 1) throw apiError("validation_failed", "A server-streaming call takes one request message.");
    }
  } catch (err) {
    // A stream's message is decoded as it is read, here, past the point where a unary call's
    // decoding errors are told apart (documented-errors.ts): the same answers, given here.
    if (err instanceof ConnectError && err.findDetails(ErrorDetailSchema).length > 0) throw err;
    if (err instanceof ConnectError && err.code === Code.ResourceExhausted) throw apiError("payload_too_large", "The request message is too large.");
    throw apiError("validation_failed", `The request is not one well-formed ${req.method.input.typeName} message.`);
  }
  const message = messages[0];
  if (message === undefined) throw apiError("validation_failed", "The call carries no request message.");
  return { req: { ...req, message: replayed(messages) }, message };
}
