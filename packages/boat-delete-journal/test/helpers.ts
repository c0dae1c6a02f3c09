import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { expect } from "vitest";

export { deadPid, spawnWorker, type Worker } from "@drydock/test-kit";

import { isJournalStateError } from "../src/index.js";

/** A fresh `<tmp>/data` path (not yet created) and a cleanup for it. */
export function tempDataDir(): { root: string; dataDir: string; cleanup: () => void } {
  const root = mkdtempSync(join(tmpdir(), "drydock-bdj-"));
  return { root, dataDir: join(root, "data"), cleanup: () => rmSync(root, { recursive: true, force: true }) };
}

/** Awaits a refusal and returns it, failing the test on success or on another error class. */
export async function refusal(promise: Promise<unknown>) {
  try {
    await promise;
  } catch (error) {
    if (isJournalStateError(error)) return error;
    throw error;
  }
  throw new Error("expected a JournalStateError");
}

export async function expectPaused(promise: Promise<unknown>, detail: string): Promise<void> {
  const error = await refusal(promise);
  expect({ code: error.code, status: error.status, detail: error.detail }).toEqual({
    code: "BOAT_DELETE_PAUSED",
    status: 503,
    detail,
  });
  expect(error.message).toBe(
    `Cloud computer deletion is paused because its recovery state is ${detail}. ` +
      "Check the Boat provider before repairing drydock's local state.",
  );
}
