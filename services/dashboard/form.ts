/** A dashboard form's body: application/x-www-form-urlencoded, small, each name's values in order. */
import type http from "node:http";

export type Form = Map<string, string[]>;

/** No dashboard form comes near this. */
const maxFormBytes = 16 * 1024;

export class FormError extends Error {
  status: number;
  constructor(status: number, message: string) {
    super(message);
    this.status = status;
  }
}

export async function readForm(req: http.IncomingMessage): Promise<Form> {
  const type = (req.headers["content-type"] ?? "").split(";")[0]?.trim().toLowerCase();
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > maxFormBytes) throw new FormError(413, "The form is too large.");
    chunks.push(chunk);
  }
  if (type !== "application/x-www-form-urlencoded") throw new FormError(415, "Send the form as application/x-www-form-urlencoded.");
  const form: Form = new Map();
  for (const [name, value] of new URLSearchParams(Buffer.concat(chunks).toString("utf8"))) form.set(name, [...(form.get(name) ?? []), value]);
  return form;
}
