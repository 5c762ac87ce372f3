import type pg from 'pg';
import type { NewsletterConfig } from '../../config';
import { ListMail } from './list-mail';
import type { NewsletterDependencies } from './newsletter.model';
import { poolOf } from '../../db/sql';

/** What each of the newsletter's flows starts from: its dependencies, its settings, the pool and the list mail. */
export abstract class NewsletterFlow {
  protected readonly settings: NewsletterConfig;
  protected readonly pool: pg.Pool;
  protected readonly mail: ListMail;

  constructor(protected readonly deps: NewsletterDependencies) {
    this.settings = deps.config.newsletter;
    this.pool = poolOf(deps.dataSource);
    this.mail = new ListMail(deps);
  }
}
