import { buildSchema, getOperationAST, parse } from 'graphql';
import { OperationExecutor } from '../../src/graphql/compiled-execution';
import { hasRecursiveInputVariable } from '../../src/graphql/recursive-inputs';

const schema = buildSchema(`
  input Int_comparison_exp { _eq: Int _in: [Int!] }
  input item_bool_exp { _and: [item_bool_exp!] _not: item_bool_exp owner: owner_bool_exp id: Int_comparison_exp }
  input owner_bool_exp { items: item_bool_exp id: Int_comparison_exp }
  input page { limit: Int offset: Int }
  type Query { items(where: item_bool_exp, page: page): [Int!]! owners(where: owner_bool_exp): [Int!]! }
`);
schema.getQueryType()!.getFields().items.resolve = (_source, args: { where?: { _and?: { id?: { _eq?: number } }[] } }) =>
  [1, 2, 3].filter((id) => (args.where?._and ?? []).every((part) => part.id?._eq === undefined || part.id._eq === id));

const operationOf = (text: string) => getOperationAST(parse(text))!;

it('tells a variable whose input type reaches itself, directly or through another', () => {
  expect(hasRecursiveInputVariable(schema, operationOf('query ($w: item_bool_exp) { items(where: $w) }'))).toBe(true);
  expect(hasRecursiveInputVariable(schema, operationOf('query ($w: owner_bool_exp) { owners(where: $w) }'))).toBe(true);
  expect(hasRecursiveInputVariable(schema, operationOf('query ($p: page, $n: Int) { items(page: $p) }'))).toBe(false);
  expect(hasRecursiveInputVariable(schema, operationOf('{ items(where: {_and: [{id: {_eq: 2}}]}) }'))).toBe(false);
});

it('runs such an operation through graphql-js at once, not through graphql-jit', async () => {
  const executor = new OperationExecutor({ enabled: true, cacheBytes: 1024 * 1024 });
  const source = 'query ($w: item_bool_exp) { items(where: $w) }';
  const document = parse(source);
  const started = Date.now();
  const result = await executor.execute({
    schema,
    document,
    source,
    operation: getOperationAST(document)!,
    operationName: undefined,
    variables: { w: { _and: [{ id: { _eq: 2 } }] } },
    contextValue: {},
  });
  expect(result).toEqual({ data: { items: [2] } });
  expect(Date.now() - started).toBeLessThan(1000);
  expect(executor.compiledOperations).toBe(0);
});
