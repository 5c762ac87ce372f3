/** Tests run compiled (tsc keeps the decorator metadata type-graphql and TypeORM need). */
module.exports = {
  rootDir: 'dist/test',
  testMatch: ['**/*.test.js'],
  testEnvironment: 'node',
  globalSetup: './support/global-setup.js',
  globalTeardown: './support/global-teardown.js',
  testTimeout: 60000,
  // Three on two cores: test files spend much of their time waiting (on PostgreSQL, child processes,
  // timers), and a third worker fills those gaps (docs/decisions.md, "A fast, steady test suite").
  maxWorkers: 3,
  // ES-module-only dependencies, compiled to CommonJS for Jest (see jest-esm-transform.js).
  transform: { '/node_modules/(@scure|@noble)/.+\\.js$': '<rootDir>/../../jest-esm-transform.js' },
  transformIgnorePatterns: ['/node_modules/(?!(@scure|@noble)/)'],
};
