import type { SessionSettings } from '../../platform/session';
import type { Platform } from '../../platform/module';
import { UrlSigner } from '../../platform/signed-urls';
import { createStorage, type ObjectStorage } from '../../platform/storage';
import { FileProcessing } from './file-processing.service';
import { FilesService } from './files.service';

export interface FilesServices {
  files: FilesService;
  processing: FileProcessing;
  /** The storage (STORAGE_DRIVER) and link signer, shared with the reports module. */
  storage: ObjectStorage;
  signer: UrlSigner;
  sessionSettings: SessionSettings;
}

export function createFilesServices({ config, dataSource, jobs, pubSub, logger }: Platform): FilesServices {
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
}
