import { Arg, Authorized, Ctx, Mutation, Query, Resolver, Root, Subscription, type SubscriptionHandlerData } from 'type-graphql';
import { UUIDResolver } from 'graphql-scalars';
import type { GraphQLContext } from '../../graphql/context';
import { ChecksOwnText } from '../../graphql/input-text';
import { AcceptsUploadBody } from '../../graphql/upload-body';
import type { FilesServices } from './files.services';
import { enforceQuota } from '../../graphql/rate-limits';
import { rowVisible } from '../../platform/row-filter';
import { FILE_PROCESSING_UPDATED, FILES_TABLE } from './files.service';
import { FileInfo, FileUploadInput, FileUploadOutput, UPLOAD_FILE_ROLES } from './files.types';

@Resolver()
export class FilesResolver {
  constructor(private readonly services: FilesServices) {}

  @Authorized(UPLOAD_FILE_ROLES)
  @ChecksOwnText()
  @AcceptsUploadBody()
  @Mutation(() => FileUploadOutput, {
    description: 'Stores a file (base64 in file_data, sent as a variable) and queues its processing; invalid input comes back as success=false with errors',
  })
  async uploadAndProcessFile(@Arg('input', () => FileUploadInput) input: FileUploadInput, @Ctx() context: GraphQLContext): Promise<FileUploadOutput> {
    await enforceQuota(context, 'uploads');
    return this.services.files.upload(input, context.session);
  }

  @Authorized(UPLOAD_FILE_ROLES)
  @Query(() => FileInfo, { nullable: true, description: 'A file with its processing state and results; null unless you own it or are an admin' })
  file(@Arg('id', () => UUIDResolver) id: string, @Ctx() context: GraphQLContext): Promise<FileInfo | null> {
    return this.services.files.file(id, context.session);
  }

  @Authorized(UPLOAD_FILE_ROLES)
  @Subscription(() => FileInfo, {
    description: "Each change of a file's processing state: PROCESSING, then COMPLETED or FAILED (its owner and admins only)",
    topics: FILE_PROCESSING_UPDATED,
    topicId: ({ args }: { args: { file_id: string } }) => args.file_id,
    filter: ({ payload, context }: SubscriptionHandlerData<FileInfo, { file_id: string }, GraphQLContext>) =>
      rowVisible(context.session, FILES_TABLE, { ...payload }),
  })
  fileProcessingUpdated(@Arg('file_id', () => UUIDResolver) _fileId: string, @Root() file: FileInfo): FileInfo {
    return file;
  }
}
