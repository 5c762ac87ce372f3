import fs from 'node:fs';
import { SCAFFOLD_FIXTURE, scaffoldEveryTemplate } from '../support/scaffold-cases';

// The fixture pins what the templates write, byte for byte; a deliberate change of a template
// updates it in the same commit (write scaffoldEveryTemplate()'s answer).
const expected = JSON.parse(fs.readFileSync(SCAFFOLD_FIXTURE, 'utf8')) as Record<string, Record<string, Record<string, string>>>;
let actual: Record<string, Record<string, Record<string, string>>>;

beforeAll(() => {
  actual = scaffoldEveryTemplate();
});

describe.each(Object.keys(expected))('the %s case', (caseName) => {
  it.each(Object.keys(expected[caseName]))('%s writes the same files, byte for byte', (template) => {
    const written = actual[caseName][template];
    expect(Object.keys(written)).toEqual(Object.keys(expected[caseName][template]));
    for (const [file, text] of Object.entries(expected[caseName][template])) expect({ file, text: written[file] }).toEqual({ file, text });
  });
});

it('the fixture covers every template in each case', () => {
  expect(Object.keys(expected).sort()).toEqual(['actions', 'empty']);
  for (const caseName of Object.keys(expected)) expect(Object.keys(actual[caseName]).sort()).toEqual(Object.keys(expected[caseName]).sort());
  expect(Object.keys(expected.actions['express-ts'])).toContain('src/handlers/say-hello.ts');
});
