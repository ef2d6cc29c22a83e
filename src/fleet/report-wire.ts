/**
 * A `StopReport` as it travels to a stop's requester (inside the turn's Redis record and its
 * `ended` message). JSON of an `Error` is `{}`, so the report's `ledgerError` goes as its
 * `{ name, message, code }`: what the requester needs to tell a ledger failure from another.
 */
import { messageOf } from '../base/render.js';
import type { StopReport } from '../turn/report.js';

/** What a requester receives as `report.ledgerError`. */
export interface WireError { name: string; message: string; code?: string }

/** `error`'s name, message and `code` (when it has a string one). */
function errorFields(error: unknown): WireError {
  if (!(error instanceof Error)) return { name: 'Error', message: messageOf(error) };
  const code = (error as { code?: unknown }).code;
  return { name: error.name, message: error.message, ...(typeof code === 'string' ? { code } : {}) };
}

/** `report` as JSON, its `ledgerError` (if any) as `{ name, message, code }`. */
export function reportToJson(report: StopReport): string {
  return JSON.stringify(report.ledgerError === undefined ? report : { ...report, ledgerError: errorFields(report.ledgerError) });
}
