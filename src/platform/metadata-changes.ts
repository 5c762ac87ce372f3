import type { Logger } from 'pino';
import type { PostgresPubSub } from './pubsub';

/** How often an instance compares its metadata version with the database's, besides the announcements. */
const VERSION_POLL_MS = 10_000;

/**
 * Follows a module's metadata as any instance changes it: `reload` (which re-reads only when the
 * stored version is newer) runs at each announcement on `topic`, once at once (a change made
 * before the subscription, or while this instance's LISTEN connection was down) and every 10 s.
 * The returned function stops following.
 */
export async function followMetadataChanges(
  pubSub: PostgresPubSub,
  topic: string,
  reload: () => Promise<void>,
  logger: Logger,
  what: string,
): Promise<() => Promise<void>> {
  const changes = pubSub.subscribe(topic)[Symbol.asyncIterator]();
  const reloadLogged = () => reload().catch((error: unknown) => logger.error({ err: error }, `could not reload the ${what}`));
  const following = (async () => {
    for (let next = await changes.next(); !next.done; next = await changes.next()) await reloadLogged();
  })();
  await reloadLogged();
  const poll = setInterval(() => void reloadLogged(), VERSION_POLL_MS).unref();
  return async () => {
    clearInterval(poll);
    await changes.return?.();
    await following;
  };
}
