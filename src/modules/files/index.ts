import type { SessionSettings } from '../../http/session';
import type { PlinthModule } from '../../platform/module';
import { UrlSigner } from '../../platform/signed-urls';
import { createStorage, type ObjectStorage } from '../../platform/storage';
import { FileProcessing } from './file-processing.service';
import { filesJobs } from './files.jobs';
import { FilesResolver } from './files.resolver';
import { filesActions, filesRoutes } from './files.routes';
import { FilesService } from './files.service';

export interface FilesServices {
  files: FilesService;
  processing: FileProcessing;
  /** The storage (STORAGE_DRIVER) and link signer, shared with the reports module. */
  storage: ObjectStorage;
  signer: UrlSigner;
  sessionSettings: SessionSettings;
}

/** uploadAndProcessFile: storage, processing jobs, signed links, the file query and subscription. */
export const filesModule: PlinthModule<FilesServices> = {
  name: 'files',
  resolvers: [FilesResolver],
  create: ({ config, dataSource, jobs, pubSub, logger }) => {
    const storage = createStorage(config, dataSource);
    const signer = new UrlSigner(config);
    const log = logger.child({ module: 'files' });
    const files = new FilesService(
      dataSource,
      storage,
      jobs,
      pubSub,
      signer,
      { maxBytes: config.files.maxBytes, allowedTypes: config.files.allowedTypes, urlTtlSeconds: config.files.urlTtlSeconds },
      log,
    );
    return {
      files,
      processing: new FileProcessing(files, storage, log),
      storage,
      signer,
      sessionSettings: {
        adminSecret: config.graphql.adminSecret!,
        jwtSecret: config.graphql.jwtSecret!,
        unauthorizedRole: config.graphql.unauthorizedRole,
      },
    };
  },
  routes: (app, services) => filesRoutes(app, services),
  actions: (services) => filesActions(services),
  jobs: (services) => filesJobs(services),
};
