/**
 * OWASP's minimum memory for each iteration count (its Password Storage Cheat Sheet: five
 * equivalent argon2id settings, 1 lane); from 5 iterations on, 7 MiB. Weaker settings are refused.
 */
export function owaspMinimumMemoryKib(iterations: number): number {
  return [47_104, 19_456, 12_288, 9_216][iterations - 1] ?? 7_168;
}
