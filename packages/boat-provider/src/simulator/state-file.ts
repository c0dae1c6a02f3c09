import { createHash } from "node:crypto";
import { closeSync, fstatSync, fsyncSync, ftruncateSync, openSync, readFileSync, writeSync } from "node:fs";
import { writeFileAtomic } from "@drydock/json-journal";
import { BoatSimulatorError } from "../errors.js";
import {
  type SimStateFile,
  type SimStateLogRecord,
  simStateFileSchema,
  simStateLogRecordSchema,
} from "../schema.js";

/*
 * The simulator's persistence: a snapshot (`stateFile`, JSON, replaced atomically) and beside it a log
 * (`<stateFile>.log`) to which every committed change appends one line and fsyncs it, so a change costs
 * the size of what it touched, not of every Boat ever created. A line is `<16 hex> <json>\n`: the first 16
 * hex digits of the SHA-256 of the JSON, a space, a `SimStateLogRecord`. At start the log is replayed over
 * the snapshot and compacted away (new snapshot, then an empty log). Records hold values, not deltas, so a
 * log that outlived a compaction (killed between the two writes) replays onto its own snapshot harmlessly.
 */

const CHECKSUM_HEX = 16;
const NEWLINE = 0x0a;

/** The log beside a state file. */
export function stateLogPath(stateFile: string): string {
  return `${stateFile}.log`;
}

function checksum(json: string | Uint8Array): string {
  return createHash("sha256").update(json).digest("hex").slice(0, CHECKSUM_HEX);
}

function invalid(
  message: string,
  extra: { path: string; offset?: number; cause?: unknown },
): BoatSimulatorError {
  return new BoatSimulatorError({ code: "simulator_state_invalid", message, ...extra });
}

function readOrNull(path: string): Buffer | null {
  try {
    return readFileSync(path);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return null;
    throw invalid(
      `The simulator state file ${path} could not be read; it was left untouched. Fix its permissions or remove it to start empty.`,
      { path, cause: error },
    );
  }
}

/** The snapshot: version 1 (the whole-file format) or 2; null when there is none. */
function loadSnapshot(path: string): SimStateFile | null {
  const raw = readOrNull(path);
  if (raw === null) return null;
  let json: unknown;
  try {
    json = JSON.parse(raw.toString("utf8"));
  } catch (error) {
    throw invalid(
      `The simulator state file ${path} is not valid JSON; it was left untouched. Remove it to start empty.`,
      { path, cause: error },
    );
  }
  const parsed = simStateFileSchema.safeParse(json);
  if (!parsed.success) {
    throw invalid(
      `The simulator state file ${path} does not match its schema; it was left untouched. Remove it to start empty.`,
      { path, cause: parsed.error },
    );
  }
  return parsed.data;
}

/** One complete log line, or why it is not a record. */
function parseLine(line: Buffer): SimStateLogRecord | string {
  const sum = line.subarray(0, CHECKSUM_HEX).toString("latin1");
  if (line.length <= CHECKSUM_HEX + 1 || !/^[0-9a-f]{16}$/.test(sum) || line[CHECKSUM_HEX] !== 0x20) {
    return "it does not start with a checksum";
  }
  const body = line.subarray(CHECKSUM_HEX + 1);
  if (checksum(body) !== sum) return "its checksum does not match its bytes";
  let json: unknown;
  try {
    json = JSON.parse(body.toString("utf8"));
  } catch {
    return "it is not valid JSON";
  }
  const parsed = simStateLogRecordSchema.safeParse(json);
  return parsed.success ? parsed.data : "it does not match the record schema";
}

/**
 * Replays `log` over `base`. A last record without its newline was cut short by a kill mid-append (it was
 * never acknowledged): it is dropped. Any complete record that is not intact refuses, naming its offset.
 */
function replay(logPath: string, log: Buffer, base: SimStateFile): SimStateFile {
  const boats = new Map(base.sandboxes.map((boat) => [boat.id, boat]));
  const operations = new Map(base.operations.map((op) => [op.id, op]));
  const keys = new Map(base.keys.map((key) => [key.keyHash, key]));
  let { clockOffsetMs, counters } = base;
  let offset = 0;
  for (;;) {
    const end = log.indexOf(NEWLINE, offset);
    if (end === -1) break;
    const record = parseLine(log.subarray(offset, end));
    if (typeof record === "string") {
      throw invalid(
        `The simulator state log ${logPath} has a damaged record at byte offset ${offset} (${record}), with ${log.length - end - 1} bytes after it; nothing was changed. Committed changes could be lost, so the simulator does not start: restore the file from a backup, or remove ${logPath} and its state file to start empty.`,
        { path: logPath, offset },
      );
    }
    ({ clockOffsetMs, counters } = record);
    for (const boat of record.sandboxes) boats.set(boat.id, boat);
    for (const op of record.operations) operations.set(op.id, op);
    for (const key of record.keys) keys.set(key.keyHash, key);
    offset = end + 1;
  }
  return {
    version: 2,
    clockOffsetMs,
    counters,
    sandboxes: [...boats.values()],
    operations: [...operations.values()],
    keys: [...keys.values()],
  };
}

