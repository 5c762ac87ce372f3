import {
  Kind,
  type DocumentNode,
  type FragmentDefinitionNode,
  type GraphQLField,
  type GraphQLObjectType,
  type GraphQLSchema,
  type SelectionSetNode,
} from 'graphql';

/** The root fields a caller may select (a route's own caller, such as a project's secret key). */
export interface RootFieldRule {
  /** Whether the caller may select this root field. */
  allows(field: GraphQLField<unknown, unknown>): boolean;
  /** Who the caller is and what it may use, for the refusal ("a project's secret key (...)"). */
  caller: string;
}

/**
 * The root fields (`Mutation.generateReport`) of every operation in `document` that `rule` does
 * not allow, followed into fragments at the root (each once) and whatever their aliases. Every
 * operation counts, not only the one a request names: nothing in the document escapes the rule.
 * Meta-fields (`__typename`, introspection) are no one's, and a field the schema lacks is left to
 * validation, which refuses it.
 */
export function refusedRootFields(schema: GraphQLSchema, document: DocumentNode, rule: RootFieldRule): string[] {
  const fragments = new Map<string, FragmentDefinitionNode>();
  for (const definition of document.definitions) {
    if (definition.kind === Kind.FRAGMENT_DEFINITION) fragments.set(definition.name.value, definition);
  }
  const refused = new Set<string>();
  for (const definition of document.definitions) {
    if (definition.kind !== Kind.OPERATION_DEFINITION) continue;
    const type = schema.getRootType(definition.operation);
    if (!type) continue;
    // A list of its own rather than recursion: fragments may nest (or cycle, which validation refuses).
    const pending: SelectionSetNode[] = [definition.selectionSet];
    const seen = new Set<string>();
    for (let selectionSet = pending.pop(); selectionSet; selectionSet = pending.pop()) {
      for (const selection of selectionSet.selections) {
        if (selection.kind === Kind.FIELD) {
          const name = refusedName(type, selection.name.value, rule);
          if (name) refused.add(name);
        } else if (selection.kind === Kind.INLINE_FRAGMENT) {
          pending.push(selection.selectionSet);
        } else if (!seen.has(selection.name.value)) {
          seen.add(selection.name.value);
          const fragment = fragments.get(selection.name.value);
          if (fragment) pending.push(fragment.selectionSet);
        }
      }
    }
  }
  return [...refused];
}

/** `Type.field` when the rule refuses the field. */
function refusedName(type: GraphQLObjectType, name: string, rule: RootFieldRule): string | undefined {
  if (name.startsWith('__')) return undefined;
  const field = type.getFields()[name];
  return field && !rule.allows(field) ? `${type.name}.${name}` : undefined;
}
