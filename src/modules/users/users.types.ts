import { IsEmail, IsNotEmpty, IsOptional, IsString, MaxLength } from 'class-validator';
import { UUIDResolver } from 'graphql-scalars';
import { Field, InputType, ObjectType } from 'type-graphql';
import { FieldError } from '../../common/field-error.types';
import { rule } from '../../common/validation';
import { EVERY_ROLE } from '../../http/session';

/** Registration is sign-up: every role may call it, anonymous included. */
export const REGISTER_USER_ROLES = [EVERY_ROLE];

@InputType({ description: 'A new account' })
export class RegisterUserInput {
  // Rules run in order and stop at a field's first failure.
  @Field()
  @IsNotEmpty(rule('REQUIRED_FIELD', 'email is required'))
  @IsString(rule('INVALID_FORMAT', 'email must be a string'))
  @MaxLength(254, rule('INVALID_LENGTH', 'email must be at most 254 characters'))
  @IsEmail({}, rule('INVALID_FORMAT', 'email must be a valid e-mail address'))
  email!: string;

  @Field({ description: 'At least AUTH_PASSWORD_MIN_LENGTH characters (8 by default)' })
  @IsNotEmpty(rule('REQUIRED_FIELD', 'password is required'))
  @IsString(rule('INVALID_FORMAT', 'password must be a string'))
  password!: string;

  @Field()
  @IsNotEmpty(rule('REQUIRED_FIELD', 'name is required'))
  @IsString(rule('INVALID_FORMAT', 'name must be a string'))
  @MaxLength(200, rule('INVALID_LENGTH', 'name must be at most 200 characters'))
  name!: string;

  @Field(() => String, { nullable: true })
  @IsOptional()
  @IsString(rule('INVALID_FORMAT', 'company must be a string'))
  @MaxLength(200, rule('INVALID_LENGTH', 'company must be at most 200 characters'))
  company?: string | null;
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
  error_code?: 'VALIDATION_ERROR' | 'EMAIL_ALREADY_REGISTERED' | 'INTERNAL_ERROR';
}
