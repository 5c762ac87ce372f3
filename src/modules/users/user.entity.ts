import { Column, CreateDateColumn, Entity, PrimaryGeneratedColumn, UpdateDateColumn } from 'typeorm';

/** A registered user; e-mail addresses are unique regardless of case (index users_email_lower_key). */
@Entity('users')
export class User {
  @PrimaryGeneratedColumn('uuid')
  id!: string;

  @Column('text')
  email!: string;

  /** Null for an invited user who has not set a password yet: no password matches it. */
  @Column('text', { name: 'password_hash', select: false, nullable: true })
  passwordHash!: string | null;

  @Column('text')
  name!: string;

  @Column('text', { nullable: true })
  company!: string | null;

  @Column('boolean', { name: 'email_verified', default: false })
  emailVerified!: boolean;

  @CreateDateColumn({ name: 'created_at', type: 'timestamptz' })
  createdAt!: Date;

  @UpdateDateColumn({ name: 'updated_at', type: 'timestamptz' })
  updatedAt!: Date;
}
