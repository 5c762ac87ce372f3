/**
 * Jest's module loader cannot require ES modules, which Node 20 itself loads (require(esm)): the
 * ESM-only packages the server uses (otplib's base32 and hash plugins) are compiled to CommonJS
 * for the tests only, with the TypeScript compiler already installed.
 */
const ts = require('typescript');

module.exports = {
  process(source, filename) {
    const { outputText, sourceMapText } = ts.transpileModule(source, {
      fileName: filename,
      compilerOptions: { module: ts.ModuleKind.CommonJS, target: ts.ScriptTarget.ES2022, allowJs: true, sourceMap: true },
    });
    return { code: outputText, map: sourceMapText };
  },
};
