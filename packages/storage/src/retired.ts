import { readFileSync } from "node:fs";
import type { StorageKind } from "./contract.js";
import { StorageError } from "./errors.js";

/**
 * A JSON file of the `file` backend after `migrateStorage` moved its state elsewhere: rewritten (atomically,
 * under its own lock) as `{"version":"migrated","to":…,"at":…,"was":<the document it held>}`. The seeds'
 * loaders accept only `version: 1`, json-journal's schemas too, so neither the seeds' code nor any drydock
 * will write to it again; `was` keeps the state it held, so nothing is lost if a person must look.
 */
export const RETIRED_VERSION = "migrated";

export interface RetiredMarker {
  version: typeof RETIRED_VERSION;
  to: StorageKind;
  at: number;
}

/** The retirement marker in `text`, or null when it is anything else (a live document, damage, …). */
export function parseRetired(text: string): RetiredMarker | null {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return null;
  }
  const v = value as { version?: unknown; to?: unknown; at?: unknown } | null;
  if (typeof v !== "object" || v === null || v.version !== RETIRED_VERSION) return null;
  if (typeof v.to !== "string" || typeof v.at !== "number") return null;
  return { version: RETIRED_VERSION, to: v.to as StorageKind, at: v.at };
}

/** The marker of the file at `path`, or null (absent, unreadable, or not retired). */
export function readRetired(path: string): RetiredMarker | null {
  try {
    return parseRetired(readFileSync(path, "utf8"));
  } catch {
    return null;
  }
}

/** The refusal for a retired file: it names where the state went and what to do. Nothing was changed. */
export function retiredError(path: string, marker: RetiredMarker): StorageError {
  return new StorageError({
    code: "STORAGE_BACKEND_MISMATCH",
    message: `${path} was retired by \`drydock storage migrate\` at ${new Date(marker.at).toISOString()}: its state now lives in the ${marker.to} storage backend. Nothing was changed. Start drydock with DRYDOCK_STORAGE=${marker.to}; if that migration was interrupted, run the same migrate command again to finish it.`,
  });
}
