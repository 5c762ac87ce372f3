// The admin dashboard's pages: Preact with htm, plain ES modules served by the dashboard (no build step).
// Each page is a module of its own; this one routes between them and holds the session.
import { render } from './preact.js';
import { useEffect, useState } from './hooks.js';
import { api, html, setCsrfToken } from './ui.js';
import { Login } from './login.js';
import { Dashboard } from './dashboard.js';
import { Services } from './services.js';
import { Configuration } from './config.js';
import { Database } from './database.js';
import { ErrorDetails, ErrorProject, ErrorProjects } from './errors.js';
import { Events } from './events.js';
import { Jobs } from './jobs.js';
import { Newsletter } from './newsletter.js';
import { Plugin, Plugins } from './plugins.js';
import { DeploymentEnvironments, ProductionDeployment, StagingDeployment } from './deployment.js';
import { Certificates } from './certificates.js';
import { DataBrowser } from './data.js';

/**
 * The pages, in the navigation's order. A path may hold `:name` parameters (given to the page as
 * props); `nav: false` keeps a page out of the navigation. The server serves the same document at
 * each path (PAGE_PATHS in admin.pages.ts).
 */
const PAGES = [
  { path: '/', title: 'Dashboard', component: Dashboard },
  { path: '/services', title: 'Services', component: Services },
  { path: '/config', title: 'Configuration', component: Configuration },
  { path: '/database', title: 'Database', component: Database },
  { path: '/errors', title: 'Errors', component: ErrorProjects },
  { path: '/errors/:projectId', title: 'Errors', component: ErrorProject, nav: false },
  { path: '/errors/:projectId/:errorId', title: 'Error', component: ErrorDetails, nav: false },
  { path: '/events', title: 'Events', component: Events },
  { path: '/jobs', title: 'Jobs', component: Jobs },
  { path: '/newsletter', title: 'Newsletter', component: Newsletter },
  { path: '/plugins', title: 'Plugins', component: Plugins },
  { path: '/plugins/:name', title: 'Plugin', component: Plugin, nav: false },
  { path: '/deployment/environments', title: 'Deployment', component: DeploymentEnvironments },
  { path: '/deployment/staging', title: 'Staging', component: StagingDeployment, nav: false },
  { path: '/deployment/prod', title: 'Production', component: ProductionDeployment, nav: false },
  { path: '/certificates', title: 'Certificates', component: Certificates },
  { path: '/data', title: 'Data', component: DataBrowser },
  { path: '/data/:table', title: 'Data', component: DataBrowser, nav: false },
];

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

function Shell({ session, onLoggedOut }) {
  const { page, params } = pageAt(location.pathname);
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
    <main id="content"><${page.component} ...${params} /></main>`;
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
