/**
 * Entries taken in by the caches keyed by the client's text (parsed documents, operation costs,
 * verified tokens), counted for the idle collector. Input that is new at nearly every request
 * (hostile input) keeps filling them, and the entries they evict are garbage V8 keeps until its
 * heap is several times its live data; ordinary traffic repeats its texts and takes in almost none.
 */
let takenIn = 0;

/** A cache's sizeCalculation that also counts each entry it sizes (lru-cache sizes an entry when it is set). */
export function countTakenIn<V, K>(size: (value: V, key: K) => number): (value: V, key: K) => number {
  return (value, key) => {
    takenIn++;
    return size(value, key);
  };
}

/** Entries taken in so far by the caches whose sizes countTakenIn counts. */
export function textCacheEntriesTakenIn(): number {
  return takenIn;
}
