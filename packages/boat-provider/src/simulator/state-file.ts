import { randomBytes } from "node:crypto";
import { closeSync, fsyncSync, openSync, readFileSync, renameSync, unlinkSync, writeSync } from "node:fs";
import { dirname } from "node:path";
import { BoatSimulatorError } from "../errors.js";
import { type SimStateFile, simStateFileSchema } from "../schema.js";

/**
 * Reads the simulator's state file. Missing → null (a fresh simulator). Unreadable or invalid → a typed
 * error and the bytes stay as they are: a simulator that silently started empty would forget Boats that
 * tests (and billing checks) expect to still exist.
 */
export function loadStateFile(path: string): SimStateFile | null {
  let raw: string;
  try {
    raw = readFileSync(path, "utf8");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return null;
    throw new BoatSimulatorError({
      code: "simulator_state_invalid",
      message: `The simulator state file ${path} could not be read; it was left untouched. Fix its permissions or remove it to start empty.`,
      cause: error,
    });
  }
  let json: unknown;
  try {
    json = JSON.parse(raw);
  } catch (error) {
    throw new BoatSimulatorError({
      code: "simulator_state_invalid",
      message: `The simulator state file ${path} is not valid JSON; it was left untouched. Remove it to start empty.`,
      cause: error,
    });
  }
  const parsed = simStateFileSchema.safeParse(json);
  if (!parsed.success) {
    throw new BoatSimulatorError({
      code: "simulator_state_invalid",
      message: `The simulator state file ${path} does not match its schema; it was left untouched. Remove it to start empty.`,
      cause: parsed.error,
    });
  }
  return parsed.data;
}

/**
 * Writes the state file so that after a crash it holds either the previous or the new state, never a mix:
 * temp file in the same directory → fsync → rename over the target → fsync the directory (without the last
 * step a power loss can forget the rename, leaving the old state as if the commit never happened).
 */
export function writeStateFile(path: string, state: SimStateFile): void {
  const temp = `${path}.tmp-${process.pid}-${randomBytes(6).toString("hex")}`;
  const bytes = Buffer.from(`${JSON.stringify(state)}\n`, "utf8");
  let fd: number | undefined;
  try {
    fd = openSync(temp, "wx", 0o600);
    let offset = 0;
    while (offset < bytes.length) offset += writeSync(fd, bytes, offset, bytes.length - offset);
    fsyncSync(fd);
    closeSync(fd);
    fd = undefined;
    renameSync(temp, path);
    const dir = openSync(dirname(path), "r");
    try {
      fsyncSync(dir);
    } finally {
      closeSync(dir);
    }
  } catch (error) {
    if (fd !== undefined) closeSync(fd);
    try {
      unlinkSync(temp);
    } catch {
      // Already renamed or never created; nothing to sweep.
    }
    throw new BoatSimulatorError({
      code: "simulator_state_unwritable",
      message: `The simulator could not write its state file ${path}; the change was not made durable. Check the disk and the directory's permissions.`,
      cause: error,
    });
  }
}
