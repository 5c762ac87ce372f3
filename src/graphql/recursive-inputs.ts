import { getNamedType, isInputObjectType, typeFromAST, type GraphQLInputObjectType, type GraphQLSchema, type OperationDefinitionNode } from 'graphql';

const recursive = new WeakMap<GraphQLInputObjectType, boolean>();

/**
 * Whether a variable of `operation` has an input type that reaches itself, such as the generated
 * `<table>_bool_exp` (`_and: [<table>_bool_exp!]`). graphql-jit generates the coercion of such a
 * variable inline, without end, until the stack overflows (docs/decisions.md), so graphql-js runs
 * these operations.
 */
export function hasRecursiveInputVariable(schema: GraphQLSchema, operation: OperationDefinitionNode): boolean {
  return (operation.variableDefinitions ?? []).some((definition) => {
    const type = getNamedType(typeFromAST(schema, definition.type));
    return isInputObjectType(type) && reachesRecursion(type);
  });
}

function reachesRecursion(type: GraphQLInputObjectType): boolean {
  let found = recursive.get(type);
  if (found === undefined) recursive.set(type, (found = cycleFrom(type, new Set())));
  return found;
}

/** Whether an input object type is met twice along one path of fields from `type`. */
function cycleFrom(type: GraphQLInputObjectType, path: Set<GraphQLInputObjectType>): boolean {
  if (path.has(type)) return true;
  path.add(type);
  const found = Object.values(type.getFields()).some((field) => {
    const fieldType = getNamedType(field.type);
    return isInputObjectType(fieldType) && cycleFrom(fieldType, path);
  });
  path.delete(type);
  return found;
}
