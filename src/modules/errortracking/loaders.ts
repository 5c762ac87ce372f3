import DataLoader from 'dataloader';
import type { GraphQLContext } from '../../graphql/context';
import type { StoredFrame } from './event';
import type { ErrorTrackingServices } from './errortracking.services';
import type { ErrorProject } from './projects.service';

/** The loaders of one request: every nested field of a page costs one query per field, whatever the page's size. */
export interface ErrorTrackingLoaders {
  project: DataLoader<number, ErrorProject | null>;
  /** Frames of an event, by `<project>:<event id>`. */
  frames: DataLoader<string, StoredFrame[]>;
}

const perRequest = new WeakMap<GraphQLContext, ErrorTrackingLoaders>();

export function loadersOf(context: GraphQLContext, services: ErrorTrackingServices): ErrorTrackingLoaders {
  let loaders = perRequest.get(context);
  if (!loaders) {
    loaders = {
      project: new DataLoader(async (ids) => {
        const found = await services.projects.projectsByIds(ids);
        return ids.map((id) => found.get(id) ?? null);
      }),
      frames: new DataLoader(async (keys) => {
        const found = await services.errors.framesOf(keys);
        return keys.map((key) => found.get(key) ?? []);
      }),
    };
    perRequest.set(context, loaders);
  }
  return loaders;
}
