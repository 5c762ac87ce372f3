import 'reflect-metadata';
import fs from 'node:fs';
import path from 'node:path';
import { MODULES } from '../src/modules';

const SRC = path.resolve(__dirname, '..', '..', 'src');

describe('the module contract', () => {
  it('lists every folder under src/modules once, by its name, in src/modules/index.ts', () => {
    const folders = fs
      .readdirSync(path.join(SRC, 'modules'), { withFileTypes: true })
      .filter((entry) => entry.isDirectory())
      .map((entry) => entry.name);
    const names = MODULES.map((module) => module.name);
    expect([...names].sort()).toEqual([...folders].sort());
    expect(new Set(names).size).toBe(names.length);
  });

  it('keeps start-up and the schema builder free of any particular module', () => {
    for (const file of ['main.ts', path.join('graphql', 'schema.ts'), path.join('cli', 'main.ts')]) {
      const source = fs.readFileSync(path.join(SRC, file), 'utf8');
      expect({ file, imports: source.match(/from '(\.\.?\/)+modules\/[^']+'/g) ?? [] }).toEqual({ file, imports: [] });
    }
  });

  it('has each module build its resolvers from its own services only', () => {
    for (const module of MODULES) {
      for (const resolver of module.resolvers ?? []) expect(resolver.length).toBeLessThanOrEqual(1);
    }
  });
});
