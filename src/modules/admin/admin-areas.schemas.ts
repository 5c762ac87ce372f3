import type { ErrorTrackingServices } from '../errortracking/errortracking.services';
import type { EventsServices } from '../events/events.services';
import type { JobsServices } from '../jobs/jobs.services';
import type { NewsletterServices } from '../newsletter/newsletter.services';
import { error } from './admin.schemas';

/** The services of Plinth's own areas the dashboard shows (each reached with modules.get in admin.services.ts). */
export interface AdminAreas {
  errors: ErrorTrackingServices;
  events: EventsServices;
  jobs: JobsServices;
  newsletter: NewsletterServices;
}

/** Every list of the areas' views is paged: at most this many rows a request. */
export const MAX_LIMIT = 100;
export const DEFAULT_LIMIT = 20;
/** Offsets past this are refused: a person pages through recent rows, not through millions. */
export const MAX_OFFSET = 100_000;

export interface Paging {
  limit: number;
  offset: number;
}

export const PAGING_PROPERTIES = {
  limit: { type: 'integer', minimum: 1, maximum: MAX_LIMIT, default: DEFAULT_LIMIT, description: `At most this many (1 to ${MAX_LIMIT})` },
  offset: { type: 'integer', minimum: 0, maximum: MAX_OFFSET, default: 0, description: 'Skips this many first' },
} as const;

/** A page answered with `hasMore` (whether a next page exists). */
export const pageOf = (item: object, extra: Record<string, object> = {}) => ({
  type: 'object',
  properties: {
    items: { type: 'array', items: item },
    limit: { type: 'integer' },
    offset: { type: 'integer' },
    hasMore: { type: 'boolean', description: 'More rows follow this page' },
    ...extra,
  },
  required: ['items', 'limit', 'offset', 'hasMore'],
});

/** A UUID path parameter: anything else is a 400 (INVALID_REQUEST) before any lookup. */
export const UUID_PARAM = { type: 'string', format: 'uuid', description: 'A UUID' } as const;

export const nullable = (type: string, extra: object = {}) => ({ type: [type, 'null'], ...extra });
export const DATE = { type: 'string', format: 'date-time' } as const;
export const NULLABLE_DATE = { type: ['string', 'null'], format: 'date-time' } as const;

export const BAD_INPUT = error('A malformed id, filter or paging value (INVALID_REQUEST, BAD_REQUEST or VALIDATION_ERROR), naming it');
export const NOT_FOUND = (what: string) => error(`No ${what} has this id (NOT_FOUND)`);

/** A page of `items` from `limit + 1` rows (the extra one only tells that more follow). */
export function paged<T>(found: T[], { limit, offset }: Paging): { items: T[]; limit: number; offset: number; hasMore: boolean } {
  return { items: found.slice(0, limit), limit, offset, hasMore: found.length > limit };
}
