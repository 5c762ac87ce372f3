import type { DataSource } from 'typeorm';
import type { ErrorTrackingConfig } from '../../config';
import type { IncidentsService } from './incidents.service';
import { rows } from '../../db/sql';
import type { SlosService } from './slos.service';

/** Events removed per statement, so that a large clean-up never holds long locks. */
const DELETE_BATCH = 10_000;
/** Request outcomes older than the longest SLO window are of no use. */
const OUTCOME_RETENTION_DAYS = 90;

export interface RoundReport {
  sloAlerts: number;
  spikes: number;
  eventsRemoved: number;
}

/**
 * Background work of error tracking, a recurring task (every ERRORS_MAINTENANCE_INTERVAL_SECONDS,
 * one process at a time): SLO burn-rate alerts and error spikes open (or add to) incidents, and
 * events older than ERRORS_EVENT_RETENTION_DAYS are removed (errors keep their counts).
 */
export class MaintenanceService {
  constructor(
    private readonly dataSource: DataSource,
    private readonly slos: SlosService,
    private readonly incidents: IncidentsService,
    private readonly settings: ErrorTrackingConfig,
  ) {}

  get intervalMs(): number {
    return this.settings.maintenanceIntervalSeconds * 1000;
  }

  async round(): Promise<RoundReport> {
    return { sloAlerts: await this.checkSlos(), spikes: await this.checkSpikes(), eventsRemoved: await this.removeOldEvents() };
  }

  private async checkSlos(): Promise<number> {
    const slos = await this.slos.all();
    if (slos.length === 0) return 0;
    const figures = await this.slos.figuresOf(slos);
    let raised = 0;
    for (const slo of slos) {
      for (const alert of figures.get(slo.id)!.alerts) {
        const { opened } = await this.incidents.raise({
          projectId: slo.projectId,
          cause: 'slo',
          causeId: slo.id,
          type: alert,
          title: `SLO "${slo.name}" is burning its error budget`,
          description: `The ${alert} alert of SLO "${slo.name}" (${slo.service}, target ${slo.targetPercentage}%) fired: the error budget is being spent ${
            alert === 'fast-burn' ? '14.4' : '6'
          } times faster than the window allows.`,
          severity: alert === 'fast-burn' ? 'critical' : 'major',
          service: slo.service,
        });
        if (opened) raised++;
      }
    }
    return raised;
  }

  private async checkSpikes(): Promise<number> {
    const spiking = await rows<{ project_id: number; service: string; events: string }>(
      this.dataSource,
      `SELECT e.project_id, p.service, count(*) AS events FROM error_events e JOIN error_projects p ON p.id = e.project_id
       WHERE e.received_at > now() - make_interval(mins => $1) GROUP BY e.project_id, p.service HAVING count(*) >= $2`,
      [this.settings.spikeWindowMinutes, this.settings.spikeThreshold],
    );
    let raised = 0;
    for (const spike of spiking) {
      const { opened } = await this.incidents.raise({
        projectId: spike.project_id,
        cause: 'error_spike',
        causeId: String(spike.project_id),
        type: 'error-spike',
        title: `Error spike in ${spike.service}`,
        description: `${spike.events} error events in the last ${this.settings.spikeWindowMinutes} minutes (ERRORS_SPIKE_THRESHOLD is ${this.settings.spikeThreshold}).`,
        severity: 'major',
        service: spike.service,
      });
      if (opened) raised++;
    }
    return raised;
  }

  private async removeOldEvents(): Promise<number> {
    let removed = 0;
    for (;;) {
      const [, count] = (await this.dataSource.query(
        `DELETE FROM error_events WHERE ctid = ANY(ARRAY(
           SELECT ctid FROM error_events WHERE received_at < now() - make_interval(days => $1) LIMIT ${DELETE_BATCH}))`,
        [this.settings.eventRetentionDays],
      )) as [unknown, number];
      removed += count;
      if (count < DELETE_BATCH) break;
    }
    await this.dataSource.query(`DELETE FROM request_outcomes WHERE minute < now() - interval '${OUTCOME_RETENTION_DAYS} days'`);
    return removed;
  }
}
