import type { CustomService } from '../../../config';

/** An action routed to a scaffolded service, with what its handler's code needs. */
export interface ScaffoldAction {
  name: string;
  /** The kebab-case path segment (spec 1 §2.1). */
  path: string;
  arguments: { name: string; type: string; tsType: string }[];
  outputType: string;
  outputTsType: string;
  /** A value that fits the output type, answered until the handler is written. */
  placeholder: unknown;
}

/** What a template is filled in from. */
export interface ScaffoldContext {
  service: CustomService;
  actions: ScaffoldAction[];
  /** TypeScript declarations of the custom types (types.ts). */
  typeDeclarations: string;
}

/** The values of a template's `{{name}}` placeholders. */
export type TemplateValues = Record<string, string>;

/*
 * Lists (one entry per action or argument) are built here rather than repeated in the template
 * files: how their entries are joined, and what an empty list leaves in the file, differ from
 * one file to the next.
 */

const capitalized = (name: string) => `${name[0].toUpperCase()}${name.slice(1)}`;
const handlerFunction = (action: ScaffoldAction) => `handle${capitalized(action.name)}`;

/** The values every template has: the service's declaration and the actions routed to it. */
export function serviceValues(context: ScaffoldContext): TemplateValues {
  const { service, actions } = context;
  const routePrefix = service.route === '/' ? '' : service.route;
  return {
    variable: service.variable,
    name: service.name,
    template: service.template,
    port: String(service.port),
    route: service.route,
    routePrefix,
    /** A string literal in TypeScript, Python and Go alike. */
    routePrefixLiteral: JSON.stringify(routePrefix),
    actionList: actions.length ? actions.map((action) => `\`${action.name}\``).join(', ') : 'none yet (add a handler per action under the route)',
  };
}

/** The Node templates' values (src/types.ts and src/handlers/index.ts). */
export function nodeValues(context: ScaffoldContext): TemplateValues {
  const { actions } = context;
  return {
    typeDeclarations: context.typeDeclarations,
    handlerImports: `${actions.map((action) => `import { ${handlerFunction(action)} } from './${action.path}';`).join('\n')}${actions.length ? '\n\n' : ''}`,
    handlerEntries: actions.map((action) => `  '${action.path}': ${handlerFunction(action)},`).join('\n'),
  };
}

/** The values of a Node template's handler file for one action (src/handlers/[action].ts). */
export function nodeActionValues(action: ScaffoldAction): TemplateValues {
  const outputName = action.outputTsType.replace(/ \| null$/, '').replace(/\[\]$/, '');
  const imported = /^[A-Z]\w*$/.test(outputName) ? outputName : undefined;
  const argumentTypes = action.arguments.map((argument) => argument.tsType).join(' ');
  const typeNames = [...new Set([imported, ...(argumentTypes.match(/\b[A-Z]\w*\b/g) ?? [])].filter((name): name is string => !!name))];
  return {
    typeImports: typeNames.length ? `import type { ${typeNames.join(', ')} } from '../types';\n\n` : '',
    argsType: `${capitalized(action.name)}Args`,
    argumentFields: action.arguments.map((argument) => `  ${argument.name}${argument.type.endsWith('!') ? '' : '?'}: ${argument.tsType};`).join('\n'),
    actionName: action.name,
    handlerFunction: handlerFunction(action),
    outputType: action.outputType,
    outputTsType: action.outputTsType,
    placeholderJson: `${JSON.stringify(action.placeholder)}`,
  };
}

/** The fastapi template's values: a function per action in main.py, and the table of them. */
export function fastapiValues(context: ScaffoldContext): TemplateValues {
  const { actions } = context;
  return {
    handlerFunctions: actions
      .map(
        (action) => `
async def ${action.name}(args: dict, session: dict):
    """The ${action.name} action; the answer must fit ${action.outputType}."""
    # TODO: the business logic.
    return ${pythonLiteral(action.placeholder)}
`,
      )
      .join(''),
    handlerDict: `{${actions.map((action) => `"${action.path}": ${action.name}`).join(', ')}}`,
  };
}

/** The gin template's values: an entry per action in main.go's table of handlers. */
export function ginValues(context: ScaffoldContext): TemplateValues {
  return {
    handlerEntries: context.actions
      .map(
        (action) =>
          `\t// ${action.name}: the answer must fit ${action.outputType}. TODO: the business logic.\n` +
          `\t"${action.path}": func(request envelope) (any, error) { return ${goLiteral(action.placeholder)}, nil },`,
      )
      .join('\n'),
  };
}

function pythonLiteral(value: unknown): string {
  return JSON.stringify(value)
    .replace(/\bnull\b/g, 'None')
    .replace(/\btrue\b/g, 'True')
    .replace(/\bfalse\b/g, 'False');
}

function goLiteral(value: unknown): string {
  if (value === null || value === undefined) return 'nil';
  if (Array.isArray(value)) return '[]any{}';
  if (typeof value === 'object')
    return `gin.H{${Object.entries(value)
      .map(([key, item]) => `${JSON.stringify(key)}: ${goLiteral(item)}`)
      .join(', ')}}`;
  return JSON.stringify(value);
}
