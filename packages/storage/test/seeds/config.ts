// Minimal stand-in for the seeds' config.ts (test only; not part of drydock): the seed modules read DATA_DIR.
export const DATA_DIR: string = (() => {
  const dir = process.env.DRYDOCK_SEED_DATA_DIR;
  if (!dir) throw new Error("DRYDOCK_SEED_DATA_DIR is not set");
  return dir;
})();
