import fs from 'node:fs';
import path from 'node:path';
import { LOCK_KEYS } from '../../src/db/lock-keys';

const SRC = path.resolve(__dirname, '..', '..', '..', 'src');
const ADVISORY_CALL = /pg_(?:try_)?advisory_(?:xact_)?(?:un)?lock(?:_shared)?\s*\(([^)]*)\)/g;

function sourceFiles(folder: string): string[] {
  return fs.readdirSync(folder, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(folder, entry.name);
    if (entry.isDirectory()) return sourceFiles(full);
    return entry.name.endsWith('.ts') ? [full] : [];
  });
}

describe('advisory lock keys', () => {
  it('come from the one list: every file taking an advisory lock names its key from LOCK_KEYS, none writes a number', () => {
    const callers = sourceFiles(SRC).filter((file) => !file.endsWith(path.join('db', 'lock-keys.ts')));
    const found: { file: string; numbers: string[]; usesList: boolean }[] = [];
    for (const file of callers) {
      const source = fs.readFileSync(file, 'utf8');
      const calls = [...source.matchAll(ADVISORY_CALL)];
      if (calls.length === 0) continue;
      found.push({
        file: path.relative(SRC, file),
        numbers: calls.map((call) => call[1]).filter((args) => /\d{3,}/.test(args)),
        usesList: /\bLOCK_KEYS\.\w+/.test(source),
      });
    }
    expect(found.length).toBeGreaterThanOrEqual(3);
    expect(found.filter((entry) => entry.numbers.length > 0 || !entry.usesList)).toEqual([]);
  });

  it("are distinct, and the recurring tasks' namespace fits the two-integer form", () => {
    const values = Object.values(LOCK_KEYS);
    expect(new Set(values).size).toBe(values.length);
    expect(Number.isSafeInteger(LOCK_KEYS.newsletterIssueBase + 1_000_000)).toBe(true);
    expect(LOCK_KEYS.recurringTasks).toBeLessThan(2 ** 31);
  });
});
