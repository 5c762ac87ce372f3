import type { PlinthModule } from '../../platform/module';
import { filesJobs } from './files.jobs';
import { FilesResolver } from './files.resolver';
import { filesActions, filesRoutes } from './files.routes';
import { createFilesServices, type FilesServices } from './files.services';

/** uploadAndProcessFile: storage, processing jobs, signed links, the file query and subscription. */
export const filesModule: PlinthModule<FilesServices> = {
  name: 'files',
  resolvers: [FilesResolver],
  create: (platform) => createFilesServices(platform),
  routes: (app, services) => filesRoutes(app, services),
  actions: (services) => filesActions(services),
  jobs: (services) => filesJobs(services),
};
