import fc from 'fast-check';
import { anyJson, nastyString } from './values';

/** A graphql-ws conversation: the subprotocol offered and the frames sent, in order. */
export interface WebSocketCase {
  kind: 'ws';
  protocol: string | null;
  frames: (string | Buffer)[];
}

/** Frames a client may or may not send, well-formed or not, in any order. */
export function webSocketCases(credentialPayloads: fc.Arbitrary<unknown>, subscriptionQueries: fc.Arbitrary<string>): fc.Arbitrary<WebSocketCase> {
  const id = fc.oneof(fc.uuid(), fc.constantFrom('1', '2', ''), nastyString, fc.integer());
  const message = fc.oneof(
    { weight: 3, arbitrary: fc.record({ type: fc.constant('connection_init'), payload: fc.oneof(credentialPayloads, anyJson) }, { requiredKeys: ['type'] }) },
    {
      weight: 3,
      arbitrary: fc.record({
        id,
        type: fc.constant('subscribe'),
        payload: fc.oneof(
          fc.record({ query: subscriptionQueries, variables: anyJson, operationName: fc.oneof(nastyString, fc.constant(null)) }, { requiredKeys: ['query'] }),
          anyJson,
        ),
      }),
    },
    { weight: 1, arbitrary: fc.record({ id, type: fc.constant('complete') }) },
    { weight: 1, arbitrary: fc.record({ type: fc.constantFrom('ping', 'pong'), payload: anyJson }, { requiredKeys: ['type'] }) },
    {
      weight: 1,
      arbitrary: fc.record({ id, type: fc.constantFrom('next', 'error', 'connection_ack', 'start', 'stop', 'connection_terminate', 'ka'), payload: anyJson }),
    },
    { weight: 1, arbitrary: anyJson },
  );
  const frame = fc.oneof(
    { weight: 8, arbitrary: message.map((value) => JSON.stringify(value) ?? 'undefined') },
    { weight: 1, arbitrary: nastyString },
    { weight: 1, arbitrary: fc.uint8Array({ maxLength: 64 }).map((bytes) => Buffer.from(bytes)) },
  );
  return fc.record({
    kind: fc.constant('ws' as const),
    protocol: fc.constantFrom('graphql-transport-ws', 'graphql-transport-ws', 'graphql-transport-ws', 'graphql-ws', 'nonsense', null),
    frames: fc.array(frame, { minLength: 0, maxLength: 6 }),
  });
}
