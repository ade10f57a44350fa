import { pino, type Logger } from "pino";

export type { Logger };

/**
 * Structured JSON logs. Credentials are redacted by path as a second line of
 * defence: no code path is meant to log them in the first place.
 */
export function createLogger(level: string, destination = 1): Logger {
  return pino(
    {
      level,
      base: undefined,
      redact: {
        paths: [
          "authorization",
          "*.authorization",
          "headers.authorization",
          "*.headers.authorization",
          "api_key",
          "*.api_key",
          "signing_secret",
          "*.signing_secret",
          "secret",
          "*.secret",
          "password",
          "*.password",
        ],
        censor: "[redacted]",
      },
    },
    pino.destination({ fd: destination, sync: false }),
  );
}
