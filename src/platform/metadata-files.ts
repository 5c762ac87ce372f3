import fs from 'node:fs';
import path from 'node:path';
import type YAMLModule from 'yaml';
import { DEFAULT_SOURCE, emptyMetadata, type HasuraMetadata, type MetadataFiles, type MetadataSource, type MetadataTable } from './metadata';

/**
 * Hasura's CLI layout of the metadata under `metadata/` (config v3):
 *
 *   version.yaml                                   version: 3
 *   databases/databases.yaml                       the sources; `tables: "!include default/tables/tables.yaml"`
 *   databases/default/tables/tables.yaml           a list of `"!include <schema>_<table>.yaml"`
 *   databases/default/tables/<schema>_<table>.yaml  one table entry (table, event_triggers, ...)
 *   ...and each module's own files (cron_triggers.yaml, actions.yaml...), by MetadataFiles.
 *
 * A string `"!include <file>"` anywhere stands for the parsed content of that file, relative to
 * the file holding it, as the Hasura CLI reads it.
 */

export const INCLUDE_PREFIX = '!include ';

/** The yaml package (megabytes resident), loaded when metadata files are first read or written, not at every start-up. */
let yamlModule: typeof YAMLModule | undefined;
export function yaml(): typeof YAMLModule {
  return (yamlModule ??= require('yaml') as typeof YAMLModule);
}

/** YAML as the Hasura CLI writes it: block style, two-space indent, no line folding. */
export function toYaml(value: unknown): string {
  return yaml().stringify(value, { indent: 2, lineWidth: 0, aliasDuplicateObjects: false });
}

/** The path under `metadata/` of a table's file: `databases/default/tables/<schema>_<table>.yaml`. */
export function tableFilePath(table: { schema: string; name: string }, source = DEFAULT_SOURCE): string {
  return `databases/${source}/tables/${table.schema}_${table.name}.yaml`;
}

/** The files (path under `metadata/` -> text) that hold `metadata`. */
export function metadataToFiles(metadata: HasuraMetadata, modules: readonly MetadataFiles[]): Record<string, string> {
  const files: Record<string, string> = { 'version.yaml': toYaml({ version: 3 }) };
  const sources = metadata.sources.map((source) => {
    const { tables, ...rest } = source;
    const includes: string[] = [];
    for (const table of tables) {
      const file = tableFilePath(table.table, source.name);
      files[file] = toYaml(table);
      includes.push(`${INCLUDE_PREFIX}${path.posix.basename(file)}`);
    }
    files[`databases/${source.name}/tables/tables.yaml`] = toYaml(includes);
    return { ...rest, tables: `${INCLUDE_PREFIX}${source.name}/tables/tables.yaml` };
  });
  files['databases/databases.yaml'] = toYaml(sources);
  for (const module of modules) Object.assign(files, module.write(metadata));
  return files;
}

/** A problem with the files: the message names the file. */
export class MetadataFilesError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'MetadataFilesError';
  }
}

/**
 * Reads the metadata held by `read` (a file's text by its path under `metadata/`, or undefined):
 * the tables under `databases/`, then each module's files. Missing files mean empty parts.
 */
