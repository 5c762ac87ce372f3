import { Command } from 'commander';
import { configurationReference } from '../config/reference';
import { emitGenerated } from './generated-file';

/** `plinth config docs`: the configuration reference, generated from the areas of src/config/. */
export function configCommand(): Command {
  const command = new Command('config').description('the configuration: every variable, by area');
  command
    .command('docs')
    .description('print the configuration reference (docs/configuration.md): variable, default and meaning, by area')
    .option('-o, --output <file>', 'write it to a file instead of standard output')
    .option('--check <file>', 'exit 1 when <file> differs from what the areas give')
    .action((options: { output?: string; check?: string }) =>
      emitGenerated(configurationReference(), options, 'the areas of src/config', 'npm run config:docs'),
    );
  return command;
}
