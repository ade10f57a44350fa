import { create, toBinary, type DescEnum, type DescExtension, type DescFile, type DescMessage, type DescService } from "@bufbuild/protobuf";
import { FileDescriptorProtoSchema } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError, type ConnectRouter, type Interceptor } from "@connectrpc/connect";
import * as v1 from "../../gen/grpc/reflection/v1/reflection_pb.ts";
import * as v1alpha from "../../gen/grpc/reflection/v1alpha/reflection_pb.ts";
import type { Database } from "../platform/db.ts";

/** GRPC_REFLECTION; "auto" (unset) serves reflection while the installation is Test only. */
export type ReflectionSetting = "on" | "off" | "auto";

/** Whether reflection answers now: undefined when it does, else the reason it does not. */
export type ReflectionGate = () => Promise<string | undefined>;

/** The reflection services, both versions: grpcurl and older clients still ask v1alpha. */
export const reflectionServices: readonly DescService[] = [v1.ServerReflection, v1alpha.ServerReflection];

export function reflectionGate(setting: ReflectionSetting, db: Database): ReflectionGate {
  if (setting === "on") return async () => undefined;
  if (setting === "off") return async () => "Server reflection is off (GRPC_REFLECTION=off).";
  // The schema names every internal method: an installation taking real payments shows it only
  // when its operator says so. Asked per stream, so creating the first Live key turns it off at once.
  return async () => {
    const rows = await db.em.fork().execute<{ live: boolean }[]>(
      `select exists (select 1 from api_keys where environment = 'live' and revoked_at is null) as live`,
    );
    return rows[0]?.live ? "Server reflection is off: this installation has Live API keys (set GRPC_REFLECTION=on to serve it)." : undefined;
  };
}

/** Registers both reflection services, describing `services` (and themselves) from the generated descriptors. */
export function addReflection(router: ConnectRouter, services: readonly DescService[], gate: ReflectionGate, interceptors: Interceptor[]): void {
  const index = new DescriptorIndex([...services, ...reflectionServices]);
  // The per-service interceptors replace the router's: reflection takes no credential and streams,
  // which the payments interceptor refuses.
  router.service(v1.ServerReflection, { serverReflectionInfo: (requests) => serve(requests, index, gate, v1) }, { interceptors });
  router.service(v1alpha.ServerReflection, { serverReflectionInfo: (requests) => serve(requests, index, gate, v1alpha) }, { interceptors });
}

type Version = typeof v1 | typeof v1alpha;
type Request = v1.ServerReflectionRequest | v1alpha.ServerReflectionRequest;
/** v1 and v1alpha messages differ only in their package: built once, created in either. */
type Answer = NonNullable<Parameters<typeof create<typeof v1.ServerReflectionResponseSchema>>[1]>["messageResponse"];

async function* serve<V extends Version>(
  requests: AsyncIterable<Request>,
  index: DescriptorIndex,
  gate: ReflectionGate,
  version: V,
): AsyncIterable<V extends typeof v1 ? v1.ServerReflectionResponse : v1alpha.ServerReflectionResponse> {
  const refused = await gate();
  if (refused !== undefined) throw new ConnectError(refused, Code.Unimplemented);
  // As grpc-go does: a dependency goes once per stream, the file asked for every time.
  const sent = new Set<string>();
  for await (const req of requests) {
    const answer = index.answer(req, sent);
    const init = { validHost: req.host, originalRequest: req, messageResponse: answer };
    yield create(version.ServerReflectionResponseSchema as typeof v1.ServerReflectionResponseSchema, init as never) as never;
  }
}

const notFound = (message: string): Answer => ({ case: "errorResponse", value: { errorCode: Code.NotFound, errorMessage: message } });

class DescriptorIndex {
  private readonly services: string[];
  private readonly files = new Map<string, DescFile>();
  private readonly symbols = new Map<string, DescFile>();
  private readonly extensions = new Map<string, Map<number, DescFile>>();
  private readonly encoded = new Map<DescFile, Uint8Array>();

