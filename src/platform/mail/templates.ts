import fs from 'node:fs/promises';
import path from 'node:path';

/**
 * The templates Plinth ships, read from the sources at run time (nothing to copy at build time).
 * Compiled code runs from dist/src/platform/mail, four folders below the package root.
 */
export const BUILT_IN_TEMPLATES_DIR = path.resolve(__dirname, '..', '..', '..', '..', 'src', 'platform', 'mail', 'templates');

/** Values of a template's `{{name}}` placeholders. */
export type MailVariables = Record<string, string | number>;

export interface RenderedMail {
  template: string;
  subject: string;
  html: string;
  text: string;
}

/** A message that cannot be built: unknown or broken template, missing variable, bad address. */
export class MailError extends Error {
  override readonly name = 'MailError';
}

export interface MailTemplatesOptions {
  /** AUTH_EMAIL_TEMPLATES_DIR: `<name>.mjml` or `<name>.html` here replaces the built-in `<name>`. */
  overridesDir: string;
  /** How many compiled templates are kept (least recently used go first). */
  cacheSize: number;
  /** Given to every template (auth_url, public_url, ...); a caller's variable of the same name wins. */
  defaults: MailVariables;
}

/** Text split at its placeholders: even indexes are literal text, odd ones variable names. */
type Parts = string[];

interface CompiledTemplate {
  file: string;
  subject: Parts;
  html: Parts;
  text: Parts;
  variables: string[];
}

const NAME = /^[A-Za-z0-9][A-Za-z0-9_-]*$/;
// Spaces inside the braces are allowed in sources and removed before compiling, so that the
// text converter's word wrap can never split a placeholder.
const LOOSE_PLACEHOLDER = /\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}/g;
const PLACEHOLDER = /\{\{([A-Za-z_][A-Za-z0-9_]*)\}\}/;

/** The text part's and the subject's converters, made when the first template compiles (html-to-text is not loaded at start). */
let textConverters: { toText: (html: string) => string; titleToText: (html: string) => string } | undefined;
function makeTextConverters(): NonNullable<typeof textConverters> {
  const { compile } = require('html-to-text') as typeof import('html-to-text');
  return {
    toText: compile({
      wordwrap: 78,
      selectors: [
        // MJML's preview line (<mj-preview>) is a hidden block for the inbox list, not the text part.
        { selector: 'div[style*="display:none"]', format: 'skip' },
        { selector: 'img', format: 'skip' },
        // MJML puts each block in its own div: a blank line between them, as between paragraphs.
        { selector: 'div', options: { leadingLineBreaks: 2, trailingLineBreaks: 2 } },
        { selector: 'a', options: { hideLinkHrefIfSameAsText: true } },
        // Upper-cased headings would upper-case their placeholders too.
        ...['h1', 'h2', 'h3', 'h4', 'h5', 'h6'].map((selector) => ({ selector, options: { uppercase: false } })),
      ],
    }),
    titleToText: compile({ wordwrap: false }),
  };
}

// MJML is slow to load and large: it is required when the first template compiles,
// not by every `plinth` command and server start. (A dynamic import() would break under jest.)
let mjml2html: typeof import('mjml') | undefined;

