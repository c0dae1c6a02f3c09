// @drydock/power-loss: a power-loss model of the file system (ALICE's weak persistence model) behind the
// FileOps seam, and the exhaustive crash sweep that checks durable formats against it.
export {
  type CrashImageOptions,
  type CrashImageResult,
  type CrashMode,
  createPowerLossFs,
  type PowerLossFs,
  type PowerLossFsOptions,
  scratchFileOps,
  seededRandom,
} from "./model.js";
export {
  type FlushRequest,
  skipFlushes,
  withoutDirectoryFlushes,
  withoutFlushAfterLink,
  withoutTempFileFlushes,
} from "./sabotage.js";
export {
  type AckLog,
  crashSweep,
  type ImageContext,
  type SweepOptions,
  type SweepResult,
  type Violation,
} from "./sweep.js";
