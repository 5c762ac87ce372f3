import path from 'node:path';
import { Command } from 'commander';
import type { Config } from '../config';
import { METADATA_PATH } from '../http/metadata';
import { MODULES } from '../modules';
import type { HasuraMetadata, MetadataFiles } from '../platform/metadata';
import { directoryReader, metadataFromFiles, metadataToFiles, writeFilesUnder } from '../platform/metadata-files';

interface ServerOptions {
  endpoint?: string;
  adminSecret?: string;
  dir: string;
}

const FILE_LAYOUTS: MetadataFiles[] = MODULES.flatMap((module) => (module.metadataFiles ? [module.metadataFiles] : []));

/** One metadata request to the server, as the Hasura CLI makes them; a refusal exits with its message. */
async function metadataRequest(config: Config, options: ServerOptions, body: unknown): Promise<unknown> {
  const endpoint = (options.endpoint ?? config.publicUrl).replace(/\/+$/, '');
  const secret = options.adminSecret ?? config.graphql.adminSecret;
  if (!secret) throw new Error('the admin secret is needed: set GQL_GRAPHQL_ADMIN_SECRET or pass --admin-secret');
  let response: Response;
  try {
    response = await fetch(`${endpoint}${METADATA_PATH}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-gql-admin-secret': secret },
      body: JSON.stringify(body),
    });
  } catch (error) {
    throw new Error(
      `could not reach ${endpoint}: ${(error as Error).cause instanceof Error ? ((error as Error).cause as Error).message : (error as Error).message}`,
    );
  }
  const answer = (await response.json().catch(() => null)) as { error?: string; path?: string } | null;
  if (!response.ok) throw new Error(answer?.error ? `${answer.error} (at ${answer.path})` : `the server answered ${response.status}`);
  return answer;
}

const exportMetadata = (config: Config, options: ServerOptions) =>
  metadataRequest(config, options, { type: 'export_metadata', args: {} }) as Promise<HasuraMetadata>;

/** Lines of `a` missing from `b` and the other way round, in order: enough to see what differs in a YAML file. */
function lineDiff(before: string, after: string): string[] {
  const a = before.split('\n');
  const b = after.split('\n');
  // Longest common subsequence over lines: metadata files are small.
  const lengths = Array.from({ length: a.length + 1 }, () => new Array<number>(b.length + 1).fill(0));
  for (let i = a.length - 1; i >= 0; i -= 1) {
    for (let j = b.length - 1; j >= 0; j -= 1) lengths[i][j] = a[i] === b[j] ? lengths[i + 1][j + 1] + 1 : Math.max(lengths[i + 1][j], lengths[i][j + 1]);
  }
  const lines: string[] = [];
  let i = 0;
  let j = 0;
  while (i < a.length || j < b.length) {
    if (i < a.length && j < b.length && a[i] === b[j]) {
      i += 1;
      j += 1;
    } else if (j < b.length && (i === a.length || lengths[i][j + 1] >= lengths[i + 1][j])) {
      lines.push(`+ ${b[j]}`);
      j += 1;
    } else {
      lines.push(`- ${a[i]}`);
      i += 1;
    }
  }
  return lines;
}

/** `plinth metadata export|apply|diff`: the files under metadata/ (Hasura's CLI layout) and the server's metadata API. */
export function metadataCommand(configuration: () => Config): Command {
  const metadata = new Command('metadata').description("move the metadata between the files under metadata/ (Hasura's CLI layout) and a running server");
  const withServerOptions = (command: Command) =>
    command
      .option('--endpoint <url>', 'the server (default: PLINTH_PUBLIC_URL, or http://localhost:PORT)')
      .option('--admin-secret <secret>', 'the admin secret (default: GQL_GRAPHQL_ADMIN_SECRET)')
      .option('--dir <folder>', 'the metadata folder', 'metadata');

  withServerOptions(metadata.command('export'))
    .description("write the server's metadata to the files under the metadata folder")
    .action(async (options: ServerOptions) => {
      const files = metadataToFiles(await exportMetadata(configuration(), options), FILE_LAYOUTS);
      writeFilesUnder(path.resolve(options.dir), files);
      process.stdout.write(`exported the metadata to ${options.dir} (${Object.keys(files).length} files)\n`);
    });

  withServerOptions(metadata.command('apply'))
    .description("replace the server's metadata by the files under the metadata folder (all or nothing)")
    .action(async (options: ServerOptions) => {
      const read = metadataFromFiles(directoryReader(path.resolve(options.dir)), FILE_LAYOUTS);
      await metadataRequest(configuration(), options, { type: 'replace_metadata', version: 2, args: { metadata: read } });
      process.stdout.write(`applied the metadata of ${options.dir}\n`);
    });

  withServerOptions(metadata.command('diff'))
    .description("show how the files under the metadata folder differ from the server's metadata (exit code 1 when they do)")
    .action(async (options: ServerOptions) => {
      const server = metadataToFiles(await exportMetadata(configuration(), options), FILE_LAYOUTS);
      // The local side is normalised the same way, so only a difference in content shows.
      const local = metadataToFiles(metadataFromFiles(directoryReader(path.resolve(options.dir)), FILE_LAYOUTS), FILE_LAYOUTS);
      const output: string[] = [];
      for (const file of [...new Set([...Object.keys(server), ...Object.keys(local)])].sort()) {
        if (server[file] === local[file]) continue;
        output.push(`--- server/${file}`, `+++ ${options.dir}/${file}`, ...lineDiff(server[file] ?? '', local[file] ?? ''));
      }
      process.stdout.write(output.length ? `${output.join('\n')}\n` : 'the files match the server\n');
      process.exitCode = output.length ? 1 : 0;
    });

  return metadata;
}
