import { Field, ObjectType } from 'type-graphql';

/** One problem with one input field; the `errors` entries of spec 1 §2.3. */
@ObjectType('ValidationError', { description: 'A problem with one input field' })
export class FieldError {
  @Field({ description: 'The input field at fault, or "general" for a failure not tied to one field' })
  field!: string;

  @Field()
  message!: string;

  @Field({ description: 'REQUIRED_FIELD, INVALID_LENGTH, INVALID_FORMAT, ALREADY_EXISTS or INTERNAL_ERROR' })
  code!: string;
}
