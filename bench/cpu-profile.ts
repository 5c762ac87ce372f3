import fs from 'node:fs';

/**
 * Summarises a V8 .cpuprofile (from BENCH_CPU_PROF=plinth npm run bench): where the samples
 * fall by package and by function (self time), and which frames they pass through (inclusive).
 *
 *   node dist/bench/cpu-profile.js bench/results/profiles/plinth-<time>.cpuprofile [regex] [rows]
 *
 * The optional regex keeps only matching rows of the inclusive list (e.g. 'session|apollo').
 */

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}

interface CpuProfile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

/** A frame's name: function, file (shortened to the package or the dist path) and line. */
function frameName(node: ProfileNode): string {
  const { functionName, url, lineNumber } = node.callFrame;
  const file = url.replace(/.*node_modules\//, '').replace(/.*\/dist\//, 'dist/');
  return `${functionName || '(anonymous)'} ${file}:${lineNumber + 1}`;
}

/** The package a frame belongs to (scoped names kept whole), a dist file, a node: module, or a VM state. */
function packageName(node: ProfileNode): string {
  const { url, functionName } = node.callFrame;
  const inModules = url.lastIndexOf('node_modules/');
  if (inModules !== -1) {
    const parts = url.slice(inModules + 'node_modules/'.length).split('/');
    return parts[0].startsWith('@') ? `${parts[0]}/${parts[1]}` : parts[0];
  }
  if (url.includes('/dist/')) return `dist/${url.split('/dist/')[1]}`;
  return url || functionName;
}

function add(totals: Map<string, number>, key: string, micros: number): void {
  totals.set(key, (totals.get(key) ?? 0) + micros);
}

function printTop(title: string, totals: Map<string, number>, grandTotal: number, rows: number): void {
  console.log(`\n--- ${title}`);
  for (const [key, micros] of [...totals].sort((a, b) => b[1] - a[1]).slice(0, rows)) {
    console.log(`${((100 * micros) / grandTotal).toFixed(1).padStart(5)}%  ${key}`);
  }
}

function summarise(file: string, filter: RegExp | undefined, rows: number): void {
  const profile = JSON.parse(fs.readFileSync(file, 'utf8')) as CpuProfile;
  const nodes = new Map(profile.nodes.map((node) => [node.id, node]));
  const parents = new Map<number, number>();
  for (const node of profile.nodes) for (const child of node.children ?? []) parents.set(child, node.id);

  const selfByNode = new Map<number, number>();
  profile.samples.forEach((id, index) => selfByNode.set(id, (selfByNode.get(id) ?? 0) + (profile.timeDeltas[index] ?? 0)));

  const byPackage = new Map<string, number>();
  const byFunction = new Map<string, number>();
  const inclusive = new Map<string, number>();
  let total = 0;
  for (const [id, micros] of selfByNode) {
    const node = nodes.get(id)!;
    total += micros;
    add(byPackage, packageName(node), micros);
    add(byFunction, frameName(node), micros);
    // Count each frame once per stack, so recursion does not inflate it.
    const seen = new Set<string>();
    for (let current: number | undefined = id; current !== undefined; current = parents.get(current)) {
      const name = frameName(nodes.get(current)!);
      if (!seen.has(name)) add(inclusive, name, micros);
      seen.add(name);
    }
  }

  console.log(`${file}: ${(total / 1000).toFixed(0)} ms sampled (idle and start-up included)`);
  printTop('self time by package', byPackage, total, rows);
  printTop('self time by function', byFunction, total, rows);
  const shown = filter ? new Map([...inclusive].filter(([name]) => filter.test(name))) : inclusive;
  printTop(`inclusive time${filter ? ` (matching ${filter.source})` : ''}`, shown, total, rows * 2);
}

const [file, pattern, rowText] = process.argv.slice(2);
if (!file) {
  console.error('usage: node dist/bench/cpu-profile.js <file.cpuprofile> [regex] [rows]');
  process.exit(2);
}
summarise(file, pattern ? new RegExp(pattern) : undefined, Number(rowText) || 25);
