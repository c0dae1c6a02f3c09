import { constants } from "node:fs";
import { basename, dirname, resolve } from "node:path";
import type { FileOps } from "@drydock/file-lock";

/**
 * Sabotage controls: seams that break a durable writer *without* editing it, so a sweep can be shown to fail
 * (a check that never fails proves nothing). They wrap the model's `ops` inside a workload; a skipped call
 * never reaches the model, so it records nothing as durable, exactly as if the writer had not made it.
 */

/** One flush the code under test asked for. */
export interface FlushRequest {
  /** The path the descriptor was opened with through this seam (resolved), or null if unknown. */
  path: string | null;
  directory: boolean;
  /**
   * For a directory: the state-changing calls that named an entry in it (`linkSync`, `renameSync`,
   * `unlinkSync`, …) since it was last asked to flush, in order. Empty for a file.
   */
  changes: readonly (keyof FileOps)[];
}

/** Whether open flags may create the file (O_CREAT, or a "w"/"a" string). */
function creates(flags: unknown): boolean {
  if (typeof flags === "number") return (flags & constants.O_CREAT) !== 0;
  return typeof flags === "string" && /^[wa]/.test(flags);
}

/** Calls that add, remove or rename a directory entry, and which of their arguments are the paths. */
const ENTRY_CALLS: Partial<Record<keyof FileOps, number[]>> = {
  linkSync: [1],
  unlinkSync: [0],
  renameSync: [0, 1],
  mkdirSync: [0],
  rmdirSync: [0],
  rmSync: [0],
  symlinkSync: [1],
  writeFileSync: [0],
  /** Only with O_CREAT (see `creates`). */
  openSync: [0],
};

/**
 * Wraps `ops` so that every flush (`fsyncSync`, and `fsync` the same way) for which `skip` answers true
 * succeeds without flushing: the writer believes its data or names are durable, the model knows they are not.
 */
export function skipFlushes(ops: FileOps, skip: (request: FlushRequest) => boolean): FileOps {
  const pathOfFd = new Map<number, string>();
  const changesOf = new Map<string, (keyof FileOps)[]>();
  const wrapped = { ...ops } as Record<keyof FileOps, (...args: unknown[]) => unknown>;
  const call = (name: keyof FileOps, args: unknown[]): unknown =>
    (ops[name] as (...a: unknown[]) => unknown)(...args);

  for (const [name, positions] of Object.entries(ENTRY_CALLS) as [keyof FileOps, number[]][]) {
    wrapped[name] = (...args: unknown[]) => {
      const result = call(name, args);
      const changesEntry = name !== "openSync" || creates(args[1]);
      for (const at of changesEntry ? positions : []) {
        const path = args[at];
        if (typeof path !== "string" && !(path instanceof URL) && !Buffer.isBuffer(path)) continue;
        const dir = dirname(resolve(String(path)));
        changesOf.set(dir, [...(changesOf.get(dir) ?? []), name]);
      }
      if (name === "openSync" && typeof result === "number") pathOfFd.set(result, resolve(String(args[0])));
      return result;
    };
  }
  wrapped.closeSync = (fd: unknown) => {
    pathOfFd.delete(fd as number);
    return call("closeSync", [fd]);
  };
  wrapped.close = (fd: unknown, ...rest: unknown[]) => {
    pathOfFd.delete(fd as number);
    return call("close", [fd, ...rest]);
  };

  /** True when this flush is to be skipped; throws like fsync would on a bad descriptor (or after the crash). */
  const decide = (fd: number): boolean => {
    const directory = ops.fstatSync(fd).isDirectory();
    const path = pathOfFd.get(fd) ?? null;
    const changes = directory && path !== null ? (changesOf.get(path) ?? []) : [];
    if (directory && path !== null) changesOf.delete(path);
    return skip({ path, directory, changes });
  };
  wrapped.fsyncSync = (fd: unknown) => {
    if (decide(fd as number)) return;
    return call("fsyncSync", [fd]);
  };
  wrapped.fsync = (fd: unknown, done: unknown) => {
    const callback = done as (error: NodeJS.ErrnoException | null) => void;
    let skipped: boolean;
    try {
      skipped = decide(fd as number);
    } catch (error) {
      process.nextTick(() => callback(error as NodeJS.ErrnoException));
      return;
    }
    if (skipped) process.nextTick(() => callback(null));
    else call("fsync", [fd, done]);
  };
  return wrapped as unknown as FileOps;
}

/** The classic durability bug: no flush of any directory, so new, renamed and removed names are volatile. */
export function withoutDirectoryFlushes(ops: FileOps): FileOps {
  return skipFlushes(ops, (request) => request.directory);
}

/** No flush of a directory a hard link was just made in (publish-by-link without the directory fsync). */
export function withoutFlushAfterLink(ops: FileOps): FileOps {
  return skipFlushes(ops, (request) => request.directory && request.changes.includes("linkSync"));
}

/** No flush of a file whose name marks it as a temp (`*.tmp`): it can be renamed or linked into place empty. */
export function withoutTempFileFlushes(ops: FileOps): FileOps {
  return skipFlushes(
    ops,
    (request) => !request.directory && request.path !== null && /\.tmp$/.test(basename(request.path)),
  );
}
