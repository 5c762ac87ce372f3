/** Polls `check` every 50 ms until it holds, or fails after `timeoutMs` naming `what`: waiting for the event, not for a fixed time. */
export async function until(check: () => Promise<boolean> | boolean, timeoutMs = 15_000, what = 'the condition'): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`${what} did not hold within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}
