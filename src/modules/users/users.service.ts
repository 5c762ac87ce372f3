import { DEFAULT_SOURCE_ACCOUNT } from '../../platform/row-filter';
import type { Logger } from 'pino';
import { QueryFailedError, type Repository } from 'typeorm';
import type { PasswordHasher } from '../../common/passwords';
import { fieldErrors } from '../../common/validation';
import type { EventPublisher } from '../../platform/pubsub';
import type { SignUpPolicy } from '../auth/sign-up-policy.service';
import type { User } from './user.entity';
import { RegisterUserInput, type RegisterUserOutput, type UserInfo } from './users.types';

/** Published with the new user's UserInfo after a registration commits. */
export const USER_REGISTERED = 'USER_REGISTERED';

const EMAIL_INDEX = 'users_email_lower_key';

export class UsersService {
  constructor(
    private readonly users: Repository<User>,
    private readonly events: EventPublisher,
    /** The auth service's: registerUser is a sign-up like any other. */
    private readonly signUps: SignUpPolicy,
    private readonly passwords: PasswordHasher,
    private readonly logger: Logger,
  ) {}

  /**
   * Creates an account, under the sign-up policy. Every failure is an answer with success=false
   * and changes nothing: sign-up disabled (SIGNUP_DISABLED, field "general"), invalid fields, a
   * breached password, an e-mail already registered (decided by the unique index, so two
   * simultaneous registrations cannot both succeed), or an unexpected error (field "general").
   */
  async registerUser(raw: unknown): Promise<RegisterUserOutput> {
    if (!this.signUps.isOpen()) {
      const message = 'Sign up is disabled';
      return { success: false, message, errors: [{ field: 'general', message, code: 'SIGNUP_DISABLED' }], error_code: 'SIGNUP_DISABLED' };
    }
    const input = normalise(raw);
    const errors = await fieldErrors(input);
    if (!errors.some((error) => error.field === 'password') && this.signUps.passwordLength(input.password)) {
      const { minLength, maxLength } = this.signUps.passwordBounds;
      errors.push({ field: 'password', message: `password must be between ${minLength} and ${maxLength} characters`, code: 'INVALID_LENGTH' });
    }
    // Only a password that could be used is sent to the breach check.
    if (errors.length === 0 && (await this.signUps.isBreached(input.password))) {
      errors.push({ field: 'password', message: this.signUps.breachedPasswordMessage, code: 'BREACHED_PASSWORD' });
    }
    if (errors.length > 0) {
      const order = Object.keys(input);
      errors.sort((a, b) => order.indexOf(a.field) - order.indexOf(b.field));
      return { success: false, message: 'Validation failed', errors, error_code: 'VALIDATION_ERROR' };
    }

    try {
      const user = this.users.create({
        email: input.email.toLowerCase(),
        passwordHash: await this.passwords.hash(input.password),
        name: input.name,
        company: input.company ?? null,
        emailVerified: false,
      });
      await this.users.insert(user);
      const info = toUserInfo(user);
      // registerUser makes accounts in the default source account (the column's default).
      this.events.publish(USER_REGISTERED, { ...info, source_account_id: DEFAULT_SOURCE_ACCOUNT });
      return { success: true, message: 'User registered successfully', user: info };
    } catch (error) {
      if (isUniqueViolation(error, EMAIL_INDEX)) {
        return {
          success: false,
          message: 'This e-mail address is already registered',
          errors: [{ field: 'email', message: 'This e-mail address is already registered', code: 'ALREADY_EXISTS' }],
          error_code: 'EMAIL_ALREADY_REGISTERED',
        };
      }
      this.logger.error({ err: error }, 'registerUser failed unexpectedly');
      return {
        success: false,
        message: 'Registration failed',
        errors: [{ field: 'general', message: 'Registration failed unexpectedly; please try again', code: 'INTERNAL_ERROR' }],
        error_code: 'INTERNAL_ERROR',
      };
    }
  }
}

export function toUserInfo(user: Pick<User, 'id' | 'email' | 'name' | 'emailVerified'>): UserInfo {
  return { id: user.id, email: user.email, name: user.name, email_verified: user.emailVerified };
}

/** Copies the known fields of untrusted input (GraphQL or an engine's envelope), trimming text. */
function normalise(raw: unknown): RegisterUserInput {
  const source = (raw !== null && typeof raw === 'object' ? raw : {}) as Record<string, unknown>;
  const input = new RegisterUserInput();
  input.email = trim(source.email) as string;
  input.password = source.password as string; // passwords are taken exactly as typed
  input.name = trim(source.name) as string;
  input.company = optionalText(source.company);
  return input;
}

export const trim = (value: unknown): unknown => (typeof value === 'string' ? value.trim() : value);

/** A trimmed optional text field, blank meaning none. */
export function optionalText(value: unknown): string | null | undefined {
  const trimmed = trim(value);
  return trimmed === '' ? null : (trimmed as string | null | undefined);
}

function isUniqueViolation(error: unknown, constraint: string): boolean {
  if (!(error instanceof QueryFailedError)) return false;
  const driverError = error.driverError as { code?: string; constraint?: string };
  return driverError.code === '23505' && driverError.constraint === constraint;
}
