import os from 'node:os';
import type { DataSource } from 'typeorm';
import { PLINTH_VERSION } from '../../common/package-version';
import type { Config } from '../../config';
import { one } from '../../db/sql';

/** What GET /api/env answers: where and how this instance runs. */
export interface EnvironmentInfo {
  plinthVersion: string;
  nodeEnv: string;
  nodeVersion: string;
  platform: string;
  arch: string;
  hostname: string;
  pid: number;
  uptimeSeconds: number;
  processRoles: string[];
  projectPath: string;
  settingsFile: string;
  publicUrl: string;
  database: { kind: 'embedded' | 'DATABASE_URL'; serverVersion: string | null };
  memory: { rssBytes: number; heapUsedBytes: number };
}

/** The facts of this instance's environment (GET /api/env). */
export async function environmentInfo(config: Config, dataSource: DataSource): Promise<EnvironmentInfo> {
  const version = await one<{ server_version: string }>(dataSource, 'SHOW server_version').catch(() => undefined);
  const memory = process.memoryUsage();
  return {
    plinthVersion: PLINTH_VERSION,
    nodeEnv: config.env,
    nodeVersion: process.version,
    platform: process.platform,
    arch: process.arch,
    hostname: os.hostname(),
    pid: process.pid,
    uptimeSeconds: Math.round(process.uptime()),
    processRoles: [...config.processRoles],
    projectPath: config.admin.projectPath,
    settingsFile: config.admin.settingsFile,
    publicUrl: config.publicUrl,
    database: { kind: config.database.url ? 'DATABASE_URL' : 'embedded', serverVersion: version?.server_version ?? null },
    memory: { rssBytes: memory.rss, heapUsedBytes: memory.heapUsed },
  };
}
