import { GraphQLError, type GraphQLFieldConfig, type GraphQLSchema } from 'graphql';
import { Extensions } from 'type-graphql';
import { UNSTORABLE_TEXT_MESSAGE, unstorableTextPaths } from '../common/text';

/** Field extension of a root field whose service reports unstorable text as field errors itself. */
const CHECKS_OWN_TEXT = 'checksOwnText';

/**
 * Marks an action whose service validates its input with fieldErrors (src/common/validation.ts),
 * which answers unstorable text with an INVALID_FORMAT field error (spec 1 §2.3) rather than a
 * GraphQL error.
 */
export const ChecksOwnText = () => Extensions({ [CHECKS_OWN_TEXT]: true });

/**
 * Every root field (query, mutation, subscription) refuses arguments holding text PostgreSQL
 * cannot store or that is not Unicode, with BAD_USER_INPUT naming the argument, before its
 * resolver runs. Wrapping the root fields once costs nothing on nested fields.
 */
export function guardRootArgumentText(schema: GraphQLSchema): void {
  for (const type of [schema.getQueryType(), schema.getMutationType(), schema.getSubscriptionType()]) {
    for (const field of Object.values(type?.getFields() ?? {})) {
      if (field.args.length === 0 || field.extensions[CHECKS_OWN_TEXT]) continue;
      const config = field as unknown as GraphQLFieldConfig<unknown, unknown>;
      for (const key of ['resolve', 'subscribe'] as const) {
        const original = config[key];
        if (!original) continue;
        config[key] = (source, args, context, info) => {
          const [path] = unstorableTextPaths(args);
          if (path !== undefined) {
            throw new GraphQLError(`Argument "${path}" ${UNSTORABLE_TEXT_MESSAGE}`, {
              extensions: { code: 'BAD_USER_INPUT', argument: path },
            });
          }
          return original(source, args, context, info);
        };
      }
    }
  }
}
