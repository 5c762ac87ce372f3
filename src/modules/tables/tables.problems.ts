import { GraphQLError } from 'graphql';
import { tableKey, type CatalogTable } from './tables.catalog';
import { StatementCompiler } from './tables.compiler';
import { sameTable, tableText, type BoolExp, type TrackedTableEntry } from './tables.metadata';
import { resolveTables, type Inconsistency, type TableModel } from './tables.model';

/* What of the tracked tables' metadata cannot be served: get_inconsistent_metadata's answer, and what run_sql's changes break. */

/** Why `role`'s filter on `table` cannot be compiled against `tables`, if it cannot. */
export function filterProblem(tables: readonly TableModel[], table: TableModel, role: string): string | undefined {
  const permission = table.permissions.get(role);
  return permission ? conditionProblem(tables, table, role, permission.filter) : undefined;
}

/** Why a permission's boolean expression (a filter or a check) of `role` on `table` cannot be compiled against `tables`, if it cannot. */
export function conditionProblem(tables: readonly TableModel[], table: TableModel, role: string, condition: BoolExp): string | undefined {
  try {
    new StatementCompiler({ role, admin: false }, new Map(tables.map((item) => [tableKey(item.table), item]))).conditionOf(table, condition);
    return undefined;
  } catch (error) {
    if (!(error instanceof GraphQLError)) throw error;
    return error.message;
  }
}

/** What cannot be served of `entries` against `catalog`: resolving's inconsistencies, and permission filters that no longer compile. */
export function problemsOf(entries: readonly TrackedTableEntry[], catalog: Map<string, CatalogTable>): Inconsistency[] {
  const { tables, inconsistencies } = resolveTables(entries, catalog);
  for (const entry of entries) {
    const model = tables.find((candidate) => sameTable(candidate.table, entry.table));
    if (!model) continue;
    for (const { role, permission } of entry.select_permissions ?? []) {
      const problem = model.permissions.has(role) ? filterProblem(tables, model, role) : undefined;
      if (problem) inconsistencies.push({ type: 'select_permission', name: `${role} of ${tableText(entry.table)}`, reason: problem, definition: permission });
    }
    for (const kind of ['insert', 'update', 'delete'] as const) {
      const resolved = kind === 'insert' ? model.insertPermissions : kind === 'update' ? model.updatePermissions : model.deletePermissions;
      for (const { role, permission } of entry[`${kind}_permissions`] ?? []) {
        if (!resolved.has(role)) continue;
        const conditions = [(permission as { filter?: BoolExp }).filter, (permission as { check?: BoolExp }).check].filter(
          (item): item is BoolExp => item !== undefined,
        );
        const problem = conditions.map((condition) => conditionProblem(tables, model, role, condition)).find((item) => item !== undefined);
        if (problem)
          inconsistencies.push({ type: `${kind}_permission`, name: `${role} of ${tableText(entry.table)}`, reason: problem, definition: permission });
      }
    }
  }
  return inconsistencies;
}

export const problemKey = (item: Inconsistency) => `${item.type} ${item.name} ${item.reason}`;

export function describeProblem(item: Inconsistency): string {
  const kind = item.type === 'table' ? 'table' : item.type.endsWith('_permission') ? item.type.replace('_', ' ') : 'relationship';
  return `${kind} ${item.name} (${item.reason})`;
}
