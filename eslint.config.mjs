// Lint: promises handled (type-aware), no import cycles, and the layers (LAYERS) one way.
// Formatting is not checked here.
import { createTypeScriptImportResolver } from 'eslint-import-resolver-typescript';
import importX from 'eslint-plugin-import-x';
import tseslint from 'typescript-eslint';

/** The layers from the ground up: a file imports only from its own layer or those before it. */
const LAYERS = [
  ['src/common'],
  ['src/config'],
  ['src/db'],
  ['src/platform'],
  ['src/graphql'],
  ['src/http'],
  ['src/modules'],
  ['src/apidocs', 'src/cli', 'src/main.ts'],
];

/** One zone per layer: nothing above it may be imported from it (type-only imports included). */
const layerZones = LAYERS.slice(0, -1).map((layer, index) => ({
  target: layer.length === 1 ? layer[0] : layer,
  from: LAYERS.slice(index + 1).flat(),
  message: 'imports run down the layers only (README: Layout and layers)',
}));

/**
 * A module reaches another through the services `create` is given (`modules.get(otherModule)`,
 * the other module's index.ts): its other files are closed to value imports; type-only imports
 * of its public types are fine. `depth` is how far below its module's folder a file sits.
 */
const otherModuleFiles = (depth) => ({
  patterns: [
    {
      regex: `^${'\\.\\./'.repeat(depth + 1)}(?!\\.\\.)[^/]+/.+`,
      allowTypeImports: true,
      message: "a module reaches another only through the services create is given (modules.get(otherModule)); type-only imports of its public types are fine",
    },
  ],
});

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', 'src/modules/actions/services/templates/**'] },
  {
    files: ['src/**/*.ts', 'migrations/**/*.ts', 'test/**/*.ts', 'bench/**/*.ts'],
    languageOptions: {
      parser: tseslint.parser,
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    plugins: { '@typescript-eslint': tseslint.plugin, 'import-x': importX },
    settings: {
      'import-x/extensions': ['.ts'],
      'import-x/parsers': { '@typescript-eslint/parser': ['.ts'] },
      'import-x/resolver-next': [createTypeScriptImportResolver({ project: 'tsconfig.json' })],
    },
    linterOptions: { reportUnusedDisableDirectives: 'error' },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': 'error',
      'import-x/no-cycle': 'error',
    },
  },
  {
    files: ['src/**/*.ts', 'migrations/**/*.ts'],
    rules: {
      '@typescript-eslint/no-explicit-any': 'error',
      'import-x/no-restricted-paths': ['error', { zones: layerZones }],
    },
  },
  // A module's own folder and up to three folders below it.
  ...[0, 1, 2, 3].map((depth) => ({
    files: [`src/modules/*/${'*/'.repeat(depth)}*.ts`],
    rules: { '@typescript-eslint/no-restricted-imports': ['error', otherModuleFiles(depth)] },
  })),
);
