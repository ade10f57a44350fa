/**
 * The body of `res` as text, read as a stream and given up (the body cancelled, which closes the
 * connection) as soon as it is longer than `maxBytes`: a server answering without end costs at
 * most the cap. A Content-Length over the cap is refused before a byte is read. Past the cap the
 * error `tooLarge()` makes is thrown (each caller names its own setting and peer in it).
 *
 * The bytes counted are those the body yields, after any content decoding: a small compressed
 * answer that inflates past the cap is cut like any other.
 */
export async function readCappedText(res: Response, maxBytes: number, tooLarge: () => Error): Promise<string> {
  const declared = Number(res.headers.get("content-length") ?? Number.NaN);
  if (declared > maxBytes) {
    await res.body?.cancel().catch(() => {});
    throw tooLarge();
  }
  if (!res.body) return "";
  const reader = res.body.getReader();
  const chunks: Uint8Array[] = [];
  let length = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    length += value.byteLength;
    if (length > maxBytes) {
      await reader.cancel().catch(() => {});
      throw tooLarge();
    }
    chunks.push(value);
  }
  return Buffer.concat(chunks, length).toString("utf8");
}
