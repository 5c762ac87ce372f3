import { onAdmin } from './database';

export default async function globalTeardown(): Promise<void> {
  const template = process.env.PLINTH_TEST_TEMPLATE_DATABASE;
  if (template) await onAdmin(`DROP DATABASE IF EXISTS ${template} WITH (FORCE)`);
  await globalThis.plinthTestPostgres?.stop();
}
