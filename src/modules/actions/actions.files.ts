import { Kind, parse, print, type DefinitionNode, type FieldDefinitionNode, type InputValueDefinitionNode, type StringValueNode } from 'graphql';
import type { HasuraMetadata, MetadataFiles } from '../../platform/metadata';
import { MetadataFilesError, toYaml, yaml as loadYaml } from '../../platform/metadata-files';
import type { ActionEntry, CustomField, CustomObject, CustomTypes } from './actions.metadata';

/**
 * Actions in Hasura's CLI layout: `actions.graphql` holds the SDL (custom types, and the actions
 * as fields of `type Mutation` / `type Query`), `actions.yaml` the rest (kind, handler, headers,
 * forward_client_headers, timeout, permissions, comment) and the names of the custom types.
 */
export const ACTIONS_GRAPHQL = 'actions.graphql';
export const ACTIONS_YAML = 'actions.yaml';

const quoted = (text: string | null | undefined, indent = '') => (text ? `${indent}${JSON.stringify(text)}\n` : '');

function fieldLines(fields: CustomField[]): string {
  return fields.map((field) => `${quoted(field.description, '  ')}  ${field.name}: ${field.type}`).join('\n');
}

/** The SDL of the actions and custom types, as `hasura metadata export` writes actions.graphql. */
export function actionsSdl(actions: readonly ActionEntry[], types: CustomTypes): string {
  const blocks: string[] = [];
  for (const root of ['Mutation', 'Query'] as const) {
    const fields = actions
      .filter((action) => (action.definition.type ?? 'mutation') === root.toLowerCase())
      .map((action) => {
        const list = action.definition.arguments ?? [];
        // One line unless an argument has a description to show above it.
        const args = list.some((argument) => argument.description)
          ? `(\n${list.map((argument) => `${quoted(argument.description, '    ')}    ${argument.name}: ${argument.type}`).join('\n')}\n  )`
          : list.length
            ? `(${list.map((argument) => `${argument.name}: ${argument.type}`).join(', ')})`
            : '';
        return `${quoted(action.comment, '  ')}  ${action.name}${args}: ${action.definition.output_type}`;
      });
    if (fields.length) blocks.push(`type ${root} {\n${fields.join('\n')}\n}`);
  }
  for (const item of types.enums ?? []) {
    const values = item.values.map((value) => `${quoted(value.description, '  ')}  ${value.value}${value.is_deprecated ? ' @deprecated' : ''}`);
    blocks.push(`${quoted(item.description)}enum ${item.name} {\n${values.join('\n')}\n}`);
  }
  for (const item of types.input_objects ?? []) blocks.push(`${quoted(item.description)}input ${item.name} {\n${fieldLines(item.fields)}\n}`);
  for (const item of types.objects ?? []) blocks.push(`${quoted(item.description)}type ${item.name} {\n${fieldLines(item.fields)}\n}`);
  for (const item of types.scalars ?? []) blocks.push(`${quoted(item.description)}scalar ${item.name}`);
  return blocks.length ? `${blocks.join('\n\n')}\n` : '';
}

const description = (node: { description?: StringValueNode }) => (node.description ? { description: node.description.value } : {});

function fieldsOf(nodes: readonly (FieldDefinitionNode | InputValueDefinitionNode)[] | undefined): CustomField[] {
  return (nodes ?? []).map((node) => ({ name: node.name.value, type: print(node.type), ...description(node) }));
}

interface ParsedSdl {
  types: Required<CustomTypes>;
  fields: Map<string, { type: 'mutation' | 'query'; node: FieldDefinitionNode }>;
}

function parseSdl(text: string): ParsedSdl {
  let definitions: readonly DefinitionNode[];
  try {
    definitions = text.trim() === '' ? [] : parse(text, { noLocation: false }).definitions;
  } catch (error) {
    throw new MetadataFilesError(`${ACTIONS_GRAPHQL} is not valid GraphQL: ${(error as Error).message.split('\n')[0]}`);
  }
  const types: Required<CustomTypes> = { scalars: [], enums: [], input_objects: [], objects: [] };
  const fields: ParsedSdl['fields'] = new Map();
  for (const definition of definitions) {
    switch (definition.kind) {
      case Kind.OBJECT_TYPE_DEFINITION:
      case Kind.OBJECT_TYPE_EXTENSION: {
        const name = definition.name.value;
        if (name === 'Mutation' || name === 'Query') {
          for (const field of definition.fields ?? []) {
            if (fields.has(field.name.value)) throw new MetadataFilesError(`${ACTIONS_GRAPHQL}: the action ${field.name.value} is defined twice`);
            fields.set(field.name.value, { type: name === 'Mutation' ? 'mutation' : 'query', node: field });
          }
        } else if (definition.kind === Kind.OBJECT_TYPE_DEFINITION) {
          const object: CustomObject = { name, ...description(definition), fields: fieldsOf(definition.fields) };
          types.objects.push(object);
        } else {
          throw new MetadataFilesError(`${ACTIONS_GRAPHQL}: "extend type ${name}" extends no type of this file`);
        }
        break;
      }
      case Kind.INPUT_OBJECT_TYPE_DEFINITION:
        types.input_objects.push({ name: definition.name.value, ...description(definition), fields: fieldsOf(definition.fields) });
        break;
      case Kind.ENUM_TYPE_DEFINITION:
        types.enums.push({
          name: definition.name.value,
          ...description(definition),
          values: (definition.values ?? []).map((value) => ({
            value: value.name.value,
            ...description(value),
            ...(value.directives?.some((directive) => directive.name.value === 'deprecated') ? { is_deprecated: true } : {}),
          })),
        });
        break;
      case Kind.SCALAR_TYPE_DEFINITION:
        types.scalars.push({ name: definition.name.value, ...description(definition) });
        break;
      default:
        throw new MetadataFilesError(
          `${ACTIONS_GRAPHQL}: a ${definition.kind} cannot be part of the actions (only types, inputs, enums, scalars and the Mutation and Query fields)`,
        );
    }
  }
  return { types, fields };
}

