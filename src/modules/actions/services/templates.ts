import path from 'node:path';
import { fill, renderFolders } from './template-files';
import {
  fastapiValues,
  ginValues,
  nodeActionValues,
  nodeValues,
  serviceValues,
  type ScaffoldAction,
  type ScaffoldContext,
  type TemplateValues,
} from './template-values';

/**
 * The template files, read from the sources at run time (nothing to copy at build time), as the
 * mail templates are. Compiled code runs from dist/src/modules/actions/services, five folders
 * below the package root.
 */
export const TEMPLATES_DIR = path.resolve(__dirname, '..', '..', '..', '..', '..', 'src', 'modules', 'actions', 'services', 'templates');

/** A scaffold template: the folders its files come from, and how its placeholders are filled in. */
interface Template {
  /** Folders of TEMPLATES_DIR; each adds its files (`_common` and `_node` are shared). */
  folders: string[];
  /** The README's last paragraph: how to run the service (placeholders allowed). */
  run: string;
  values(context: ScaffoldContext): TemplateValues;
  /** The values of the files made per action (`[action]` in their path). */
  actionValues?(action: ScaffoldAction): TemplateValues;
}

const PLINTH_STARTS = 'Run it with `plinth start` (it compiles `src/` and starts it beside Plinth), or `npm install && npm run build && npm start`.';

/** The scaffold templates, by the name `CS_<N>` gives. */
export const TEMPLATES: Record<string, Template> = {
  'express-ts': { folders: ['_common', '_node', 'express-ts'], run: PLINTH_STARTS, values: nodeValues, actionValues: nodeActionValues },
  'fastify-ts': { folders: ['_common', '_node', 'fastify-ts'], run: PLINTH_STARTS, values: nodeValues, actionValues: nodeActionValues },
  'nest-ts': {
    folders: ['_common', '_node', 'nest-ts'],
    run: 'Run it with `npm install && npm run build && npm start` (`plinth start` runs express-ts and fastify-ts services only).',
    values: nodeValues,
    actionValues: nodeActionValues,
  },
  fastapi: {
    folders: ['_common', 'fastapi'],
    run: 'Run it with `pip install -r requirements.txt && uvicorn main:app --port {{port}}`.',
    values: fastapiValues,
  },
  gin: { folders: ['_common', 'gin'], run: 'Run it with `go mod tidy && go run .`.', values: ginValues },
};

/** The files of a new service from the template `name` (one of TEMPLATES), by path under its folder. */
export function renderTemplate(name: string, context: ScaffoldContext): Record<string, string> {
  const template = TEMPLATES[name];
  const values = { ...serviceValues(context), ...template.values(context) };
  values.run = fill(template.run, values, `the run line of the ${name} template`);
  const actions = context.actions.map((action) => ({ path: action.path, values: template.actionValues?.(action) ?? {} }));
  return renderFolders(
    template.folders.map((folder) => path.join(TEMPLATES_DIR, folder)),
    values,
    actions,
  );
}
