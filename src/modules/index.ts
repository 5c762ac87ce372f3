import type { AnyModule } from '../platform/module';
import { actionsModule } from './actions';
import { authModule } from './auth';
import { errorTrackingModule } from './errortracking';
import { eventsModule } from './events';
import { filesModule } from './files';
import { jobsModule } from './jobs';
import { newsletterModule } from './newsletter';
import { paymentsModule } from './payments';
import { reportsModule } from './reports';
import { tablesModule } from './tables';
import { usersModule } from './users';
// Last: it loads the events module, whose resolver's fields would otherwise come before auth's in the schema.
import { adminModule } from './admin';

/**
 * Every module of the product, in creation order: a module may use the services of the modules
 * above it. Adding a module means adding its folder and one line here.
 */
export const MODULES: readonly AnyModule[] = [
  authModule,
  usersModule,
  jobsModule,
  filesModule,
  reportsModule,
  paymentsModule,
  newsletterModule,
  errorTrackingModule,
  eventsModule,
  actionsModule,
  tablesModule,
  adminModule,
];
