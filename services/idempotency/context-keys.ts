import type { Message } from "@bufbuild/protobuf";
import { createContextKey } from "@connectrpc/connect";
import type { IdempotencyClaim } from "./idempotent.ts";

/** An idempotent request's claim on its key, for a handler that writes in one statement (oneStatementMethods). */
export const claimKey = createContextKey<IdempotencyClaim | undefined>(undefined);
/** Set when an idempotent request is a repeat: the stored response to send instead of running the handler. */
export const replayKey = createContextKey<Message | undefined>(undefined);
