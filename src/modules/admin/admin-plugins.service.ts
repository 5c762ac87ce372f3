import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import type { Logger } from 'pino';
import * as tar from 'tar';
import type { DataSource } from 'typeorm';
import { Refusal } from '../../common/refusal';
import { rows } from '../../db/sql';
import type { OutboundHttp } from '../../platform/outbound-http';
import { PLUGIN_NAME, pluginManifest, readPluginFolders, readPluginManifest, type PluginManifest } from '../../platform/plugin-manifests';

/** An archive or folder larger than this, or with more entries, is refused. */
const MAX_INSTALL_BYTES = 200 * 1024 * 1024;
const MAX_INSTALL_ENTRIES = 20_000;
/** plugin.json itself is small. */
const MAX_MANIFEST_BYTES = 1024 * 1024;
const SYNC_TIMEOUT_MS = 30_000;
const RECENT_EVENTS = 10;

export interface PluginRoute {
  method: string;
  path: string;
  summary: string;
}

export interface SyncRecord {
  syncedAt: string;
  syncedBy: string;
  ok: boolean;
  routes: number | null;
  endpoint: string | null;
  httpStatus: number | null;
  durationMs: number;
  message: string;
}

export interface PluginInfo {
  name: string;
  folder: string;
  path: string;
  valid: boolean;
  problems: string[];
  version: string | null;
  description: string | null;
  routes: PluginRoute[];
  sync: string | null;
  webhooks: string[];
  lastSync: SyncRecord | null;
}

/** What the webhooks route shows of Plinth's event triggers (the events module's admin view, reached through its services). */
export interface EventsView {
  triggers(): Promise<
    { name: string; table: string; operations: string[]; webhook: string | null; webhookFromEnv: string | null; pending: number; dead: number }[]
  >;
  events(filter: { trigger?: string | null; first?: number | null }): Promise<{ id: string; op: string; state: string; tries: number; createdAt: Date }[]>;
}

export interface PluginWebhook {
  event: string;
  /** Plinth's event trigger of that name, which delivers the event to the plugin; null when none is defined. */
  trigger: { table: string; operations: string[]; webhook: string | null; webhookFromEnv: string | null; pending: number; dead: number } | null;
  recent: { id: string; op: string; state: string; tries: number; createdAt: string }[];
}

interface SyncRow {
  synced_at: Date;
  synced_by: string;
  ok: boolean;
  routes: number | null;
  endpoint: string | null;
  http_status: number | null;
  duration_ms: number;
  message: string;
}

const syncRecord = (row: SyncRow): SyncRecord => ({
  syncedAt: row.synced_at.toISOString(),
  syncedBy: row.synced_by,
  ok: row.ok,
  routes: row.routes,
  endpoint: row.endpoint,
  httpStatus: row.http_status,
  durationMs: row.duration_ms,
  message: row.message,
});

/** Whether `target` is `root` or inside it. */
function inside(root: string, target: string): boolean {
  const relative = path.relative(root, target);
  return relative === '' || (!relative.startsWith('..') && !path.isAbsolute(relative));
}

/**
 * The plugins of PLINTH_PLUGINS_DIR (spec 1 §2.8, spec 3 §4.3): listed with their manifests (or
 * what is wrong with them), installed from a folder or a .tar.gz archive on this machine, removed,
 * synced (the manifest read again and the plugin's declared sync endpoint called) and their
 * webhook events shown. The API reference reads the folder again when it changes.
 */
export class AdminPlugins {
  constructor(
    private readonly dir: string,
    private readonly projectPath: string,
    private readonly dataSource: DataSource,
    private readonly http: OutboundHttp,
    private readonly events: EventsView,
    private readonly logger: Logger,
  ) {}