  constructor(services: readonly DescService[]) {
    this.services = [...new Set(services.map((s) => s.typeName))].sort();
    const visit = (file: DescFile) => {
      if (this.files.has(file.proto.name)) return;
      this.files.set(file.proto.name, file);
      file.dependencies.forEach(visit);
      for (const service of file.services) {
        this.symbols.set(service.typeName, file);
        for (const method of service.methods) this.symbols.set(`${service.typeName}.${method.name}`, file);
      }
      file.enums.forEach((e) => this.addEnum(e, file));
      file.messages.forEach((m) => this.addMessage(m, file));
      file.extensions.forEach((x) => this.addExtension(x, file));
    };
    services.forEach((s) => visit(s.file));
  }

  private addEnum(e: DescEnum, file: DescFile): void {
    this.symbols.set(e.typeName, file);
  }

  private addMessage(m: DescMessage, file: DescFile): void {
    this.symbols.set(m.typeName, file);
    for (const field of m.fields) this.symbols.set(`${m.typeName}.${field.name}`, file);
    for (const oneof of m.oneofs) this.symbols.set(`${m.typeName}.${oneof.name}`, file);
    m.nestedEnums.forEach((e) => this.addEnum(e, file));
    m.nestedMessages.forEach((n) => this.addMessage(n, file));
    m.nestedExtensions.forEach((x) => this.addExtension(x, file));
  }

  private addExtension(x: DescExtension, file: DescFile): void {
    this.symbols.set(x.typeName, file);
    let numbers = this.extensions.get(x.extendee.typeName);
    if (!numbers) this.extensions.set(x.extendee.typeName, (numbers = new Map()));
    numbers.set(x.number, file);
  }

  answer(req: Request, sent: Set<string>): Answer {
    const ask = req.messageRequest;
    switch (ask.case) {
      case "listServices":
        return { case: "listServicesResponse", value: { service: this.services.map((name) => ({ name })) } };
      case "fileByFilename": {
        const file = this.files.get(ask.value);
        return file ? this.withDependencies(file, sent) : notFound(`No file named "${ask.value}".`);
      }
      case "fileContainingSymbol": {
        const file = this.symbols.get(ask.value.replace(/^\./, ""));
        return file ? this.withDependencies(file, sent) : notFound(`No symbol named "${ask.value}".`);
      }
      case "fileContainingExtension": {
        const { containingType, extensionNumber } = ask.value;
        const file = this.extensions.get(containingType.replace(/^\./, ""))?.get(extensionNumber);
        return file ? this.withDependencies(file, sent) : notFound(`No extension ${extensionNumber} of "${containingType}".`);
      }
      case "allExtensionNumbersOfType": {
        const name = ask.value.replace(/^\./, "");
        if (!this.symbols.has(name)) return notFound(`No message type named "${ask.value}".`);
        return { case: "allExtensionNumbersResponse", value: { baseTypeName: name, extensionNumber: [...(this.extensions.get(name)?.keys() ?? [])].sort((a, b) => a - b) } };
      }
      default:
        return { case: "errorResponse", value: { errorCode: Code.InvalidArgument, errorMessage: "The request asks for nothing this server knows." } };
    }
  }

  /** The file, then whichever of its transitive dependencies this stream has not been sent yet. */
  private withDependencies(file: DescFile, sent: Set<string>): Answer {
    const out: Uint8Array[] = [];
    const queue = [file];
    const seen = new Set<string>();
    while (queue.length > 0) {
      const next = queue.shift() as DescFile;
      if (seen.has(next.proto.name)) continue;
      seen.add(next.proto.name);
      if (next === file || !sent.has(next.proto.name)) {
        sent.add(next.proto.name);
        out.push(this.encode(next));
      }
      queue.push(...next.dependencies);
    }
    return { case: "fileDescriptorResponse", value: { fileDescriptorProto: out } };
  }

  private encode(file: DescFile): Uint8Array {
    let bytes = this.encoded.get(file);
    if (!bytes) this.encoded.set(file, (bytes = toBinary(FileDescriptorProtoSchema, file.proto)));
    return bytes;
  }
}
