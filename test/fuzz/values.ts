import fc from 'fast-check';

/**
 * Values an attacker tries in any text field: control characters, NUL, lone surrogates,
 * injections, paths, formats that parsers disagree on, and sizes at the edges.
 */
const NASTY_STRINGS = [
  '',
  ' ',
  '\u0000',
  'a\u0000b',
  '\ud800',
  'x\udfffy',
  '\ud800x@example.com',
  '\u202e\u200b\ufeff',
  '😀'.repeat(50),
  "' OR 1=1 --",
  '"; DROP TABLE users; --',
  '<script>alert(1)</script>',
  '{{SESSION_VARIABLES}}',
  '${process.env}',
  '../../../../etc/passwd',
  '%00%2e%2e%2f',
  'null',
  'undefined',
  'NaN',
  '-1',
  '1e309',
  '0x7fffffff',
  'true',
  '[]',
  '{}',
  '{"__proto__":{"polluted":1}}',
  'a@b',
  'user@example.com',
  'not-an-email@',
  '00000000-0000-0000-0000-000000000000',
  'ffffffff-ffff-ffff-ffff-ffffffffffff',
  '2026-02-30T25:61:61Z',
  'https://example.com/a?b=c#d',
  'javascript:alert(1)',
  '\r\nX-Injected: 1',
];

/** Text of every kind, from ordinary to hostile to large. */
export const nastyString: fc.Arbitrary<string> = fc.oneof(
  { weight: 3, arbitrary: fc.string({ maxLength: 40 }) },
  { weight: 2, arbitrary: fc.constantFrom(...NASTY_STRINGS) },
  { weight: 1, arbitrary: fc.string({ unit: 'binary', maxLength: 40 }) },
  { weight: 1, arbitrary: fc.string({ unit: 'binary-ascii', maxLength: 40 }) },
  { weight: 1, arbitrary: fc.integer({ min: 250, max: 70_000 }).map((n) => 'x'.repeat(n)) },
  { weight: 1, arbitrary: fc.emailAddress() },
  { weight: 1, arbitrary: fc.uuid() },
);

/** Numbers at and past the edges of 32-bit integers, doubles and JSON. */
export const nastyNumber: fc.Arbitrary<number> = fc.oneof(
  fc.integer(),
  fc.constantFrom(0, -1, 1, 2 ** 31 - 1, 2 ** 31, -(2 ** 31) - 1, 2 ** 53, -(2 ** 53), 1e308, -1e308, 0.5, -0.0),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
);

/** Any JSON value, shallow enough to stay cheap. */
export const anyJson: fc.Arbitrary<unknown> = fc.oneof(
  fc.constant(null),
  fc.boolean(),
  nastyNumber,
  nastyString,
  fc.array(fc.oneof(fc.constant(null), nastyNumber, nastyString), { maxLength: 5 }),
  fc.dictionary(nastyString, fc.oneof(fc.constant(null), nastyNumber, nastyString), { maxKeys: 5 }),
  fc.jsonValue({ maxDepth: 3 }),
);
