/** A `CS_<N>` declaration (spec 1 §2.1): `<name>:<template>:<port>:<route>`. */
export interface CustomService {
  variable: string;
  name: string;
  template: string;
  port: number;
  route: string;
  /**
   * `CS_<N>_HOST`: the host Plinth calls the service at instead of `name` (127.0.0.1 for local
   * runs, where the deployment network's host names do not resolve).
   */
  host?: string;
}

/** The templates a service may name: `plinth` is Plinth itself, the others are scaffolded by `plinth build`. */
export const SERVICE_TEMPLATES = ['plinth', 'express-ts', 'fastify-ts', 'nest-ts', 'fastapi', 'gin'] as const;

const DECLARATION = /^([a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?):([a-z0-9][a-z0-9-]*):(\d{1,5}):(\/[A-Za-z0-9._~\-/]*)$/;

export function customServicesFromEnv(env: Record<string, string | undefined>): {
  services: CustomService[];
  problems: string[];
} {
  const services: CustomService[] = [];
  const problems: string[] = [];
  const variables = Object.keys(env)
    .filter((key) => /^CS_\d+$/.test(key))
    .sort((a, b) => Number(a.slice(3)) - Number(b.slice(3)));
  for (const variable of variables) {
    const text = env[variable]!.trim();
    const match = DECLARATION.exec(text);
    const port = match ? Number(match[3]) : 0;
    if (!match || port < 1 || port > 65535) {
      problems.push(
        `${variable} must be <name>:<template>:<port>:<route> with a lower-case host name, a port from 1 to 65535 and a route starting with / (got ${JSON.stringify(text)})`,
      );
      continue;
    }
    // A trailing slash would give handler URLs with "//"; the route is a prefix.
    const route = match[4].length > 1 ? match[4].replace(/\/+$/, '') : match[4];
    if (!(SERVICE_TEMPLATES as readonly string[]).includes(match[2])) {
      problems.push(`${variable} names the template "${match[2]}"; the templates are ${SERVICE_TEMPLATES.join(', ')}`);
      continue;
    }
    const service: CustomService = { variable, name: match[1], template: match[2], port, route };
    const host = env[`${variable}_HOST`]?.trim();
    if (host !== undefined && host !== '') {
      if (!/^(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$|^\[[0-9A-Fa-f:.]+\]$/.test(host)) {
        problems.push(`${variable}_HOST must be a host name or an IP address (got ${JSON.stringify(host)})`);
        continue;
      }
      service.host = host;
    }
    services.push(service);
  }
  const names = new Set<string>();
  for (const service of services) {
    if (names.has(service.name)) problems.push(`${service.variable} repeats the service name ${service.name}`);
    names.add(service.name);
  }
  return { services, problems };
}
