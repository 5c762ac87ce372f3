import { LRUCache } from 'lru-cache';
import type { DataSource } from 'typeorm';
import { incident, type Incident, type IncidentSeverity } from './incidents.service';
import type { ProjectsService } from './projects.service';
import { rows } from '../../db/sql';
import type { SlosService, SloStatus } from './slos.service';

/** Atlassian Statuspage's component statuses, best first. */
export const COMPONENT_STATUSES = ['operational', 'under_maintenance', 'degraded_performance', 'partial_outage', 'major_outage'] as const;
export type ComponentStatus = (typeof COMPONENT_STATUSES)[number];

const FROM_SEVERITY: Record<IncidentSeverity, ComponentStatus> = {
  critical: 'major_outage',
  major: 'partial_outage',
  minor: 'degraded_performance',
  info: 'operational',
  maintenance: 'under_maintenance',
};
const FROM_SLO: Record<SloStatus, ComponentStatus> = { BREACHED: 'partial_outage', AT_RISK: 'degraded_performance', ON_TRACK: 'operational' };

/** Statuspage's page indicator, from the worst component. */
const INDICATOR: Record<ComponentStatus, { indicator: string; description: string }> = {
  operational: { indicator: 'none', description: 'All Systems Operational' },
  under_maintenance: { indicator: 'maintenance', description: 'Service Under Maintenance' },
  degraded_performance: { indicator: 'minor', description: 'Minor Service Outage' },
  partial_outage: { indicator: 'major', description: 'Partial System Outage' },
  major_outage: { indicator: 'critical', description: 'Major System Outage' },
};

/** Resolved incidents stay on the page this long, as Statuspage shows recent history. */
const RESOLVED_SHOWN_DAYS = 7;

export interface StatusPage {
  page: { name: string; slug: string; updatedAt: string };
  status: { indicator: string; description: string };
  components: { name: string; status: ComponentStatus; lastUpdate: string }[];
  incidents: {
    id: string;
    title: string;
    status: string;
    severity: string;
    service: string;
    createdAt: string;
    updatedAt: string;
    resolvedAt: string | null;
  }[];
}

const worse = (a: ComponentStatus, b: ComponentStatus) => (COMPONENT_STATUSES.indexOf(a) >= COMPONENT_STATUSES.indexOf(b) ? a : b);

/**
 * The public status page of a project (its slug): one component per service (the project's, its
 * SLOs', its open incidents'), each as bad as its worst open incident or SLO, and the incidents
 * open or resolved in the last week. Answers are reused for a few seconds, so a crowd costs the
 * database one computation per slug and period.
 */
export class StatusPageService {
  private readonly cache: LRUCache<string, { expires: number; page: Promise<StatusPage | null> }>;

  constructor(
    private readonly dataSource: DataSource,
    private readonly projects: ProjectsService,
    private readonly slos: SlosService,
    private readonly cacheMs: number,
  ) {
    this.cache = new LRUCache({ max: 1000 });
  }

  /** The page, or null for an unknown slug. */
  page(slug: string): Promise<StatusPage | null> {
    const now = Date.now();
    const cached = this.cache.get(slug);
    if (cached && cached.expires > now) return cached.page;
    const page = this.build(slug);
    if (this.cacheMs > 0) {
      this.cache.set(slug, { expires: now + this.cacheMs, page });
      page.catch(() => this.cache.delete(slug));
    }
    return page;
  }

