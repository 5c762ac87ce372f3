import { IsEmail, IsNotEmpty, IsOptional, IsString, MaxLength } from 'class-validator';
import { UUIDResolver } from 'graphql-scalars';
import { Field, InputType, Int, ObjectType } from 'type-graphql';
import { FieldError } from '../../common/field-error.types';
import { rule, rules } from '../../common/validation';
import { ADMIN_ROLE, EVERY_ROLE } from '../../common/roles';
import type { RateLimitName } from '../../platform/rate-limits';

/** Registration is sign-up: every role may call it, anonymous included. */
export const REGISTER_USER_ROLES = [EVERY_ROLE];

/** Spec 1 §8's registration limit, and the sign-up limit every sign-up takes (authSignups: the auth module's SIGN_UP_LIMIT). */
export const REGISTRATION_LIMITS: RateLimitName[] = ['registration', 'authSignups'];

/** Creating accounts for others is an administrator's task. */
export const BULK_CREATE_USERS_ROLES = [ADMIN_ROLE];

// The rules of the fields every new account has, shared by registration and bulk creation.
// Within a field they run in order and stop at the first failure.
const emailRules = () =>
  rules(
    IsNotEmpty(rule('REQUIRED_FIELD', 'email is required')),
    IsString(rule('INVALID_FORMAT', 'email must be a string')),
    MaxLength(254, rule('INVALID_LENGTH', 'email must be at most 254 characters')),
    IsEmail({}, rule('INVALID_FORMAT', 'email must be a valid e-mail address')),
  );
const nameRules = () =>
  rules(
    IsNotEmpty(rule('REQUIRED_FIELD', 'name is required')),
    IsString(rule('INVALID_FORMAT', 'name must be a string')),
    MaxLength(200, rule('INVALID_LENGTH', 'name must be at most 200 characters')),
  );
const companyRules = () =>
  rules(
    IsOptional(),
    IsString(rule('INVALID_FORMAT', 'company must be a string')),
    MaxLength(200, rule('INVALID_LENGTH', 'company must be at most 200 characters')),
  );

@InputType({ description: 'A new account' })
export class RegisterUserInput {
  @Field()
  @emailRules()
  email!: string;

  @Field({ description: 'At least AUTH_PASSWORD_MIN_LENGTH characters (8 by default)' })
  @IsNotEmpty(rule('REQUIRED_FIELD', 'password is required'))
  @IsString(rule('INVALID_FORMAT', 'password must be a string'))
  password!: string;

  @Field()
  @nameRules()
  name!: string;

  @Field(() => String, { nullable: true })
  @companyRules()
  company?: string | null;
}

@InputType({ description: 'An account an administrator creates: no password, the user sets one through the invitation' })
export class CreateUserInput {
  @Field()
  @emailRules()
  email!: string;

  @Field()
  @nameRules()
  name!: string;

  @Field(() => String, { nullable: true })
  @companyRules()
  company?: string | null;
}

@InputType()
export class BulkCreateUsersInput {
  @Field(() => [CreateUserInput], { description: 'At most ACTIONS_BULK_CREATE_MAX_USERS (1000 by default)' })
  users!: CreateUserInput[];

  // Spec 1 §2.2: Boolean, default false; null means false.
  @Field(() => Boolean, { nullable: true, defaultValue: false, description: 'Mails each created user a single-use link to set a password (null: no)' })
  send_invitations?: boolean | null;
}

@ObjectType({ description: 'The outcome of one entry of bulkCreateUsers, in input order' })
export class UserCreationResult {
  @Field({ description: 'The address as given (trimmed; lower-cased once created)' })
  email!: string;

  @Field()
  success!: boolean;

  @Field(() => UserInfo, { nullable: true })
  user?: UserInfo | null;

  @Field(() => String, { nullable: true, description: 'Why this entry was not created' })
  error?: string | null;
}

@ObjectType()
export class BulkCreateUsersOutput {
  @Field({ description: 'True when the batch was processed (each entry says whether it was created); false when it was refused whole' })
  success!: boolean;

  @Field()
  message!: string;

  @Field(() => Int)
  created_count!: number;

  @Field(() => Int)
  failed_count!: number;

  @Field(() => [UserCreationResult])
  results!: UserCreationResult[];

  @Field(() => [FieldError], { nullable: true, description: 'Why a refused batch was refused' })
  errors?: FieldError[] | null;

  /** Overall failure code of the handler envelope (spec 1 §2.3); not part of the GraphQL type. */
  error_code?: 'VALIDATION_ERROR' | 'INTERNAL_ERROR';
}

@ObjectType({ description: 'The public view of a user' })
export class UserInfo {
  @Field(() => UUIDResolver)
  id!: string;

  @Field()
  email!: string;

  @Field()
  name!: string;

  @Field()
  email_verified!: boolean;

  /** Not in the schema: the row filter of a subscription's payload (src/platform/row-filter.ts). */
  source_account_id?: string;
}

@ObjectType()
export class RegisterUserOutput {
  @Field()
  success!: boolean;

  @Field(() => UserInfo, { nullable: true })
  user?: UserInfo | null;

  @Field()
  message!: string;

  @Field(() => [FieldError], { nullable: true })
  errors?: FieldError[] | null;

  /** Overall failure code of the handler envelope (spec 1 §2.3); not part of the GraphQL type. */
  error_code?: 'VALIDATION_ERROR' | 'EMAIL_ALREADY_REGISTERED' | 'SIGNUP_DISABLED' | 'INTERNAL_ERROR';
}
