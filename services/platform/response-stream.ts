import type http from "node:http";

/**
 * Writing a stream of messages to an HTTP response at its reader's pace: the gateway's Server-Sent
 * Events and files, and the dashboard's export download share it.
 */

/** Waits until `res` takes more (its buffer drained) or is gone. */
export function drained(res: http.ServerResponse): Promise<void> {
  return new Promise<void>((resolve) => {
    const done = () => {
      res.off("drain", done).off("close", done);
      resolve();
    };
    res.on("drain", done).on("close", done);
  });
}

/**
 * Writes `first` (already read: the caller waited for it before its status line) and the rest of
 * `messages`, each as `encode` makes it, asking for the next only once the last is taken; stops
 * early when the client is gone (ending the stream). A failure of the stream is thrown to the caller, which alone
 * knows how to end its response.
 */
export async function writeEach<T>(
  res: http.ServerResponse,
  first: IteratorResult<T>,
  messages: AsyncIterator<T>,
  encode: (message: T) => string,
): Promise<void> {
  for (let next = first; !next.done; next = await messages.next()) {
    if (res.destroyed || res.writableEnded) {
      // The client left: the stream is ended as a for-await's break would, so its source stops.
      await messages.return?.();
      return;
    }
    if (!res.write(encode(next.value))) await drained(res);
  }
}
