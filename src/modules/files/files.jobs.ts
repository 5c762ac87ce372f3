import type { JobDefinition } from '../../platform/jobs';
import type { FilesServices } from './files.services';
import { FILE_PROCESSING_QUEUE } from './files.service';

/** The processing job of each upload (the content's own problems end it as FAILED, without retries). */
export function filesJobs({ processing }: FilesServices): JobDefinition<{ fileId: string }>[] {
  return [
    {
      queue: FILE_PROCESSING_QUEUE,
      // Images up to FILES_MAX_BYTES decode in well under a minute even on a busy machine.
      settings: { timeoutSeconds: 120 },
      work: async ({ fileId }, job) => processing.process(fileId, job.signal),
    },
  ];
}