  private async build(slug: string): Promise<StatusPage | null> {
    if (!/^[a-z0-9-]{1,64}$/.test(slug)) return null;
    const project = await this.projects.findProject(slug).catch(() => null);
    if (!project || project.slug !== slug) return null;
    const slos = (await this.slos.list(project.id, 100, null)).nodes.map(({ node }) => node);
    const figures = await this.slos.figuresOf(slos);
    const incidents = (
      await rows<Parameters<typeof incident>[0]>(
        this.dataSource,
        `SELECT * FROM incidents WHERE project_id = $1 AND (status <> 'resolved' OR resolved_at > now() - interval '${RESOLVED_SHOWN_DAYS} days')
         ORDER BY number DESC LIMIT 50`,
        [project.id],
      )
    ).map(incident);

    const components = new Map<string, { status: ComponentStatus; lastUpdate: Date }>();
    const touch = (service: string, status: ComponentStatus, at: Date) => {
      const current = components.get(service) ?? { status: 'operational', lastUpdate: project.createdAt };
      components.set(service, { status: worse(current.status, status), lastUpdate: at > current.lastUpdate ? at : current.lastUpdate });
    };
    touch(project.service, 'operational', project.createdAt);
    for (const slo of slos) touch(slo.service, FROM_SLO[figures.get(slo.id)!.status], slo.updatedAt);
    for (const shown of incidents) touch(shown.service, shown.status === 'resolved' ? 'operational' : FROM_SEVERITY[shown.severity], shown.updatedAt);

    const list = [...components].map(([name, { status, lastUpdate }]) => ({ name, status, lastUpdate: lastUpdate.toISOString() }));
    const overall = list.reduce<ComponentStatus>((worst, component) => worse(worst, component.status), 'operational');
    return {
      page: { name: project.name, slug: project.slug, updatedAt: new Date().toISOString() },
      status: INDICATOR[overall],
      components: list,
      incidents: incidents.map((shown: Incident) => ({
        id: shown.id,
        title: shown.title,
        status: shown.status,
        severity: shown.severity,
        service: shown.service,
        createdAt: shown.createdAt.toISOString(),
        updatedAt: shown.updatedAt.toISOString(),
        resolvedAt: shown.resolvedAt?.toISOString() ?? null,
      })),
    };
  }
}

const escape = (text: string) => text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
const LABEL: Record<ComponentStatus, string> = {
  operational: 'Operational',
  under_maintenance: 'Under maintenance',
  degraded_performance: 'Degraded performance',
  partial_outage: 'Partial outage',
  major_outage: 'Major outage',
};
const COLOUR: Record<ComponentStatus, string> = {
  operational: '#2e7d32',
  under_maintenance: '#1565c0',
  degraded_performance: '#f9a825',
  partial_outage: '#ef6c00',
  major_outage: '#c62828',
};

/** The page for people: the same content, no script. */
export function statusPageHtml(page: StatusPage): string {
  const components = page.components
    .map((c) => `<li><span>${escape(c.name)}</span><strong style="color:${COLOUR[c.status]}">${LABEL[c.status]}</strong></li>`)
    .join('');
  const incidents =
    page.incidents.length === 0
      ? '<p>No incidents in the last 7 days.</p>'
      : `<ul>${page.incidents
          .map(
            (i) =>
              `<li><strong>${escape(i.title)}</strong> — ${escape(i.status)} (${escape(i.severity)}, ${escape(i.service)})<br><small>since <time datetime="${i.createdAt}">${i.createdAt}</time>${
                i.resolvedAt ? `, resolved <time datetime="${i.resolvedAt}">${i.resolvedAt}</time>` : ''
              }</small></li>`,
          )
          .join('')}</ul>`;
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escape(page.page.name)} status</title>
<style>body{font-family:system-ui,sans-serif;max-width:44rem;margin:2rem auto;padding:0 1rem;color:#222}
ul{list-style:none;padding:0}li{padding:.6rem 0;border-bottom:1px solid #ddd;display:flex;justify-content:space-between;gap:1rem;flex-wrap:wrap}
.banner{padding:1rem;border-radius:.4rem;color:#fff;background:${COLOUR[(Object.keys(INDICATOR) as ComponentStatus[]).find((s) => INDICATOR[s].description === page.status.description) ?? 'operational']}}</style>
</head><body>
<h1>${escape(page.page.name)}</h1>
<p class="banner">${escape(page.status.description)}</p>
<h2>Components</h2><ul>${components}</ul>
<h2>Incidents</h2>${incidents}
<p><small>Updated <time datetime="${page.page.updatedAt}">${page.page.updatedAt}</time></small></p>
</body></html>
`;
}
