import { spawn } from 'node:child_process';

export type OpenApiDocument = {
  openapi: string;
  info: { title: string; version: string };
  servers?: { url: string }[];
  tags?: { name: string; description?: string }[];
  paths: Record<string, Record<string, Record<string, unknown>>>;
  components?: Record<string, Record<string, unknown>>;
};

const VALIDATE = `
import { Validator } from '@seriousme/openapi-schema-validator';
let input = '';
for await (const chunk of process.stdin) input += chunk;
const validator = new Validator();
const result = await validator.validate(JSON.parse(input));
process.stdout.write(JSON.stringify({ valid: result.valid, version: validator.version, errors: result.errors ?? null }));
`;

/**
 * Validates a document against the official OpenAPI schemas with @seriousme/openapi-schema-validator.
 * It runs in a child process: it is an ES module, which jest's CommonJS runtime cannot import.
 */
export function validateOpenApi(document: unknown): Promise<{ valid: boolean; version: string; errors: unknown }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--input-type=module', '-e', VALIDATE], { stdio: ['pipe', 'pipe', 'inherit'] });
    let output = '';
    child.stdout.on('data', (chunk) => (output += chunk));
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolve(JSON.parse(output)) : reject(new Error(`the validator exited with ${code}`))));
    child.stdin.end(JSON.stringify(document));
  });
}

/** Every operation of a document, with its path and method. */
export function operationsOf(document: OpenApiDocument): { path: string; method: string; operation: Record<string, unknown> }[] {
  const methods = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'];
  return Object.entries(document.paths).flatMap(([path, item]) =>
    methods.filter((method) => method in item).map((method) => ({ path, method, operation: item[method] })),
  );
}
