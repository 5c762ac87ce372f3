import { currentSessionLevel, runWithSessionVariables } from '../../src/db/session-variables';
import { GroupCommit } from '../../src/platform/group-commit';

/** A write the test completes by hand: each call is recorded with its items and settled later. */
class ManualWrites {
  readonly calls: { items: number[]; sessionLevel: string; settle(outcome: Error | null): void }[] = [];

  readonly write = (items: number[]): Promise<string[]> =>
    new Promise((resolve, reject) => {
      this.calls.push({
        items,
        sessionLevel: currentSessionLevel(),
        settle: (failure) => (failure ? reject(failure) : resolve(items.map((item) => `outcome of ${item}`))),
      });
    });
}

/** Lets the batch scheduled for this turn of the event loop start. */
const nextTurn = () => new Promise((resolve) => setImmediate(resolve));

function failure(message: string, code?: string): Error {
  return Object.assign(new Error(message), code ? { code } : {});
}

describe('GroupCommit', () => {
  it('writes the items of one turn as one batch and answers each its own outcome', async () => {
    const writes = new ManualWrites();
    const batches = new GroupCommit({ write: writes.write, maxBatch: 100 });
    const answers = Promise.all([1, 2, 3].map((item) => batches.submit(item)));
    await nextTurn();
    expect(writes.calls.map((call) => call.items)).toEqual([[1, 2, 3]]);
    writes.calls[0].settle(null);
    expect(await answers).toEqual(['outcome of 1', 'outcome of 2', 'outcome of 3']);
  });

  it('has at most two batches in flight; what comes meanwhile waits and forms the next batches, up to maxBatch each', async () => {
    const writes = new ManualWrites();
    const batches = new GroupCommit({ write: writes.write, maxBatch: 3 });
    const first = batches.submit(1);
    await nextTurn();
    const second = batches.submit(2);
    await nextTurn();
    const waiting = [3, 4, 5, 6, 7].map((item) => batches.submit(item));
    await nextTurn();
    expect(writes.calls.map((call) => call.items)).toEqual([[1], [2]]);

    writes.calls[1].settle(null);
    expect(await second).toBe('outcome of 2');
    await nextTurn();
    expect(writes.calls.map((call) => call.items)).toEqual([[1], [2], [3, 4, 5]]);
    writes.calls[0].settle(null);
    expect(await first).toBe('outcome of 1');
    await nextTurn();
    expect(writes.calls.map((call) => call.items)).toEqual([[1], [2], [3, 4, 5], [6, 7]]);
    writes.calls[2].settle(null);
    writes.calls[3].settle(null);
    expect(await Promise.all(waiting)).toEqual([3, 4, 5, 6, 7].map((item) => `outcome of ${item}`));
  });

  it('writes a batch again after a deadlock or serialization failure, at most three times, then fails every item of it', async () => {
    const writes = new ManualWrites();
    const failures: [unknown, number][] = [];
    const batches = new GroupCommit({ write: writes.write, maxBatch: 100, onFailure: (error, items) => failures.push([error, items]) });
    const retried = batches.submit(1);
    await nextTurn();
    writes.calls[0].settle(failure('deadlock detected', '40P01'));
    await nextTurn();
    writes.calls[1].settle(failure('could not serialize access', '40001'));
    await nextTurn();
    writes.calls[2].settle(null);
    expect(await retried).toBe('outcome of 1');
    expect(writes.calls.map((call) => call.items)).toEqual([[1], [1], [1]]);

    const lost = Promise.allSettled([batches.submit(2), batches.submit(3)]);
    await nextTurn();
    for (let attempt = 0; attempt < 3; attempt++) {
      writes.calls[3 + attempt].settle(failure('deadlock detected', '40P01'));
      await nextTurn();
    }
    expect(await lost).toEqual([2, 3].map(() => ({ status: 'rejected', reason: expect.objectContaining({ message: 'deadlock detected' }) })));
    expect(writes.calls).toHaveLength(6);
    expect(failures).toEqual([[expect.objectContaining({ code: '40P01' }), 2]]);
  });

  it('fails a batch at once on any other error, and goes on with the next', async () => {
    const writes = new ManualWrites();
    const batches = new GroupCommit({ write: writes.write, maxBatch: 100 });
    const failed = batches.submit(1);
    await nextTurn();
    writes.calls[0].settle(failure('connection terminated'));
    await expect(failed).rejects.toThrow('connection terminated');
    const next = batches.submit(2);
    await nextTurn();
    writes.calls[1].settle(null);
    expect(await next).toBe('outcome of 2');
    expect(writes.calls).toHaveLength(2);
  });

  it('writes outside the session variables of the requests that submitted the items', async () => {
    const writes = new ManualWrites();
    const batches = new GroupCommit({ write: writes.write, maxBatch: 100 });
    const { result, release } = runWithSessionVariables(
      () => ({ 'x-gql-role': 'user', 'x-gql-user-id': 'a' }),
      () => {
        const levelInRequest = currentSessionLevel();
        return { levelInRequest, answer: batches.submit(1) };
      },
    );
    await nextTurn();
    writes.calls[0].settle(null);
    await result.answer;
    release();
    expect(result.levelInRequest).toContain('x-gql-user-id');
    expect(writes.calls[0].sessionLevel).toBe('');
  });
});
