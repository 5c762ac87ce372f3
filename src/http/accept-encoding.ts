/** Whether a request's Accept-Encoding takes gzip (and does not refuse it with q=0). */
export function acceptsGzip(acceptEncoding: string | undefined): boolean {
  return /\bgzip\b(?!;\s*q=0(\.0*)?\s*(,|$))/i.test(acceptEncoding ?? '');
}
