import fs from 'node:fs';
import path from 'node:path';

/** Plinth's version, from package.json (read at run time: tsc does not copy it into dist/). */
export const PLINTH_VERSION = (JSON.parse(fs.readFileSync(path.join(__dirname, '..', '..', '..', 'package.json'), 'utf8')) as { version: string }).version;
