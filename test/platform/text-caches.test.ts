import { LRUCache } from 'lru-cache';
import { countTakenIn, textCacheEntriesTakenIn } from '../../src/platform/text-caches';

describe('countTakenIn', () => {
  it('counts each entry a cache takes in, not the ones it finds', () => {
    const cache = new LRUCache<string, string>({ maxSize: 1000, sizeCalculation: countTakenIn((value: string) => value.length) });
    const before = textCacheEntriesTakenIn();
    cache.set('{ a }', 'document a');
    cache.set('{ b }', 'document b');
    expect(textCacheEntriesTakenIn()).toBe(before + 2);
    for (let hit = 0; hit < 10; hit++) expect(cache.get('{ a }')).toBe('document a');
    expect(textCacheEntriesTakenIn()).toBe(before + 2);
    // Still sized as the function says.
    expect(cache.calculatedSize).toBe(20);
  });
});