const HTML_ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };
const escapeHtml = (value: string) => value.replace(/[&<>"']/g, (character) => HTML_ESCAPES[character]);

/**
 * Mail templates: MJML (or HTML) sources with `{{name}}` placeholders. A template is compiled
 * once — MJML to HTML, HTML to a plain-text part, `<title>` to the subject, all with the
 * placeholders still in — and each mail only fills the placeholders in: HTML-escaped in the HTML
 * part, as they are in the text part and the subject.
 */
export class MailTemplates {
  private readonly cache = new Map<string, Promise<CompiledTemplate>>();

  constructor(private readonly options: MailTemplatesOptions) {}

  /** Throws MailError when the template is unknown or broken, or a placeholder has no value. */
  async render(name: string, variables: MailVariables = {}): Promise<RenderedMail> {
    const template = await this.compiled(name);
    const values: Partial<MailVariables> = { ...this.options.defaults, ...variables };
    const missing = template.variables.filter((variable) => values[variable] === undefined || values[variable] === null);
    if (missing.length > 0) {
      const list = missing.map((variable) => `"${variable}"`).join(', ');
      throw new MailError(
        `mail template "${name}" (${template.file}) needs ${missing.length === 1 ? 'variable' : 'variables'} ${list}, which ${missing.length === 1 ? 'was' : 'were'} not given`,
      );
    }
    const fill = (parts: Parts, encode: (value: string) => string) =>
      parts.map((part, index) => (index % 2 === 0 ? part : encode(String(values[part])))).join('');
    return {
      template: name,
      // A header is one line, whatever a variable holds.
      subject: fill(template.subject, String)
        .replace(/\s*[\r\n]+\s*/g, ' ')
        .trim(),
      html: fill(template.html, escapeHtml),
      text: fill(template.text, String),
    };
  }

  private compiled(name: string): Promise<CompiledTemplate> {
    const cached = this.cache.get(name);
    if (cached) {
      // Most recently used last, so the first key is the one to evict.
      this.cache.delete(name);
      this.cache.set(name, cached);
      return cached;
    }
    const compiling = this.load(name);
    this.cache.set(name, compiling);
    // A template that failed is looked for again next time (it may have been fixed or added).
    compiling.catch(() => {
      if (this.cache.get(name) === compiling) this.cache.delete(name);
    });
    if (this.cache.size > this.options.cacheSize) this.cache.delete(this.cache.keys().next().value!);
    return compiling;
  }

  private async load(name: string): Promise<CompiledTemplate> {
    // The name becomes a file name: nothing that could leave the folders.
    if (!NAME.test(name)) throw new MailError(`"${name}" is not a mail template name (letters, digits, "-" and "_")`);
    const candidates = [
      path.join(this.options.overridesDir, `${name}.mjml`),
      path.join(this.options.overridesDir, `${name}.html`),
      path.join(BUILT_IN_TEMPLATES_DIR, `${name}.mjml`),
    ];
    for (const file of candidates) {
      let source: string;
      try {
        source = await fs.readFile(file, 'utf8');
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === 'ENOENT') continue;
        throw error;
      }
      return compile(name, file, source);
    }
    throw new MailError(`there is no mail template "${name}" (looked for ${candidates.join(', ')})`);
  }
}

async function compile(name: string, file: string, source: string): Promise<CompiledTemplate> {
  const normalized = source.replace(LOOSE_PLACEHOLDER, '{{$1}}');
  let html = normalized;
  if (file.endsWith('.mjml')) {
    try {
      // No web fonts (no request to a font host when a mail is opened); includes stay off, so
      // a template reads no other file.
      mjml2html ??= require('mjml') as typeof import('mjml');
      html = (await mjml2html(normalized, { validationLevel: 'strict', filePath: file, keepComments: false, fonts: {}, ignoreIncludes: true })).html;
    } catch (error) {
      throw new MailError(`mail template "${name}" (${file}) is not valid MJML: ${(error as Error).message.trim()}`);
    }
  }
  const title = /<title[^>]*>([\s\S]*?)<\/title>/i.exec(html)?.[1] ?? '';
  const { toText, titleToText } = (textConverters ??= makeTextConverters());
  const subject = titleToText(title).trim();
  if (!subject) throw new MailError(`mail template "${name}" (${file}) has no subject: give it an <mj-title> (<title> in HTML)`);
  const parts = { subject: split(subject), html: split(html), text: split(toText(html)) };
  const literals = [parts.subject, parts.html].flatMap((list) => list.filter((_, index) => index % 2 === 0));
  const stray = literals.map((literal) => /\{\{[\s\S]*?\}\}/.exec(literal)?.[0]).find(Boolean);
  if (stray) {
    throw new MailError(`mail template "${name}" (${file}): ${stray} is not a placeholder (use {{name}}, with letters, digits and "_")`);
  }
  const names = [parts.subject, parts.html].flatMap((list) => list.filter((_, index) => index % 2 === 1));
  const variables = [...new Set(names)];
  return { file, ...parts, variables };
}

function split(text: string): Parts {
  return text.split(new RegExp(PLACEHOLDER.source, 'g'));
}
