import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import Negotiator from 'negotiator';
import { isTooManyRequests, Refusal } from '../../common/refusal';
import { sendError } from '../../http/errors';
import type { ConfirmOutcome } from './newsletter.model';
import type { NewsletterServices } from './newsletter.services';

interface SubscribeBody {
  email?: string;
  name?: string;
  source?: string;
  redirect_to?: string;
}

interface LinkQuery {
  email?: string;
  token?: string;
}

const TAGS = ['newsletter'];
const ENVELOPE = {
  type: 'object',
  properties: { success: { type: 'boolean', const: false }, message: { type: 'string' }, error_code: { type: 'string' } },
  required: ['success', 'message', 'error_code'],
} as const;
const HTML = { type: 'string', description: 'A small HTML page for people' } as const;
const errorResponse = (description: string) => ({
  description,
  content: { 'application/json': { schema: ENVELOPE }, 'text/html': { schema: HTML } },
});
const SUBSCRIBE_BODY = {
  type: 'object',
  properties: {
    email: { type: 'string', maxLength: 320, description: 'The address to subscribe' },
    name: { type: 'string', maxLength: 500 },
    source: { type: 'string', maxLength: 200, description: 'Where the form was (a page, a campaign)' },
  },
} as const;
const LINK_QUERY = {
  type: 'object',
  properties: { email: { type: 'string', maxLength: 320 }, token: { type: 'string', maxLength: 200 } },
} as const;
const ACCEPTED = {
  description: 'Accepted: the same answer whether or not the address is known',
  content: {
    'application/json': {
      schema: { type: 'object', properties: { status: { type: 'string', const: 'pending' }, message: { type: 'string' } }, required: ['status', 'message'] },
    },
    'text/html': { schema: HTML },
  },
};
const ACCEPTED_MESSAGE = 'Thanks! If this address can subscribe, a confirmation link is on its way: open it within 48 hours to start receiving the newsletter.';

/** JSON for clients that send JSON or rank JSON above HTML; pages for the rest (browsers, mail links). */
function wantsJson(request: FastifyRequest): boolean {
  if ((request.headers['content-type'] ?? '').startsWith('application/json')) return true;
  const accept = request.headers.accept;
  return accept !== undefined && new Negotiator({ headers: { accept } }).mediaType(['text/html', 'application/json']) === 'application/json';
}

const ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };
const escape = (value: string) => value.replace(/[&<>"']/g, (character) => ESCAPES[character]);

/** A page: a heading, a paragraph, and maybe a form with one button. */
function page(title: string, text: string, form?: { action: string; button: string; email?: string }): string {
  const formHtml = form
    ? `<form method="post" action="${escape(form.action)}">${
        form.email !== undefined ? `<input type="hidden" name="email" value="${escape(form.email)}">` : ''
      }<button type="submit">${escape(form.button)}</button></form>`
    : '';
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1"><meta name="robots" content="noindex"><title>${escape(title)}</title><style>body{font-family:-apple-system,'Segoe UI',Roboto,Helvetica,Arial,sans-serif;background:#f3f4f6;color:#1f2937;margin:0;padding:48px 16px}main{max-width:520px;margin:auto;background:#fff;border-radius:8px;padding:32px}h1{font-size:22px;margin-top:0}button{background:#2563eb;color:#fff;border:0;border-radius:6px;padding:12px 28px;font-size:16px;font-weight:600;cursor:pointer}</style></head><body><main><h1>${escape(title)}</h1><p>${escape(text)}</p>${formHtml}</main></body></html>`;
}

function sendPage(reply: FastifyReply, status: number, html: string): FastifyReply {
  // Pages hold tokens in their forms: never cached, never framed.
  return reply
    .code(status)
    .type('text/html; charset=utf-8')
    .header('cache-control', 'no-store')
    .header('x-frame-options', 'DENY')
    .header('referrer-policy', 'no-referrer')
    .send(html);
}

/** The newsletter scope's error handler: a refusal as a page for people; JSON clients get the app's answer. */
function answerRefusalsAsPages(error: FastifyError | Refusal, request: FastifyRequest, reply: FastifyReply): FastifyReply {
  if (!(error instanceof Refusal) || wantsJson(request)) throw error;
  reply.headers(error.headers);
  if (isTooManyRequests(error))
    return sendPage(reply, 429, page('Too many attempts', `Please try again in ${Math.ceil(error.retryAfterSeconds / 60)} minutes.`));
  return sendPage(reply, error.status, page(error.status === 503 ? 'The newsletter is unavailable' : 'That did not work', error.message));
}

/** Where the form proxy sends people back: the page they came from, if it is ours or an allowed origin. */
function backUrl(request: FastifyRequest, body: SubscribeBody, services: NewsletterServices, outcome: string): string {
  const allowed = services.allowedOrigins();
  const candidates = [body.redirect_to, request.headers.referer];
  let target = new URL(`${services.publicUrl()}/`);
  for (const candidate of candidates) {
    if (typeof candidate !== 'string' || !URL.canParse(candidate)) continue;
    const url = new URL(candidate);
    if (allowed.includes(url.origin)) {
      target = url;
      break;
    }
  }
  target.searchParams.set('newsletter', outcome);
  target.hash = 'newsletter';
  return target.toString();
}

const CONFIRM_ANSWERS: Record<ConfirmOutcome, { status: number; code: string; title: string; text: string }> = {
  confirmed: {
    status: 200,
    code: 'confirmed',
    title: 'You are subscribed',
    text: 'Thanks for confirming. A welcome mail is on its way, and the newsletter follows every two weeks.',
  },
  'already-confirmed': {
    status: 200,
    code: 'already-confirmed',
    title: 'You are already subscribed',
    text: 'This address was confirmed before: nothing else to do.',
  },
  invalid: {
    status: 400,
    code: 'INVALID_TOKEN',
    title: 'This link is not valid',
    text: 'The confirmation link is incomplete or was changed. Ask for a new one below.',
  },
  expired: { status: 410, code: 'EXPIRED_TOKEN', title: 'This link has expired', text: 'Confirmation links are valid for 48 hours. Ask for a new one below.' },
  unsubscribed: {
    status: 409,
    code: 'UNSUBSCRIBED',
    title: 'This address unsubscribed',
    text: 'This address unsubscribed after asking for the link. Subscribe again below to start over.',
  },
};

/**
 * The newsletter's REST routes (spec 3 §4.2): subscribe (JSON or a form), the web front-end's
 * form proxy, confirm and unsubscribe. People get small HTML pages; clients that ask for JSON
 * (Accept, or a JSON body) get JSON.
 */
export function newsletterRoutes(app: FastifyInstance, services: NewsletterServices): void {
  void app.register(async (scope) => {
    // HTML forms post url-encoded; RFC 8058 one-click POSTs may be multipart, whose body says nothing we need.
    scope.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'string' }, (_request, body, done) => {
      done(null, Object.fromEntries(new URLSearchParams(body as string)));
    });
    scope.addContentTypeParser('multipart/form-data', { parseAs: 'string' }, (_request, _body, done) => done(null, {}));
    scope.setErrorHandler(answerRefusalsAsPages);

    const subscribe = async (request: FastifyRequest<{ Body: SubscribeBody | undefined }>) => {
      await services.subscribeLimiter().consume({ ip: request.ip });
      const body = request.body ?? {};
      await services.subscriptions.subscribe({ email: body.email, name: body.name, source: body.source });
    };

    scope.post<{ Body: SubscribeBody | undefined }>(
      '/newsletter/subscribe',
      {
        schema: {
          tags: TAGS,
          summary: 'Subscribe an address (double opt-in)',
          description:
            'Sends a confirmation mail (T1) with a link valid for 48 hours. Answers 202 the same way whether or not the address is known. 3 attempts per client address per hour.',
          consumes: ['application/json', 'application/x-www-form-urlencoded'],
          body: SUBSCRIBE_BODY,
          response: {
            202: ACCEPTED,
            400: errorResponse('Not an e-mail address, or a field too long'),
            429: errorResponse('Too many attempts from this address; see Retry-After'),
            503: errorResponse('The newsletter is not configured'),
          },
        },
      },
      async (request, reply) => {
        await subscribe(request);
        if (wantsJson(request)) return reply.code(202).send({ status: 'pending', message: ACCEPTED_MESSAGE });
        return sendPage(reply, 202, page('Check your inbox', ACCEPTED_MESSAGE));
      },
    );

    scope.post<{ Body: SubscribeBody | undefined }>(
      '/api/newsletter',
      {
        schema: {
          tags: TAGS,
          summary: "The web front-end's newsletter form",
          description:
            'Takes the form post of the site and subscribes as /newsletter/subscribe does, then redirects (303) back to the page it came from (redirect_to or Referer, when it is on PLINTH_PUBLIC_URL or an origin of GQL_GRAPHQL_CORS_DOMAIN) with ?newsletter=pending|invalid|rate-limited|unavailable. Clients that ask for JSON get the answers of /newsletter/subscribe.',
          consumes: ['application/x-www-form-urlencoded', 'application/json'],
          body: { ...SUBSCRIBE_BODY, properties: { ...SUBSCRIBE_BODY.properties, redirect_to: { type: 'string', maxLength: 2048 } } },
          response: {
            202: ACCEPTED,
            303: { description: 'Back to the form, with the outcome in ?newsletter=', type: 'null' },
            400: errorResponse('Not an e-mail address (JSON clients)'),
            429: errorResponse('Too many attempts (JSON clients)'),
            503: errorResponse('The newsletter is not configured (JSON clients)'),
          },
        },
      },
      async (request, reply) => {
        if (wantsJson(request)) {
          await subscribe(request);
          return reply.code(202).send({ status: 'pending', message: ACCEPTED_MESSAGE });
        }
        // People are sent back to the form, a refusal told in its query.
        let outcome = 'pending';
        try {
          await subscribe(request);
        } catch (error) {
          if (!(error instanceof Refusal)) throw error;
          reply.headers(error.headers);
          outcome = isTooManyRequests(error) ? 'rate-limited' : error.code === 'NOT_CONFIGURED' ? 'unavailable' : 'invalid';
        }
        return reply
          .code(303)
          .header('location', backUrl(request, request.body ?? {}, services, outcome))
          .send();
      },
    );

    scope.get<{ Querystring: LinkQuery }>(
      '/newsletter/confirm',
      {
        schema: {
          tags: TAGS,
          summary: 'Confirm a subscription (the link of the T1 mail)',
          description:
            'Within 48 hours the address becomes verified and active, the welcome mail (W1) is sent and W2 to W5 are scheduled. An expired or forged link changes nothing and offers a new one. Confirming twice is harmless.',
          querystring: LINK_QUERY,
          response: {
            200: {
              description: 'Confirmed (or already confirmed)',
              content: {
                'application/json': {
                  schema: {
                    type: 'object',
                    properties: { status: { type: 'string', enum: ['confirmed', 'already-confirmed'] }, email: { type: 'string' } },
                    required: ['status', 'email'],
                  },
                },
                'text/html': { schema: HTML },
              },
            },
            400: errorResponse('The link is not valid (INVALID_TOKEN)'),
            409: errorResponse('The address unsubscribed since (UNSUBSCRIBED)'),
            410: errorResponse('The link expired (EXPIRED_TOKEN)'),
            503: errorResponse('The newsletter is not configured'),
          },
        },
      },
      async (request, reply) => {
        const { email = '', token = '' } = request.query;
        const outcome = email && token ? await services.subscriptions.confirm(email, token) : 'invalid';
        const answer = CONFIRM_ANSWERS[outcome];
        if (wantsJson(request)) {
          if (answer.status === 200) return reply.send({ status: answer.code, email: email.trim().toLowerCase() });
          return sendError(reply, answer.status, answer.code, `${answer.title}. ${answer.text.replace(' below', ': POST /newsletter/subscribe')}`);
        }
        const offer = answer.status === 200 ? undefined : { action: '/newsletter/subscribe', button: 'Send me a new link', email };
        return sendPage(reply, answer.status, page(answer.title, answer.text, offer));
      },
    );

    const unsubscribeSchema = (method: 'GET' | 'POST') => ({
      tags: TAGS,
      summary: method === 'GET' ? 'The unsubscribe page (the link in every mail)' : "Unsubscribe (the page's button, and RFC 8058 one-click)",
      description:
        method === 'GET'
          ? 'Shows a page with a button that unsubscribes (a POST to the same address); nothing changes on a GET.'
          : 'Sets the status to unsubscribed, sends T2, cancels the scheduled series mails and stops mail to the address, also from an issue being sent. Mail programs POST `List-Unsubscribe=One-Click` here (RFC 8058). Unsubscribing twice is harmless.',
      querystring: LINK_QUERY,
      ...(method === 'POST'
        ? {
            consumes: ['application/x-www-form-urlencoded', 'multipart/form-data', 'application/json'],
            body: { type: 'object', description: 'Ignored (`List-Unsubscribe=One-Click`)' },
          }
        : {}),
      response: {
        200: {
          description: method === 'GET' ? 'The page, or the address and its status' : 'Unsubscribed',
          content: {
            'application/json': {
              schema: { type: 'object', properties: { status: { type: 'string' }, email: { type: 'string' } }, required: ['status', 'email'] },
            },
            'text/html': { schema: HTML },
          },
        },
        400: errorResponse('The link is not valid (INVALID_TOKEN)'),
        503: errorResponse('The newsletter is not configured'),
      },
    });
    const invalidUnsubscribe = (request: FastifyRequest, reply: FastifyReply) =>
      wantsJson(request)
        ? sendError(reply, 400, 'INVALID_TOKEN', 'This unsubscribe link is incomplete or was changed: use the link of a newsletter mail')
        : sendPage(
            reply,
            400,
            page('This link is not valid', 'The unsubscribe link is incomplete or was changed. Use the link at the bottom of a newsletter mail.'),
          );

    scope.get<{ Querystring: LinkQuery }>('/newsletter/unsubscribe', { schema: unsubscribeSchema('GET') }, async (request, reply) => {
      const { email = '', token = '' } = request.query;
      const found = await services.subscriptions.unsubscribeStatus(email, token);
      if (!found.valid) return invalidUnsubscribe(request, reply);
      const normalized = email.trim().toLowerCase();
      if (wantsJson(request)) return reply.send({ status: found.status, email: normalized });
      if (found.status === 'unsubscribed') return sendPage(reply, 200, page('You are unsubscribed', `${normalized} receives no newsletter mail.`));
      const action = `/newsletter/unsubscribe?${new URLSearchParams({ email, token }).toString()}`;
      return sendPage(
        reply,
        200,
        page('Unsubscribe from the newsletter?', `${normalized} will receive no more newsletter mail.`, { action, button: 'Unsubscribe' }),
      );
    });

    scope.post<{ Querystring: LinkQuery }>(
      '/newsletter/unsubscribe',
      {
        schema: unsubscribeSchema('POST'),
        // The link's query is all that counts: a POST without a body is a one-click POST too.
        preValidation: async (request) => {
          request.body ??= {};
        },
      },
      async (request, reply) => {
        const { email = '', token = '' } = request.query;
        const outcome = await services.subscriptions.unsubscribe(email, token);
        if (outcome === 'invalid') return invalidUnsubscribe(request, reply);
        const normalized = email.trim().toLowerCase();
        if (wantsJson(request)) return reply.send({ status: 'unsubscribed', email: normalized });
        return sendPage(reply, 200, page('You are unsubscribed', `${normalized} will receive no more newsletter mail. A last mail confirms it.`));
      },
    );
  });
}
