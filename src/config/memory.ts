import type { Area } from './area';
import type { Environment } from './environment';
import { boolean, integer } from './validators';

export const memoryVariables = {
  PLINTH_IDLE_COLLECTION_MS: integer(0, 3_600_000)
    .refine((value) => value === 0 || value >= 1000, { error: 'must be 0 (off) or at least 1000' })
    // Off by default: the first seconds of a burst after a quiet spell cost more CPU (docs/decisions.md).
    .default(0)
    .describe(
      'how often (at least `1000`) the process checks whether its event loop went quiet; after activity (requests, jobs, the start-up) a quiet spell gets two full collections six seconds apart, which give the garbage and the grown young generation back to the system (idle at about 110-125 MiB instead of 150-300), at the price of more CPU per request in the first seconds of the next burst; `0` (the default) never; `5000` is the measured setting',
    ),
  // On by default: once, when the server first goes quiet, it gives back what start-up used (docs/decisions.md).
  PLINTH_STARTUP_COLLECTION: boolean
    .default(true)
    .describe(
      "when `PLINTH_IDLE_COLLECTION_MS` is `0`: once, when the server first goes quiet after start-up (checked every second), two full collections six seconds apart give back the start-up's garbage and grown young generation (about 30 MiB: 146 -> 115 MiB resident, about 8 s after a quiet start), after which a quiet spell of 15 s or more gets the same two collections only when resident memory is more than 1.25 times what the start-up's left (a burst of hostile input or a load test: its garbage is given back within half a minute of the quiet; ordinary traffic, and the short gaps between its bursts, pay nothing), and a busy process past 1.75 times that size collects every 10 s at most while its caches keyed by the client's text keep taking in new texts (hostile input; ordinary load, which repeats its texts, never pays these collections)",
    ),
};

export const memory = {
  name: 'memory',
  title: 'Memory',
  variables: memoryVariables,
  settings: (values: Environment) => ({
    idleCollectionMs: values.PLINTH_IDLE_COLLECTION_MS,
    startUpCollection: values.PLINTH_STARTUP_COLLECTION,
  }),
} satisfies Area;