  async list(): Promise<PluginInfo[]> {
    const folders = readPluginFolders(this.dir, []);
    const last = await rows<SyncRow & { plugin: string }>(
      this.dataSource,
      `SELECT DISTINCT ON (plugin) plugin, synced_at, synced_by, ok, routes, endpoint, http_status, duration_ms, message
       FROM admin_plugin_syncs ORDER BY plugin, synced_at DESC, id DESC`,
    );
    const byName = new Map(last.map((row) => [row.plugin, syncRecord(row)]));
    return folders.map((folder) => {
      const name = folder.manifest?.name ?? folder.folder;
      return this.info(folder.folder, folder.manifest, folder.problems, byName.get(name) ?? null);
    });
  }

  async get(name: string): Promise<PluginInfo> {
    const plugins = await this.list();
    const plugin = plugins.find((candidate) => candidate.name === name) ?? plugins.find((candidate) => candidate.folder === name);
    if (!plugin) throw new Refusal('UNKNOWN_PLUGIN', `There is no plugin ${name}: see GET /api/plugins`, 404);
    return plugin;
  }

  /**
   * Installs the plugin in a folder or a .tar.gz/.tgz archive at `source` (a path on this machine,
   * absolute or under PLATFORM_PROJECT_PATH): its manifest is checked before anything is written,
   * then it is copied (or extracted) into a hidden folder of PLINTH_PLUGINS_DIR and renamed to
   * the plugin's name, so a half-written plugin is never seen.
   */
  async install(source: string): Promise<PluginInfo> {
    const from = path.resolve(this.projectPath, source);
    const stat = fs.statSync(from, { throwIfNoEntry: false });
    if (!stat) throw new Refusal('SOURCE_NOT_FOUND', `${source} does not exist on the server`, 422, { field: 'source' });
    const archive = stat.isFile() && /\.(tar\.gz|tgz)$/i.test(from);
    if (!stat.isDirectory() && !archive) {
      throw new Refusal('UNSUPPORTED_SOURCE', 'source must be a plugin folder or a .tar.gz / .tgz archive', 422, { field: 'source' });
    }
    const plan = archive ? await this.planArchive(from) : this.planFolder(from);
    const manifest = this.checkManifest(plan.manifestText);
    const target = path.resolve(this.dir, manifest.name);
    if (path.dirname(target) !== path.resolve(this.dir) || !PLUGIN_NAME.test(manifest.name)) {
      throw new Refusal('INVALID_PLUGIN_NAME', `The plugin name ${JSON.stringify(manifest.name)} cannot be a folder of the plugins folder`, 422);
    }
    const taken = readPluginFolders(this.dir, []).find((folder) => folder.folder === manifest.name || folder.manifest?.name === manifest.name);
    if (taken || fs.existsSync(target)) throw new Refusal('PLUGIN_EXISTS', `A plugin named ${manifest.name} is already installed: remove it first`, 409);

    fs.mkdirSync(this.dir, { recursive: true });
    const staging = path.join(this.dir, `.installing-${randomBytes(6).toString('hex')}`);
    try {
      fs.mkdirSync(staging);
      if (archive) {
        await tar.x({ file: from, cwd: staging, strip: plan.strip, strict: true, preservePaths: false, preserveOwner: false });
      } else {
        fs.cpSync(from, staging, { recursive: true, verbatimSymlinks: true, errorOnExist: true });
      }
      // What was written must be what was checked.
      const written = readPluginManifest(path.join(staging, 'plugin.json'), 'plugin.json');
      if (!written.manifest || written.manifest.name !== manifest.name) {
        throw new Refusal('INVALID_MANIFEST', `plugin.json changed while it was installed: ${written.problems.join('; ')}`, 422);
      }
      fs.renameSync(staging, target);
    } catch (error) {
      fs.rmSync(staging, { recursive: true, force: true });
      if ((error as NodeJS.ErrnoException).code === 'ENOTEMPTY' || (error as NodeJS.ErrnoException).code === 'EEXIST') {
        throw new Refusal('PLUGIN_EXISTS', `A plugin named ${manifest.name} is already installed: remove it first`, 409);
      }
      if (error instanceof Refusal) throw error;
      throw new Refusal('BAD_ARCHIVE', `The plugin could not be ${archive ? 'extracted' : 'copied'}: ${(error as Error).message}`, 422, { field: 'source' });
    }
    this.logger.info({ plugin: manifest.name, source: from }, 'plugin installed');
    return this.get(manifest.name);
  }

