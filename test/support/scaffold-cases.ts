import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { CustomService } from '../../src/config';
import type { ActionsMetadata } from '../../src/modules/actions/actions.metadata';
import { scaffoldServices } from '../../src/modules/actions/services/scaffold';

/** The committed output of every template for every case: what `plinth build` must keep writing byte for byte. */
export const SCAFFOLD_FIXTURE = path.resolve(__dirname, '..', '..', '..', 'test', 'actions', 'fixtures', 'scaffold-outputs.json');

const TEMPLATE_NAMES = ['express-ts', 'fastify-ts', 'nest-ts', 'fastapi', 'gin'];

/**
 * Custom types and actions reaching each branch of the templates: required and optional arguments
 * of scalar, enum, input-object, list and custom-scalar types; outputs that are objects (nested,
 * with nullable fields, lists, booleans, uuids, timestamps), scalars, lists, enums and custom
 * scalars; an action without arguments; one routed through an `{{ENV}}` handler URL; one routed
 * elsewhere.
 */
function metadata(service: (template: string) => string): ActionsMetadata {
  return {
    customTypes: {
      scalars: [{ name: 'Json' }],
      enums: [{ name: 'Mood', values: [{ value: 'GLAD' }, { value: 'CALM' }] }],
      input_objects: [
        {
          name: 'Filter',
          fields: [
            { name: 'moods', type: '[Mood!]' },
            { name: 'since', type: 'timestamptz!' },
            { name: 'extra', type: 'Json' },
          ],
        },
      ],
      objects: [
        {
          name: 'Author',
          fields: [
            { name: 'id', type: 'uuid!' },
            { name: 'nickname', type: 'String' },
          ],
        },
        {
          name: 'Greeting',
          fields: [
            { name: 'text', type: 'String!' },
            { name: 'mood', type: 'Mood!' },
            { name: 'count', type: 'Int!' },
            { name: 'ratio', type: 'float8!' },
            { name: 'shown', type: 'Boolean!' },
            { name: 'at', type: 'timestamptz!' },
            { name: 'author', type: 'Author!' },
            { name: 'tags', type: '[String!]!' },
            { name: 'note', type: 'String' },
          ],
        },
      ],
    },
    actions: [
      {
        name: 'sayHello',
        definition: {
          handler: `${service('')}/say-hello`,
          arguments: [
            { name: 'who', type: 'String!' },
            { name: 'mood', type: 'Mood' },
            { name: 'filter', type: 'Filter!' },
            { name: 'ids', type: '[uuid!]!' },
            { name: 'raw', type: 'Json' },
          ],
          output_type: 'Greeting',
        },
      },
      { name: 'ping', definition: { handler: `${service('')}/ping`, output_type: 'String!' } },
      {
        name: 'listGreetings',
        definition: { handler: `${service('')}/list-greetings`, arguments: [{ name: 'limit', type: 'Int' }], output_type: '[Greeting!]!' },
      },
      { name: 'currentMood', definition: { handler: `${service('')}/current-mood`, output_type: 'Mood' } },
      { name: 'rawData', definition: { handler: `${service('')}/raw-data`, output_type: 'Json!' } },
      { name: 'isUp', definition: { handler: `${service('')}/is-up`, output_type: 'Boolean!' } },
      { name: 'viaEnv', definition: { handler: '{{SERVICE_BASE}}/via-env', arguments: [{ name: 'tags', type: '[String]' }], output_type: 'uuid!' } },
      { name: 'elsewhere', definition: { handler: 'http://other:9999/elsewhere', output_type: 'String' } },
    ],
  };
}

/** The files `plinth build` writes for one service, by path under its folder. */
function filesOf(folder: string): Record<string, string> {
  const files = fs.readdirSync(folder, { recursive: true, encoding: 'utf8' }).filter((file) => fs.statSync(path.join(folder, file)).isFile());
  return Object.fromEntries(files.sort().map((file) => [file.split(path.sep).join('/'), fs.readFileSync(path.join(folder, file), 'utf8')]));
}

/**
 * Scaffolds every template in each case, through `scaffoldServices` as `plinth build` calls it:
 * with actions (a route below `/`), and with no actions and no custom types (the root route).
 * The answer is by case, then template, then file.
 */
export function scaffoldEveryTemplate(): Record<string, Record<string, Record<string, string>>> {
  const outputs: Record<string, Record<string, Record<string, string>>> = {};
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'plinth-scaffold-'));
  try {
    for (const [caseName, route, withActions] of [
      ['actions', '/api/v1', true],
      ['empty', '/', false],
    ] as const) {
      outputs[caseName] = {};
      for (const [index, template] of TEMPLATE_NAMES.entries()) {
        const name = `${template.replace(/-ts$/, '')}-svc`;
        const service: CustomService = { variable: `CS_${index + 1}`, name, template, port: 4100 + index, route };
        const base = `http://${name}:${service.port}${route === '/' ? '' : route}`;
        const actions = withActions ? metadata(() => base) : { customTypes: {}, actions: [] };
        const servicesDir = path.join(root, caseName);
        const [result] = scaffoldServices([service], servicesDir, actions, { SERVICE_BASE: base });
        outputs[caseName][template] = filesOf(result.folder);
      }
    }
  } finally {
    fs.rmSync(root, { recursive: true, force: true });
  }
  return outputs;
}
