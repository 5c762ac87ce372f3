/** What a client is told of an error the server did not expect; the details go to the log. */
export const INTERNAL_ERROR_MESSAGE = 'Internal server error';

/** What a client is told while the database cannot be reached; Retry-After says when to try again. */
export const DATABASE_UNAVAILABLE_MESSAGE = 'The service is temporarily unavailable: try again shortly';
