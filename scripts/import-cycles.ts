// Import cycles between the folders of services/ (and gateway/): dependencies must point one way,
// so a domain can be read, tested and changed without the ones above it.
// Usage: node scripts/import-cycles.ts [ROOT]; prints each cycle with the imports that make it, exit 1 if any.
import { readdirSync, readFileSync, existsSync } from "node:fs";
import path from "node:path";
import ts from "typescript";

/** One import of a file in one folder by a file in another. */
export interface FolderImport {
  from: string;
  to: string;
  /** The importing file and the file it names, relative to the root. */
  fromFile: string;
  toFile: string;
}

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) return sourceFiles(p);
    return /\.(ts|mts|js|mjs)$/.test(e.name) && !e.name.endsWith(".d.ts") ? [p] : [];
  });
}

/** The folders checked: each of services/*, and gateway/. */
export function folders(root: string): string[] {
  const services = path.join(root, "services");
  const out = existsSync(services) ? readdirSync(services, { withFileTypes: true }).filter((d) => d.isDirectory()).map((d) => `services/${d.name}`) : [];
  if (existsSync(path.join(root, "gateway"))) out.push("gateway");
  return out;
}

/** Every import from one checked folder into another, read with TypeScript's own import scanner. */
export function folderImports(root: string): FolderImport[] {
  const units = folders(root);
  const unitOf = (rel: string) => units.find((u) => rel === u || rel.startsWith(`${u}/`));
  const out: FolderImport[] = [];
  for (const unit of units) {
    for (const file of sourceFiles(path.join(root, unit))) {
      const { importedFiles } = ts.preProcessFile(readFileSync(file, "utf8"), true, true);
      for (const { fileName } of importedFiles) {
        if (!fileName.startsWith(".")) continue;
        const toFile = path.relative(root, path.resolve(path.dirname(file), fileName));
        const to = unitOf(toFile);
        if (to && to !== unit) out.push({ from: unit, to, fromFile: path.relative(root, file), toFile });
      }
    }
  }
  return out;
}

/** A group of folders that reach one another, and one closed path through some of them with the import that makes each step. */
export interface ImportCycle {
  folders: string[];
  path: FolderImport[];
}

/** The folder cycles, one per group of folders that reach one another; empty when dependencies point one way. */
export function importCycles(imports: readonly FolderImport[]): ImportCycle[] {
  const edges = new Map<string, Map<string, FolderImport>>();
  for (const i of [...imports].sort((a, b) => a.fromFile.localeCompare(b.fromFile))) {
    const from = edges.get(i.from) ?? new Map<string, FolderImport>();
    if (!from.has(i.to)) from.set(i.to, i);
    edges.set(i.from, from);
  }
  const targets = (v: string) => [...(edges.get(v)?.keys() ?? [])].sort();
  const nodes = [...new Set(imports.flatMap((i) => [i.from, i.to]))].sort();
  // Tarjan's strongly connected components.
  let next = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const groups: string[][] = [];
  const visit = (v: string) => {
    index.set(v, next);
    low.set(v, next++);
    stack.push(v);
    onStack.add(v);
    for (const w of targets(v)) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) === index.get(v)) {
      const group: string[] = [];
      let w: string;
      do {
        w = stack.pop()!;
        onStack.delete(w);
        group.push(w);
      } while (w !== v);
      if (group.length > 1) groups.push(group.sort());
    }
  };
  for (const n of nodes) if (!index.has(n)) visit(n);
  return groups.map((group) => ({ folders: group, path: shortestCycle(group, edges) }));
}

/** The shortest closed path from the group's first folder back to it, staying inside the group (breadth first). */
function shortestCycle(group: string[], edges: Map<string, Map<string, FolderImport>>): FolderImport[] {
  const members = new Set(group);
  const start = group[0]!;
  const via = new Map<string, FolderImport>();
  const queue = [start];
  while (queue.length > 0) {
    const v = queue.shift()!;
    for (const [w, imp] of [...(edges.get(v) ?? [])].sort(([a], [b]) => a.localeCompare(b))) {
      if (!members.has(w)) continue;
      if (w === start) {
        const path = [imp];
        for (let at = v; at !== start; at = via.get(at)!.from) path.unshift(via.get(at)!);
        return path;
      }
      if (via.has(w)) continue;
      via.set(w, imp);
      queue.push(w);
    }
  }
  return [];
}

/** A cycle as a reader follows it: its folders, then each step with the import that makes it. */
export function describeCycle(cycle: ImportCycle): string {
  const steps = cycle.path.map((s) => `  ${s.from} → ${s.to}   (${s.fromFile} imports ${s.toFile})`);
  return [`import cycle between ${cycle.folders.join(", ")}:`, ...steps].join("\n");
}

if (import.meta.main) {
  const root = path.resolve(process.argv[2] ?? ".");
  const cycles = importCycles(folderImports(root));
  for (const c of cycles) console.log(`${describeCycle(c)}\n`);
  console.log(cycles.length === 0 ? "no import cycles between folders" : `${cycles.length} import cycle(s) between folders`);
  process.exit(cycles.length === 0 ? 0 : 1);
}
