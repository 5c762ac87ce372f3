/** A UUID in its canonical text form, any version, either case: what PostgreSQL's uuid accepts back. */
export const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
