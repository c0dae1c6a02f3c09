// File-system seam shared by every package that writes durable state.

export type { FailNthOptions, FaultyFileOps } from "./fs.js";
export { errnoError, type FileOpName, type FileOps, failNthCall, nodeFileOps } from "./fs.js";
