import type { AnyModule } from '../platform/module';
import { authModule } from './auth';
import { eventsModule } from './events';
import { jobsModule } from './jobs';
import { usersModule } from './users';

/**
 * Every module of the product, in creation order: a module may use the services of the modules
 * above it. Adding a module means adding its folder and one line here.
 */
export const MODULES: readonly AnyModule[] = [authModule, usersModule, jobsModule, eventsModule];
