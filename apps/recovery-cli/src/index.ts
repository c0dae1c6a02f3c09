// @drydock/recovery-cli: the `drydock` operator tool as a library (the binary is src/main.ts). Commands
// are plain functions of a CommandContext that return data; `main` parses, renders and maps errors to exit
// codes, with injected streams.

export { shellQuote } from "@drydock/recovery-controller";
export { type CreateRow, createsAdopt, createsList, createsRetire } from "./commands/creates.js";
export { type DeletionRow, deletionsList, deletionsReconcile, deletionsRetry } from "./commands/deletions.js";
export { type LockRow, locksGc, locksList } from "./commands/locks.js";
export { reconcilePlan } from "./commands/reconcile.js";
export {
  type RestoreListItem,
  restoreCommand,
  restoresAction,
  restoresList,
  restoresShow,
} from "./commands/restores.js";
export { collectStatus, type Finding, renderStatus, type StatusData, status } from "./commands/status.js";
export { type CommandContext, createContext, type GlobalOptions } from "./context.js";
export {
  CLI_ERROR_EXIT,
  CliError,
  type CliErrorCode,
  classifyError,
  EXIT_CODES,
  type ExitCode,
  isCliError,
  toSnakeCode,
} from "./errors.js";
export { type BufferIo, bufferIo, type CliIo } from "./io.js";
export {
  BoatActionDocumentSchema,
  CompletionDocumentSchema,
  CreatesListDocumentSchema,
  DeletionsListDocumentSchema,
  ErrorDocumentSchema,
  JSON_SCHEMA_VERSION,
  JSON_SCHEMAS,
  type JsonCommand,
  LocksGcDocumentSchema,
  LocksListDocumentSchema,
  ReconcileDocumentSchema,
  RestoreActionDocumentSchema,
  RestoresListDocumentSchema,
  RestoresPurgeDocumentSchema,
  RestoresShowDocumentSchema,
  StatusDocumentSchema,
  StorageMigrateDocumentSchema,
} from "./json-schemas.js";
export { commandTree, fencedOptions, type MainOptions, main } from "./program.js";
export { type Progress, progressReporter } from "./progress.js";
export type { Rendered } from "./render.js";