export function metadataFromFiles(read: (file: string) => string | undefined, modules: readonly MetadataFiles[]): HasuraMetadata {
  const including = new Set<string>();
  const parse = (file: string): unknown => {
    if (including.has(file)) throw new MetadataFilesError(`${file} includes itself`);
    const text = read(file);
    if (text === undefined) throw new MetadataFilesError(`${file} is included but does not exist`);
    let value: unknown;
    try {
      value = yaml().parse(text);
    } catch (error) {
      throw new MetadataFilesError(`${file} is not valid YAML: ${(error as Error).message.split('\n')[0]}`);
    }
    including.add(file);
    try {
      return resolveIncludes(value, path.posix.dirname(file), parse);
    } finally {
      including.delete(file);
    }
  };
  const metadata = emptyMetadata();
  if (read('databases/databases.yaml') !== undefined) {
    const sources = parse('databases/databases.yaml') ?? [];
    if (!Array.isArray(sources)) throw new MetadataFilesError('databases/databases.yaml must be a list of sources');
    const parsed = sources.map((source: unknown, index): MetadataSource => {
      const entry = source as Partial<MetadataSource> | null;
      if (entry === null || typeof entry !== 'object' || typeof entry.name !== 'string') {
        throw new MetadataFilesError(`databases/databases.yaml: source ${index + 1} needs a name`);
      }
      const tables = entry.tables ?? [];
      if (!Array.isArray(tables)) throw new MetadataFilesError(`databases/databases.yaml: the tables of ${entry.name} must be a list`);
      return { ...entry, name: entry.name, kind: entry.kind ?? 'postgres', tables: tables as MetadataTable[] };
    });
    if (parsed.length > 0) metadata.sources = parsed;
  }
  for (const module of modules) module.read(read, metadata);
  return metadata;
}

function resolveIncludes(value: unknown, directory: string, parse: (file: string) => unknown): unknown {
  if (typeof value === 'string' && value.startsWith(INCLUDE_PREFIX)) {
    return parse(path.posix.normalize(path.posix.join(directory, value.slice(INCLUDE_PREFIX.length).trim())));
  }
  if (Array.isArray(value)) return value.map((item) => resolveIncludes(item, directory, parse));
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([key, item]) => [key, resolveIncludes(item, directory, parse)]));
  }
  return value;
}

/** MetadataFiles for a top-level key held in one YAML file (`cron_triggers` in `cron_triggers.yaml`). */
export function yamlKeyFile(key: string, file: string): MetadataFiles {
  return {
    write: (metadata) => ({ [file]: toYaml(metadata[key] ?? []) }),
    read: (read, metadata) => {
      const text = read(file);
      if (text === undefined) return;
      try {
        const value: unknown = yaml().parse(text);
        if (value !== null && value !== undefined) metadata[key] = value;
      } catch (error) {
        throw new MetadataFilesError(`${file} is not valid YAML: ${(error as Error).message.split('\n')[0]}`);
      }
    },
  };
}

/** Reads a file under `directory` by its path under `metadata/`; undefined when it does not exist. */
export function directoryReader(directory: string): (file: string) => string | undefined {
  return (file) => {
    const full = path.join(directory, ...file.split('/'));
    if (!path.resolve(full).startsWith(path.resolve(directory) + path.sep)) throw new MetadataFilesError(`${file} is outside ${directory}`);
    return fs.existsSync(full) ? fs.readFileSync(full, 'utf8') : undefined;
  };
}

/** Every file under `directory` (path under it, with /), for `diff` and for replacing the folder. */
export function filesUnder(directory: string): Record<string, string> {
  const files: Record<string, string> = {};
  const walk = (folder: string, prefix: string) => {
    if (!fs.existsSync(folder)) return;
    for (const entry of fs.readdirSync(folder, { withFileTypes: true })) {
      const relative = prefix ? `${prefix}/${entry.name}` : entry.name;
      if (entry.isDirectory()) walk(path.join(folder, entry.name), relative);
      else if (entry.isFile()) files[relative] = fs.readFileSync(path.join(folder, entry.name), 'utf8');
    }
  };
  walk(directory, '');
  return files;
}

/** Writes `files` under `directory`, removing the YAML/GraphQL files of the layout that are no longer part of it. */
export function writeFilesUnder(directory: string, files: Record<string, string>): void {
  for (const stale of Object.keys(filesUnder(directory))) {
    if (!(stale in files) && /\.(ya?ml|graphql)$/.test(stale)) fs.rmSync(path.join(directory, ...stale.split('/')));
  }
  for (const [file, text] of Object.entries(files)) {
    const full = path.join(directory, ...file.split('/'));
    fs.mkdirSync(path.dirname(full), { recursive: true });
    fs.writeFileSync(full, text);
  }
}