/**
 * Everything committed: the snapshot with its log replayed over it (read only, nothing is written).
 * Neither file → null (a fresh simulator). Unreadable or invalid → a typed error and the bytes stay as they
 * are: a simulator that silently started empty would forget Boats that tests (and billing checks) expect
 * to still exist.
 */
export function readSimulatorState(stateFile: string): SimStateFile | null {
  const snapshot = loadSnapshot(stateFile);
  const logPath = stateLogPath(stateFile);
  const log = readOrNull(logPath);
  if (log === null || log.length === 0) return snapshot;
  if (snapshot === null) {
    throw invalid(
      `The simulator state log ${logPath} exists but its state file ${stateFile} does not; nothing was changed. The log holds only the changes since that file was written: restore ${stateFile}, or remove ${logPath} to start empty.`,
      { path: stateFile },
    );
  }
  return replay(logPath, log, snapshot);
}

function unwritable(path: string, detail: string, cause: unknown): BoatSimulatorError {
  return new BoatSimulatorError({
    code: "simulator_state_unwritable",
    message: `The simulator could not write ${path}; ${detail} Check the disk and the directory's permissions.`,
    cause,
    path,
  });
}

/**
 * An open state log: `append` returns once the record is on disk (fsynced). With `fsync: false` it returns
 * once the record is written (in the page cache: it survives a kill of the process, not a power loss on its
 * own); the next fsynced append, or `close`, flushes it with everything before it.
 */
export interface StateLog {
  append(record: SimStateLogRecord, options?: { fsync?: boolean }): void;
  close(): void;
}

/**
 * Compacts `state` into a fresh snapshot (atomic: temp, fsync, rename, fsync of the directory), starts an
 * empty log beside it and opens it for appending.
 */
export function openStateLog(stateFile: string, state: SimStateFile): StateLog {
  const logPath = stateLogPath(stateFile);
  let fd: number;
  let size: number;
  try {
    writeFileAtomic(stateFile, `${JSON.stringify({ ...state, version: 2 })}\n`, { mode: 0o600 });
    writeFileAtomic(logPath, "", { mode: 0o600 });
    fd = openSync(logPath, "a", 0o600);
    size = fstatSync(fd).size;
  } catch (error) {
    throw unwritable(stateFile, "the simulator did not start (its previous state was kept).", error);
  }
  /** Set once an append failed in a way that leaves the log's tail unknown: every later change refuses. */
  let broken: unknown;
  let closed = false;
  /** A record was written without its fsync (a counter-only change). */
  let unsynced = false;
  return {
    append(record, options) {
      if (closed)
        throw unwritable(logPath, "the simulator is closed; the change was not made durable.", null);
      if (broken !== undefined) {
        throw unwritable(
          logPath,
          "an earlier write to it failed, so no change is made durable until the simulator restarts.",
          broken,
        );
      }
      const json = JSON.stringify(record);
      const line = Buffer.from(`${checksum(json)} ${json}\n`, "utf8");
      try {
        let written = 0;
        while (written < line.length) {
          const n = writeSync(fd, line, written, line.length - written);
          // A write that makes no progress would loop forever: the I/O error it is.
          if (!(n > 0)) throw Object.assign(new Error("write made no progress"), { code: "EIO" });
          written += n;
        }
        size += line.length;
        unsynced = options?.fsync === false;
        if (!unsynced) fsyncSync(fd);
      } catch (error) {
        broken = error;
        // A half-written line must not become the middle of the log: cut it back (if this fails too, it
        // stays the torn last record, which a restart drops, since nothing is appended after it).
        try {
          ftruncateSync(fd, size);
        } catch {
          // See above.
        }
        throw unwritable(logPath, "the change was not made durable.", error);
      }
    },
    close() {
      if (closed) return;
      closed = true;
      try {
        if (unsynced && broken === undefined) fsyncSync(fd);
      } finally {
        closeSync(fd);
      }
    },
  };
}
