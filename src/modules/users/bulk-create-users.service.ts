import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import type { DataSource, EntityManager } from 'typeorm';
import { MAIL_ADDRESS } from '../../common/mail-address';
import { sha256 } from '../../common/sha256';
import { fieldErrors } from '../../common/validation';
import type { Config } from '../../config';
import type { Mailer } from '../../platform/mail/mailer';
import { authUrl } from '../../platform/urls';
import { optionalText, toUserInfo, trim } from './users.service';
import { type BulkCreateUsersOutput, CreateUserInput, type UserCreationResult } from './users.types';

/** The auth service's landing of an invitation link (src/modules/auth: it leads to setting a password). */
export const INVITATION_PATH = '/invitations/accept';

export interface BulkCreateSettings {
  maxUsers: number;
  invitationTtlSeconds: number;
}

interface CreatedRow {
  id: string;
  email: string;
  name: string;
  email_verified: boolean;
}

/**
 * bulkCreateUsers: accounts without a password, created by an administrator. Each entry
 * succeeds or fails on its own (invalid fields, an address already registered, or one given
 * twice in the batch); the valid ones are written with one INSERT, in one transaction with their
 * invitations and invitation mails, so a batch that fails unexpectedly creates and sends nothing.
 */
export class BulkUserCreation {
  constructor(
    private readonly dataSource: DataSource,
    private readonly mailer: Mailer,
    private readonly config: Pick<Config, 'auth'>,
    private readonly settings: BulkCreateSettings,
    private readonly logger: Logger,
  ) {}

  async bulkCreateUsers(raw: unknown): Promise<BulkCreateUsersOutput> {
    const source = (raw !== null && typeof raw === 'object' ? raw : {}) as Record<string, unknown>;
    if (!Array.isArray(source.users)) return refused('users', 'users must be a list', 'INVALID_FORMAT', 0);
    const { maxUsers } = this.settings;
    if (source.users.length > maxUsers) {
      const message = `users must hold at most ${maxUsers} entries (ACTIONS_BULK_CREATE_MAX_USERS)`;
      return refused('users', message, 'INVALID_LENGTH', source.users.length);
    }
    const sendInvitations = source.send_invitations === true;

    const results: UserCreationResult[] = [];
    const valid = new Map<string, { input: CreateUserInput; index: number }>();
    for (const [index, entry] of source.users.entries()) {
      const input = normalise(entry);
      const email = typeof input.email === 'string' ? input.email : '';
      results.push({ email, success: false, user: null, error: null });
      const errors = await fieldErrors(input);
      if (errors.length > 0) {
        results[index].error = errors.map((error) => error.message).join('; ');
        continue;
      }
      const key = email.toLowerCase();
      // validator's isEmail admits a few forms (quoted local parts) a mail header may not carry.
      if (sendInvitations && !MAIL_ADDRESS.test(key)) {
        results[index].error = 'An invitation cannot be sent to this address';
        continue;
      }
      if (valid.has(key)) {
        results[index].error = 'This e-mail address appears earlier in the batch';
        continue;
      }
      valid.set(key, { input, index });
    }

    try {
      const entries = [...valid.values()];
      const created = entries.length === 0 ? [] : await this.dataSource.transaction((manager) => this.insert(manager, entries, sendInvitations));
      const byEmail = new Map(created.map((row) => [row.email, row]));
      for (const [key, { index }] of valid) {
        const row = byEmail.get(key);
        results[index] = row
          ? { email: row.email, success: true, user: toUserInfo({ ...row, emailVerified: row.email_verified }), error: null }
          : { ...results[index], error: 'This e-mail address is already registered' };
      }
    } catch (error) {
      this.logger.error({ err: error, users: source.users.length }, 'bulkCreateUsers failed unexpectedly');
      return {
        success: false,
        message: 'The users could not be created; none was. Please try again',
        created_count: 0,
        failed_count: results.length,
        results: results.map((result) => ({ ...result, success: false, user: null, error: result.error ?? 'Not created: the batch failed' })),
        errors: [{ field: 'general', message: 'The batch failed unexpectedly; please try again', code: 'INTERNAL_ERROR' }],
        error_code: 'INTERNAL_ERROR',
      };
    }

    const createdCount = results.filter((result) => result.success).length;
    return {
      success: true,
      message: `${createdCount} of ${results.length} users created`,
      created_count: createdCount,
      failed_count: results.length - createdCount,
      results,
      errors: null,
    };
  }

  /** One INSERT for every entry; addresses already registered come back as no row (ON CONFLICT). */
  private async insert(manager: EntityManager, entries: { input: CreateUserInput }[], sendInvitations: boolean): Promise<CreatedRow[]> {
    const created: CreatedRow[] = await manager.query(
      `INSERT INTO users (email, name, company)
       SELECT * FROM unnest($1::text[], $2::text[], $3::text[])
       ON CONFLICT DO NOTHING
       RETURNING id, email, name, email_verified`,
      [entries.map(({ input }) => input.email.toLowerCase()), entries.map(({ input }) => input.name), entries.map(({ input }) => input.company ?? null)],
    );
    if (sendInvitations && created.length > 0) await this.invite(manager, created);
    return created;
  }

  private async invite(manager: EntityManager, users: CreatedRow[]): Promise<void> {
    const tickets = users.map(() => randomBytes(32).toString('base64url'));
    await manager.query(
      `INSERT INTO user_invitations (ticket_hash, user_id, expires_at)
       SELECT hash, user_id, now() + make_interval(secs => $3) FROM unnest($1::bytea[], $2::uuid[]) AS t(hash, user_id)`,
      [tickets.map((ticket) => sha256(ticket)), users.map((user) => user.id), this.settings.invitationTtlSeconds],
    );
    // pg-boss takes one job per call; each is part of the transaction, so a rollback sends none.
    for (const [index, user] of users.entries()) {
      const link = authUrl(this.config, INVITATION_PATH, { ticket: tickets[index] });
      await this.mailer.send({ to: user.email, template: 'invite', variables: { email: user.email, link } }, { transaction: manager });
    }
  }
}

function normalise(raw: unknown): CreateUserInput {
  const source = (raw !== null && typeof raw === 'object' ? raw : {}) as Record<string, unknown>;
  const input = new CreateUserInput();
  input.email = trim(source.email) as string;
  input.name = trim(source.name) as string;
  input.company = optionalText(source.company);
  return input;
}

/** A batch refused whole: every entry counts as failed, without a result each (there may be many). */
function refused(field: string, message: string, code: 'INVALID_FORMAT' | 'INVALID_LENGTH', size: number): BulkCreateUsersOutput {
  return {
    success: false,
    message: 'Validation failed',
    created_count: 0,
    failed_count: size,
    results: [],
    errors: [{ field, message, code }],
    error_code: 'VALIDATION_ERROR',
  };
}