/** The actions' files: written from and read into the `actions` and `custom_types` keys. */
export const actionsFiles: MetadataFiles = {
  write(metadata: HasuraMetadata): Record<string, string> {
    const actions = (metadata.actions ?? []) as ActionEntry[];
    const types = (metadata.custom_types ?? {}) as CustomTypes;
    const yaml = {
      actions: actions.map((action) => {
        const {
          arguments: _arguments,
          output_type: _output,
          type: _type,
          kind,
          handler,
          forward_client_headers,
          headers,
          timeout,
          ...rest
        } = action.definition;
        // One order and the defaults filled in, whichever way the metadata came: files compare equal when they mean the same.
        const definition = {
          kind: kind ?? 'synchronous',
          handler,
          ...(forward_client_headers !== undefined ? { forward_client_headers } : {}),
          ...(headers?.length ? { headers } : {}),
          ...(timeout !== undefined ? { timeout } : {}),
          ...rest,
        };
        return {
          name: action.name,
          definition,
          ...(action.comment ? { comment: action.comment } : {}),
          ...(action.permissions?.length ? { permissions: action.permissions } : {}),
        };
      }),
      custom_types: {
        enums: (types.enums ?? []).map((item) => ({ name: item.name })),
        input_objects: (types.input_objects ?? []).map((item) => ({ name: item.name })),
        objects: (types.objects ?? []).map((item) => ({ name: item.name, ...(item.relationships?.length ? { relationships: item.relationships } : {}) })),
        scalars: (types.scalars ?? []).map((item) => ({ name: item.name })),
      },
    };
    return { [ACTIONS_GRAPHQL]: actionsSdl(actions, types), [ACTIONS_YAML]: toYaml(yaml) };
  },

  read(read, metadata): void {
    const yamlText = read(ACTIONS_YAML);
    const sdlText = read(ACTIONS_GRAPHQL) ?? '';
    if (yamlText === undefined && sdlText.trim() === '') return;
    let yaml: unknown;
    try {
      yaml = loadYaml().parse(yamlText ?? '') ?? {};
    } catch (error) {
      throw new MetadataFilesError(`${ACTIONS_YAML} is not valid YAML: ${(error as Error).message.split('\n')[0]}`);
    }
    if (yaml === null || typeof yaml !== 'object' || Array.isArray(yaml))
      throw new MetadataFilesError(`${ACTIONS_YAML} must be a mapping with actions and custom_types`);
    const entries = (yaml as { actions?: unknown }).actions ?? [];
    if (!Array.isArray(entries)) throw new MetadataFilesError(`${ACTIONS_YAML}: actions must be a list`);
    const { types, fields } = parseSdl(sdlText);
    const actions = entries.map((raw: unknown, index) => {
      const entry = raw as Partial<ActionEntry> | null;
      if (entry === null || typeof entry !== 'object' || typeof entry.name !== 'string')
        throw new MetadataFilesError(`${ACTIONS_YAML}: action ${index + 1} needs a name`);
      const field = fields.get(entry.name);
      if (!field) throw new MetadataFilesError(`${ACTIONS_YAML}: the action ${entry.name} has no field in type Mutation or Query of ${ACTIONS_GRAPHQL}`);
      fields.delete(entry.name);
      const definition = entry.definition !== null && typeof entry.definition === 'object' ? entry.definition : {};
      const action: Record<string, unknown> = {
        ...entry,
        definition: {
          ...definition,
          type: field.type,
          arguments: fieldsOf(field.node.arguments),
          output_type: print(field.node.type),
        },
      };
      if (action.comment === undefined && field.node.description) action.comment = field.node.description.value;
      return action;
    });
    const [orphan] = fields.keys();
    if (orphan !== undefined) throw new MetadataFilesError(`${ACTIONS_GRAPHQL}: the action ${orphan} has no entry in ${ACTIONS_YAML} (its handler)`);
    if (actions.length) metadata.actions = actions;
    // The relationships of object types are kept in the YAML (Hasura's CLI layout), beside their names.
    const listed = (yaml as { custom_types?: { objects?: unknown } }).custom_types?.objects;
    for (const entry of Array.isArray(listed) ? (listed as { name?: unknown; relationships?: unknown }[]) : []) {
      const object = types.objects.find((item) => item.name === entry?.name);
      if (object && entry.relationships !== undefined) object.relationships = entry.relationships as CustomObject['relationships'];
    }
    const present = Object.fromEntries(Object.entries(types).filter(([, list]) => list.length > 0));
    if (Object.keys(present).length) metadata.custom_types = present;
  },
};
