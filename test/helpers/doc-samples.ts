// The sample outputs the docs show under a command ("# {...}" comments) against what the command
// printed, so a sample cannot go stale: every field a sample shows must be in the output, a
// sample that elides nothing must show every field of the output, and a string it shows in full
// must be the output's.

/** The sample outputs among a step's lines: each "# {" comment with its "#  " continuation lines. */
export function samplesOf(lines: readonly string[]): string[] {
  const samples: string[] = [];
  let current: string[] | undefined;
  for (const line of lines) {
    if (line.startsWith("# {")) {
      current = [line.slice(2)];
      samples.push("");
    } else if (current && line.startsWith("#  ")) {
      current.push(line.slice(2).trim());
    } else {
      current = undefined;
    }
    if (current) samples[samples.length - 1] = current.join("");
  }
  return samples;
}

/** "..." standing for fields or items, not inside a string value. */
const elision = /[{[,]\s*\.\.\.\s*[,}\]]/;

function keysOf(value: unknown, into = new Set<string>()): Set<string> {
  if (Array.isArray(value)) for (const v of value) keysOf(v, into);
  else if (value !== null && typeof value === "object") {
    for (const [k, v] of Object.entries(value)) {
      into.add(k);
      keysOf(v, into);
    }
  }
  return into;
}

function valuesAt(value: unknown, key: string, into: unknown[] = []): unknown[] {
  if (Array.isArray(value)) for (const v of value) valuesAt(v, key, into);
  else if (value !== null && typeof value === "object") {
    for (const [k, v] of Object.entries(value)) {
      if (k === key) into.push(v);
      valuesAt(v, key, into);
    }
  }
  return into;
}

/** What is wrong with a sample against the output it stands for; empty when it holds. */
export function sampleProblems(sample: string, actual: unknown): string[] {
  const problems: string[] = [];
  const shown = [...sample.matchAll(/"([A-Za-z_][A-Za-z0-9_]*)":/g)].map((m) => m[1] as string);
  const present = keysOf(actual);
  for (const key of new Set(shown)) if (!present.has(key)) problems.push(`shows "${key}", which the output does not have`);
  if (!elision.test(sample)) {
    for (const key of present) if (!shown.includes(key)) problems.push(`does not show "${key}", which the output has (or elide fields with "...")`);
  }
  for (const m of sample.matchAll(/"([A-Za-z_][A-Za-z0-9_]*)":"([^"]*)"/g)) {
    const [, key, text] = m as unknown as [string, string, string];
    if (text.includes("...")) continue;
    const values = valuesAt(actual, key);
    if (values.length > 0 && !values.includes(text)) problems.push(`shows "${key}":"${text}", the output ${JSON.stringify(values[0])}`);
  }
  return problems;
}
