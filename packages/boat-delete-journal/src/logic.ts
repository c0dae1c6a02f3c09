// @drydock/boat-delete-journal/logic: the journal's pure steps, argument checks and invariants, for storage
// backends that keep the fences elsewhere (@drydock/storage-sqlite). The file journal and every other backend
// run these very functions, so the rules have one source of truth. Not for application code.
export { deletePaused, invalidArgument } from "./errors.js";
export { assertBoatId, assertBotId, parseExpected, parseIdentity, parseOperation } from "./internal/args.js";
export { checkDeleteJournal } from "./internal/check.js";
export {
  acceptStep,
  blockStep,
  getOf,
  hasPendingForBot,
  prepareStep,
  restampStep,
  retireStep,
  type Step,
  sameRecord,
  snapshotOf,
} from "./internal/logic.js";
