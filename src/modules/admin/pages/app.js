// The admin dashboard's pages: Preact with htm, plain ES modules served by the dashboard (no build step).
// Each page is a module of its own; this one routes between them and holds the session.
import { render } from './preact.js';
import { useEffect, useState } from './hooks.js';
import { api, html, setCsrfToken } from './ui.js';
import { Login } from './login.js';

/**
 * The pages, in the navigation's order, from the document (ADMIN_PAGES in admin.pages.ts: one list
 * for the server's routes and this navigation). Each is `{path, title, module, component, nav?}`: a
 * path may hold `:name` parameters (given to the page as props); `nav: false` keeps a page out of
 * the navigation. Only the shown page's module is loaded (the document preloads it).
 */
const PAGES = JSON.parse(document.getElementById('plinth-pages').textContent);

/** The page at `pathname` and its parameters; the dashboard when none matches. */
function pageAt(pathname) {
  const parts = pathname.replace(/\/+$/, '').split('/');
  for (const page of PAGES) {
    const pattern = page.path.replace(/\/+$/, '').split('/');
    if (pattern.length !== parts.length) continue;
    const params = {};
    const matches = pattern.every((part, index) => {
      if (part.startsWith(':')) {
        params[part.slice(1)] = decodeURIComponent(parts[index]);
        return parts[index] !== '';
      }
      return part === parts[index];
    });
    if (matches) return { page, params };
  }
  return { page: PAGES[0], params: {} };
}

/** Whether `page`, a page out of the navigation, belongs to the navigation's `entry` (/plugins/:name to /plugins, /deployment/prod to /deployment/…). */
function inSection(entry, page) {
  return page.nav === false && entry.path.split('/')[1] === page.path.split('/')[1];
}

/** The shown page and its module, asked for while the session is: both arrive together. */
const shown = pageAt(location.pathname);
const shownModule = import(`./${shown.page.module}`);

/** The page's component once its module is read; a message if it cannot be. */
function PageView({ page, params }) {
  const [component, setComponent] = useState(null);
  const [failed, setFailed] = useState(false);
  useEffect(() => {
    shownModule.then(
      (module) => setComponent(() => module[page.component]),
      () => setFailed(true),
    );
  }, [page]);
  if (failed) return html`<p class="error" role="alert">The page could not be loaded: reload to try again.</p>`;
  return component ? html`<${component} ...${params} />` : html`<p class="loading">Loading…</p>`;
}

function Shell({ session, onLoggedOut }) {
  const { page, params } = shown;
  const logout = async () => {
    await api('POST', '/auth/logout');
    onLoggedOut();
  };
  useEffect(() => {
    document.title = `${page.title} · Plinth admin`;
  }, [page]);
  return html`<header class="top">
      <a class="skip" href="#content">Skip to content</a>
      <nav aria-label="Pages">
        <strong>Plinth admin</strong>
        ${PAGES.filter((each) => each.nav !== false).map(
          (each) => html`<a href=${each.path} aria-current=${each === page ? 'page' : inSection(each, page) ? 'true' : undefined}>${each.title}</a>`,
        )}
      </nav>
      <span class="muted">${session.username}</span>
      <button type="button" onClick=${logout}>Log out</button>
    </header>
    <main id="content"><${PageView} page=${page} params=${params} /></main>`;
}

/** Asked while the modules are read, before the first render: the page shows one round trip sooner. */
const sessionAsked = api('GET', '/auth/session');

function App() {
  const [session, setSession] = useState(undefined);
  useEffect(() => {
    sessionAsked.then((answer) => {
      if (answer.status === 200) setCsrfToken(answer.body.csrfToken);
      setSession(answer.status === 200 ? answer.body : null);
    });
  }, []);
  if (session === undefined) return html`<p class="loading">Loading…</p>`;
  if (session === null) {
    return html`<${Login}
      onLoggedIn=${(answer) => {
        setCsrfToken(answer.csrfToken);
        setSession(answer);
      }}
    />`;
  }
  return html`<${Shell}
    session=${session}
    onLoggedOut=${() => {
      setCsrfToken('');
      setSession(null);
    }}
  />`;
}

render(html`<${App} />`, document.getElementById('app'));
