import type { ApolloServerPlugin, GraphQLRequestListener } from '@apollo/server';
import type { Metrics } from '../platform/metrics';

/** Apollo plugin counting operations and their error codes. */
export function graphqlMetricsPlugin(metrics: Metrics): ApolloServerPlugin {
  const listener: GraphQLRequestListener<never> = {
    async willSendResponse({ operation, response }) {
      // Only names of operations that parsed and resolved count, so garbage requests share one label.
      const name = operation ? (operation.name?.value ?? '(anonymous)') : '(unresolved)';
      const errors = response.body.kind === 'single' ? (response.body.singleResult.errors ?? []) : [];
      metrics.observeGraphQL(
        name,
        operation?.operation ?? 'unknown',
        errors.map((error) => String(error.extensions?.code ?? 'UNKNOWN')),
      );
    },
  };
  return { requestDidStart: async () => listener };
}
