import {
  getDirectiveValues,
  getVariableValues,
  GraphQLIncludeDirective,
  GraphQLSkipDirective,
  Kind,
  type DocumentNode,
  type FieldNode,
  type FragmentDefinitionNode,
  type GraphQLField,
  type GraphQLObjectType,
  type GraphQLSchema,
  type OperationDefinitionNode,
  type SelectionSetNode,
} from 'graphql';

/** The field extension under which a root field offers its answer as JSON text (rawRootField). */
const RAW_ROOT_FIELD = 'plinthRawJson';

/** The parts of a resolve info that a root field's statement is compiled from. */
export interface OperationParts {
  schema: GraphQLSchema;
  /** The root field's nodes under one response key (merged as GraphQL merges them). */
  fieldNodes: readonly FieldNode[];
  parentType: GraphQLObjectType;
  fragments: Record<string, FragmentDefinitionNode>;
  operation: OperationDefinitionNode;
  /** The operation's variables as graphql-js coerced them. */
  variableValues: Record<string, unknown>;
}

/** What a raw root field is given: those parts, and the request's context. */
export interface RawFieldRequest extends OperationParts {
  contextValue: unknown;
}

/**
 * A root field's answer as the JSON text GraphQL would write for it (the same values, its keys in
 * the document's order), or undefined where it cannot tell (the operation then runs through
 * GraphQL, which gives the answer or the error). It must have no side effect: undefined, or a
 * throw, is followed by the ordinary execution of the whole operation.
 */
export type RawRootField = (request: RawFieldRequest) => Promise<string | undefined>;

/** Offers `answer` as `field`'s raw answer (a module does this on the schema it builds). */
export function offerRawAnswer(field: GraphQLField<unknown, unknown>, answer: RawRootField): void {
  (field as { extensions: GraphQLField<unknown, unknown>['extensions'] }).extensions = { ...field.extensions, [RAW_ROOT_FIELD]: answer };
}

function rawRootField(field: GraphQLField<unknown, unknown> | undefined): RawRootField | undefined {
  const answer = field?.extensions[RAW_ROOT_FIELD];
  return typeof answer === 'function' ? (answer as RawRootField) : undefined;
}

/**
 * The response body of a query whose root fields all offer a raw answer (or are `__typename`):
 * `{"data":{...}}` with each root field's JSON text written as it is, never parsed nor completed
 * by GraphQL. Undefined when a root field offers none, a variable is refused, or a root field
 * gives none: the caller then executes the operation as usual.
 */
export function rawAnswer(
  schema: GraphQLSchema,
  document: DocumentNode,
  operation: OperationDefinitionNode,
  variables: Record<string, unknown> | undefined,
  contextValue: unknown,
): Promise<string | undefined> | undefined {
  const root = schema.getQueryType();
  if (operation.operation !== 'query' || !root || !offeredEverywhere(root, operation.selectionSet, document)) return undefined;
  return answered(schema, root, document, operation, variables, contextValue);
}

/** Whether every field the root selection names (whatever @skip and @include say) is `__typename` or offers a raw answer: checked before anything is coerced. */
function offeredEverywhere(root: GraphQLObjectType, selectionSet: SelectionSetNode, document: DocumentNode, seen = new Set<string>()): boolean {
  const fields = root.getFields();
  return selectionSet.selections.every((selection) => {
    if (selection.kind === Kind.FIELD) return selection.name.value === '__typename' || rawRootField(fields[selection.name.value]) !== undefined;
    if (selection.kind === Kind.INLINE_FRAGMENT) return offeredEverywhere(root, selection.selectionSet, document, seen);
    if (seen.has(selection.name.value)) return true;
    seen.add(selection.name.value);
    const fragment = document.definitions.find((definition) => definition.kind === Kind.FRAGMENT_DEFINITION && definition.name.value === selection.name.value);
    return fragment?.kind === Kind.FRAGMENT_DEFINITION && offeredEverywhere(root, fragment.selectionSet, document, seen);
  });
}

async function answered(
  schema: GraphQLSchema,
  root: GraphQLObjectType,
  document: DocumentNode,
  operation: OperationDefinitionNode,
  variables: Record<string, unknown> | undefined,
  contextValue: unknown,
): Promise<string | undefined> {
  const coerced = getVariableValues(schema, operation.variableDefinitions ?? [], variables ?? {});
  if (coerced.errors) return undefined;
  const variableValues = coerced.coerced;
  const fragments: Record<string, FragmentDefinitionNode> = {};
  for (const definition of document.definitions) if (definition.kind === Kind.FRAGMENT_DEFINITION) fragments[definition.name.value] = definition;
  const grouped = rootFields(root, operation.selectionSet, fragments, variableValues);
  if (!grouped) return undefined;
  const fields = root.getFields();
  const answers: (Promise<string | undefined> | string)[] = [];
  for (const fieldNodes of grouped.values()) {
    const name = fieldNodes[0].name.value;
    if (name === '__typename') {
      answers.push(JSON.stringify(root.name));
      continue;
    }
    const answer = rawRootField(fields[name]);
    if (!answer) return undefined;
    answers.push(answer({ schema, fieldNodes, parentType: root, fragments, operation, variableValues, contextValue }));
  }
  // Run together, as graphql-js runs a query's root fields.
  const texts = await Promise.all(answers);
  let body = '{"data":{';
  let index = 0;
  for (const key of grouped.keys()) {
    const text = texts[index];
    if (text === undefined) return undefined;
    body += `${index++ === 0 ? '' : ','}"${key}":${text}`;
  }
  return `${body}}}`;
}

/**
 * The root selection's fields by response key, in GraphQL's order (collectFields: @skip and
 * @include applied, each fragment spread once); undefined where a fragment's condition is not
 * the root type itself (an interface's or union's conditions are not the root's).
 */
function rootFields(
  root: GraphQLObjectType,
  selectionSet: SelectionSetNode,
  fragments: Record<string, FragmentDefinitionNode>,
  variables: Record<string, unknown>,
): Map<string, FieldNode[]> | undefined {
  const fields = new Map<string, FieldNode[]>();
  const spread = new Set<string>();
  const included = (node: Parameters<typeof getDirectiveValues>[1]) =>
    getDirectiveValues(GraphQLSkipDirective, node, variables)?.if !== true && getDirectiveValues(GraphQLIncludeDirective, node, variables)?.if !== false;
  const visit = (set: SelectionSetNode): boolean => {
    for (const selection of set.selections) {
      if (!included(selection)) continue;
      if (selection.kind === Kind.FIELD) {
        const key = selection.alias?.value ?? selection.name.value;
        const known = fields.get(key);
        if (known) known.push(selection);
        else fields.set(key, [selection]);
        continue;
      }
      const condition = selection.kind === Kind.INLINE_FRAGMENT ? selection.typeCondition : fragments[selection.name.value]?.typeCondition;
      if (condition && condition.name.value !== root.name) return false;
      if (selection.kind === Kind.INLINE_FRAGMENT) {
        if (!visit(selection.selectionSet)) return false;
      } else if (!spread.has(selection.name.value)) {
        spread.add(selection.name.value);
        const fragment = fragments[selection.name.value];
        if (!fragment || !visit(fragment.selectionSet)) return false;
      }
    }
    return true;
  };
  return visit(selectionSet) ? fields : undefined;
}