  async remove(name: string): Promise<PluginInfo> {
    const plugin = await this.get(name);
    const folder = path.join(this.dir, plugin.folder);
    if (!inside(path.resolve(this.dir), path.resolve(folder)) || path.resolve(folder) === path.resolve(this.dir)) {
      throw new Refusal('INVALID_PLUGIN_NAME', 'That name is not a folder of the plugins folder', 422);
    }
    // A symbolic link (a plugin developed elsewhere) is unlinked; its target stays.
    if (fs.lstatSync(folder).isSymbolicLink()) fs.unlinkSync(folder);
    else fs.rmSync(folder, { recursive: true, force: true });
    await this.dataSource.query('DELETE FROM admin_plugin_syncs WHERE plugin = $1', [plugin.name]);
    this.logger.info({ plugin: plugin.name }, 'plugin removed');
    return plugin;
  }

  /**
   * Reads the manifest again (the API reference follows, as it reads the folder again when it
   * changed) and, when the manifest declares `sync`, POSTs `{plugin, version, requestedBy}` to it;
   * each outcome is recorded. An invalid manifest is recorded and refused (422).
   */
  async sync(name: string, requestedBy: string): Promise<{ plugin: PluginInfo; sync: SyncRecord }> {
    const plugin = await this.get(name);
    const started = Date.now();
    const record = async (fields: Omit<SyncRow, 'synced_at' | 'synced_by' | 'duration_ms'>): Promise<SyncRecord> => {
      const [row] = await rows<SyncRow>(
        this.dataSource,
        `INSERT INTO admin_plugin_syncs (plugin, synced_by, ok, routes, endpoint, http_status, duration_ms, message)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING synced_at, synced_by, ok, routes, endpoint, http_status, duration_ms, message`,
        [plugin.name, requestedBy, fields.ok, fields.routes, fields.endpoint, fields.http_status, Date.now() - started, fields.message.slice(0, 2000)],
      );
      return syncRecord(row);
    };
    if (!plugin.valid) {
      const sync = await record({ ok: false, routes: null, endpoint: null, http_status: null, message: plugin.problems.join('; ') });
      throw new Refusal('INVALID_MANIFEST', `plugin.json of ${plugin.name} is not valid: ${sync.message}`, 422);
    }
    const routes = plugin.routes.length;
    if (!plugin.sync) {
      const sync = await record({
        ok: true,
        routes,
        endpoint: null,
        http_status: null,
        message: `Manifest read again: ${routes} route(s); no sync endpoint declared`,
      });
      return { plugin: { ...plugin, lastSync: sync }, sync };
    }
    let fields: Omit<SyncRow, 'synced_at' | 'synced_by' | 'duration_ms'>;
    try {
      const answer = await this.http.request(plugin.sync, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json, text/plain' },
        body: JSON.stringify({ plugin: plugin.name, version: plugin.version, requestedBy }),
        timeoutMs: SYNC_TIMEOUT_MS,
        maxResponseBytes: 64 * 1024,
      });
      const ok = answer.status >= 200 && answer.status < 300;
      const text = answer.body.toString('utf8').trim().slice(0, 500);
      fields = { ok, routes, endpoint: plugin.sync, http_status: answer.status, message: `${plugin.sync} answered ${answer.status}${text ? `: ${text}` : ''}` };
    } catch (error) {
      fields = { ok: false, routes, endpoint: plugin.sync, http_status: null, message: `${plugin.sync} could not be reached: ${(error as Error).message}` };
    }
    const sync = await record(fields);
    return { plugin: { ...plugin, lastSync: sync }, sync };
  }

  /** The events the plugin's manifest says it receives, each with Plinth's event trigger of that name and its recent events. */
  async webhooks(name: string): Promise<{ plugin: string; webhooks: PluginWebhook[] }> {
    const plugin = await this.get(name);
    const triggers = plugin.webhooks.length ? await this.events.triggers() : [];
    const webhooks: PluginWebhook[] = [];
    for (const event of plugin.webhooks) {
      const trigger = triggers.find((candidate) => candidate.name === event);
      const recent = trigger ? await this.events.events({ trigger: event, first: RECENT_EVENTS }) : [];
      webhooks.push({
        event,
        trigger: trigger
          ? {
              table: trigger.table,
              operations: trigger.operations,
              webhook: trigger.webhook,
              webhookFromEnv: trigger.webhookFromEnv,
              pending: trigger.pending,
              dead: trigger.dead,
            }
          : null,
        recent: recent.map((row) => ({ id: row.id, op: row.op, state: row.state, tries: row.tries, createdAt: row.createdAt.toISOString() })),
      });
    }
    return { plugin: plugin.name, webhooks };
  }

  private info(folder: string, manifest: PluginManifest | undefined, problems: string[], lastSync: SyncRecord | null): PluginInfo {
    return {
      name: manifest?.name ?? folder,
      folder,
      path: path.join(this.dir, folder),
      valid: manifest !== undefined,
      problems,
      version: manifest?.version ?? null,
      description: manifest?.description ?? null,
      routes: manifest?.rest_routes.map(({ method, path: route, summary }) => ({ method, path: route, summary })) ?? [],
      sync: manifest?.sync ?? null,
      webhooks: manifest?.webhooks ?? [],
      lastSync,
    };
  }

  private checkManifest(text: string | undefined): PluginManifest {
    if (text === undefined) throw new Refusal('INVALID_MANIFEST', 'The plugin has no plugin.json at its top', 422);
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch (error) {
      throw new Refusal('INVALID_MANIFEST', `plugin.json is not valid JSON: ${(error as Error).message}`, 422);
    }
    const result = pluginManifest.safeParse(parsed);
    if (!result.success) {
      const problems = result.error.issues.map((issue) => `${issue.path.length ? `${issue.path.join('.')} ` : ''}${issue.message}`);
      throw new Refusal('INVALID_MANIFEST', `plugin.json: ${problems.join('; ')}`, 422);
    }
    const keys = result.data.rest_routes.map(({ method, path: route }) => `${method} ${route}`);
    const repeated = keys.find((key, index) => keys.indexOf(key) !== index);
    if (repeated) throw new Refusal('INVALID_MANIFEST', `plugin.json: rest_routes declares ${repeated} twice`, 422);
    return { ...result.data, file: 'plugin.json' };
  }

  /** A folder's plugin.json, once every file and link in it is checked: no link leads out of it. */
  private planFolder(root: string): { manifestText: string | undefined; strip: number } {
    let entries = 0;
    let bytes = 0;
    const walk = (dir: string) => {
      for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
        const file = path.join(dir, entry.name);
        entries += 1;
        if (entries > MAX_INSTALL_ENTRIES) throw new Refusal('BAD_ARCHIVE', `The folder holds more than ${MAX_INSTALL_ENTRIES} entries`, 422);
        if (entry.isSymbolicLink()) {
          const target = path.resolve(dir, fs.readlinkSync(file));
          if (!inside(root, target)) throw new Refusal('UNSAFE_ARCHIVE', `${path.relative(root, file)} is a link leading out of the plugin`, 422);
        } else if (entry.isDirectory()) walk(file);
        else if (entry.isFile()) bytes += fs.statSync(file).size;
        else throw new Refusal('UNSAFE_ARCHIVE', `${path.relative(root, file)} is neither a file, a folder nor a link`, 422);
        if (bytes > MAX_INSTALL_BYTES) throw new Refusal('BAD_ARCHIVE', `The plugin is larger than ${MAX_INSTALL_BYTES / 1024 / 1024} MiB`, 422);
      }
    };
    walk(root);
    const manifest = path.join(root, 'plugin.json');
    const stat = fs.lstatSync(manifest, { throwIfNoEntry: false });
    if (!stat?.isFile()) return { manifestText: undefined, strip: 0 };
    if (stat.size > MAX_MANIFEST_BYTES) throw new Refusal('INVALID_MANIFEST', 'plugin.json is larger than 1 MiB', 422);
    return { manifestText: fs.readFileSync(manifest, 'utf8'), strip: 0 };
  }

  /**
   * Reads the archive without writing anything: every entry must be a file, a folder or a link
   * staying inside, with a relative path without `..`; plugin.json is at its top or in its one
   * top folder (as `npm pack` makes), which is then stripped.
   */
  private async planArchive(file: string): Promise<{ manifestText: string | undefined; strip: number }> {
    const names: string[] = [];
    const manifests = new Map<string, string>();
    const links: { name: string; target: string }[] = [];
    let problem: Refusal | undefined;
    let bytes = 0;
    const refuse = (code: string, message: string) => {
      problem ??= new Refusal(code, message, 422, { field: 'source' });
    };
    try {
      await tar.t({
        file,
        strict: true,
        onReadEntry: (entry) => {
          const name = entry.path;
          names.push(name);
          bytes += entry.size ?? 0;
          if (names.length > MAX_INSTALL_ENTRIES) refuse('BAD_ARCHIVE', `The archive holds more than ${MAX_INSTALL_ENTRIES} entries`);
          if (bytes > MAX_INSTALL_BYTES) refuse('BAD_ARCHIVE', `The archive unpacks to more than ${MAX_INSTALL_BYTES / 1024 / 1024} MiB`);
          const segments = name.split(/[\\/]+/);
          if (path.isAbsolute(name) || /^[A-Za-z]:/.test(name) || segments.includes('..')) {
            refuse('UNSAFE_ARCHIVE', `The archive entry ${JSON.stringify(name)} would be written outside the plugin folder`);
          }
          if (entry.type === 'SymbolicLink') {
            const link = entry.linkpath ?? '';
            const target = path.posix.normalize(path.posix.join(path.posix.dirname(name), link));
            if (path.isAbsolute(link) || target.startsWith('..') || target === '.') {
              refuse('UNSAFE_ARCHIVE', `The archive entry ${JSON.stringify(name)} is a link leading out of the plugin (${link})`);
            }
            links.push({ name, target });
          } else if (!['File', 'OldFile', 'ContiguousFile', 'Directory'].includes(entry.type)) {
            refuse('UNSAFE_ARCHIVE', `The archive entry ${JSON.stringify(name)} is a ${entry.type}: only files, folders and links inside are taken`);
          }
          const normalized = path.posix.normalize(name);
          if (/^([^/]+\/)?plugin\.json$/.test(normalized) && entry.type === 'File' && (entry.size ?? 0) <= MAX_MANIFEST_BYTES) {
            const chunks: Buffer[] = [];
            entry.on('data', (chunk: Buffer) => chunks.push(chunk));
            entry.on('end', () => manifests.set(normalized, Buffer.concat(chunks).toString('utf8')));
          } else {
            entry.resume();
          }
        },
      });
    } catch (error) {
      throw new Refusal('BAD_ARCHIVE', `The archive cannot be read: ${(error as Error).message}`, 422, { field: 'source' });
    }
    if (problem) throw problem;
    if (names.length === 0) throw new Refusal('BAD_ARCHIVE', 'The archive is empty or not a tar.gz archive', 422, { field: 'source' });
    if (manifests.has('plugin.json')) return { manifestText: manifests.get('plugin.json'), strip: 0 };
    const tops = new Set(names.map((name) => path.posix.normalize(name).split('/')[0]).filter((top) => top && top !== '.'));
    const [top] = [...tops];
    if (tops.size === 1 && manifests.has(`${top}/plugin.json`)) {
      // Every entry is in that folder: a link must stay inside it once the folder is stripped.
      const outside = links.find((link) => !link.target.startsWith(`${top}/`));
      if (outside)
        throw new Refusal('UNSAFE_ARCHIVE', `The archive entry ${JSON.stringify(outside.name)} is a link leading out of the plugin`, 422, { field: 'source' });
      return { manifestText: manifests.get(`${top}/plugin.json`), strip: 1 };
    }
    return { manifestText: undefined, strip: 0 };
  }
}
