/**
 * @drydock/boat-provider/simulator — a real HTTP twin of boat.dev API v1 with fault injection, for tests
 * and for running drydock on a machine without a provider account.
 */

export {
  BoatSimulatorError,
  type BoatSimulatorErrorCode,
  isBoatSimulatorError,
} from "../errors.js";
export {
  clockBodySchema,
  FAULT_ACTIONS,
  type FaultAction,
  type FaultRule,
  faultRuleSchema,
  faultsBodySchema,
  type SimOperationRecord,
  type SimSandboxRecord,
  type SimSeedBody,
  type SimStateFile,
  type SimStateLogRecord,
  type SimStats,
  simOperationRecordSchema,
  simSandboxPatchSchema,
  simSandboxRecordSchema,
  simSeedBodySchema,
  simStateFileSchema,
  simStateLogRecordSchema,
  simStatsSchema,
} from "../schema.js";
export { type BoatSimulator, type BoatSimulatorOptions, startBoatSimulator } from "./server.js";
export { readSimulatorState, stateLogPath } from "./state-file.js";
