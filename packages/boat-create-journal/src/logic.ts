// @drydock/boat-create-journal/logic: the journal's pure steps, argument checks and invariants, for storage
// backends that keep the rows elsewhere (@drydock/storage-sqlite). The file journal and every other backend
// run these very functions, so the rules have one source of truth. Not for application code.
export { createPaused, invalidArgument } from "./errors.js";
export {
  assertBoatId,
  assertBotId,
  assertRequestBody,
  parseRequest,
  readClock,
  rowFacts,
} from "./internal/args.js";
export { checkCreateJournal } from "./internal/check.js";
export {
  adoptOnceStep,
  adoptStep,
  type BoatCreateRowFacts,
  beginStep,
  type CreateContext,
  discardStep,
  rememberStep,
  resolveStep,
  retireOnceStep,
  retireStep,
  type Step,
  snapshotOf,
  viewOf,
} from "./internal/logic.js";
