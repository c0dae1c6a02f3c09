import * as nodeFs from "node:fs";
import { dirname, resolve } from "node:path";

/**
 * The file-system seam (SQLite's `aSyscall[]` idea): every drydock package that touches the disk does it
 * through a `FileOps`, so tests can fail any single call (`failNthCall`) and the power-loss model can keep
 * unsynced writes volatile. Synchronous calls, but one: critical sections are short, and a sync call
 * cannot be interleaved by another task of this process between a check and the write that depends on it.
 *
 * The exceptions are `fsync` and `close` (node's callback forms). `fsync` flushes many files at once
 * (`fsyncAsync`): the kernel folds concurrent flushes into shared journal commits, which makes a
 * checkpoint or a restore of a thousand files about twice as fast as flushing them one by one. `close`
 * lets a restore release the last reference to a file it replaced on libuv's threads, where the kernel
 * frees the old blocks, instead of in the rename on the main thread. A `FileOps` that changes what
 * `fsyncSync` or `closeSync` means (a model, a counter, a no-op) must change `fsync` or `close` the same
 * way.
 */
export type FileOps = Pick<
  typeof nodeFs,
  | "openSync"
  | "closeSync"
  | "close"
  | "writeSync"
  | "readSync"
  | "fsyncSync"
  | "fsync"
  | "fstatSync"
  | "readFileSync"
  | "writeFileSync"
  | "linkSync"
  | "unlinkSync"
  | "renameSync"
  | "statSync"
  | "lstatSync"
  | "mkdirSync"
  | "readdirSync"
  | "rmdirSync"
  | "rmSync"
  | "chmodSync"
  | "fchmodSync"
  | "symlinkSync"
  | "readlinkSync"
  | "realpathSync"
  | "ftruncateSync"
  | "existsSync"
>;

export type FileOpName = keyof FileOps;

/** The real file system. */
export const nodeFileOps: FileOps = {
  openSync: nodeFs.openSync,
  closeSync: nodeFs.closeSync,
  close: nodeFs.close,
  writeSync: nodeFs.writeSync,
  readSync: nodeFs.readSync,
  fsyncSync: nodeFs.fsyncSync,
  fsync: nodeFs.fsync,
  fstatSync: nodeFs.fstatSync,
  readFileSync: nodeFs.readFileSync,
  writeFileSync: nodeFs.writeFileSync,
  linkSync: nodeFs.linkSync,
  unlinkSync: nodeFs.unlinkSync,
  renameSync: nodeFs.renameSync,
  statSync: nodeFs.statSync,
  lstatSync: nodeFs.lstatSync,
  mkdirSync: nodeFs.mkdirSync,
  readdirSync: nodeFs.readdirSync,
  rmdirSync: nodeFs.rmdirSync,
  rmSync: nodeFs.rmSync,
  chmodSync: nodeFs.chmodSync,
  fchmodSync: nodeFs.fchmodSync,
  symlinkSync: nodeFs.symlinkSync,
  readlinkSync: nodeFs.readlinkSync,
  realpathSync: nodeFs.realpathSync,
  ftruncateSync: nodeFs.ftruncateSync,
  existsSync: nodeFs.existsSync,
};

/** `fs.fsync(fd)` as a promise; an error thrown by the call itself (an injected fault) rejects it too. */
export function fsyncAsync(fs: FileOps, fd: number): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    fs.fsync(fd, (error) => (error ? reject(error) : resolve()));
  });
}

/** Calls that only look (never change the disk); `failNthCall` can be told to skip them. */
const READ_ONLY: ReadonlySet<FileOpName> = new Set<FileOpName>([
  "readFileSync",
  "readSync",
  "statSync",
  "lstatSync",
  "fstatSync",
  "readdirSync",
  "readlinkSync",
  "realpathSync",
  "existsSync",
]);

export interface FailNthOptions {
  /** 1-based index of the call to fail, counted over the calls that `count` selects. */
  n: number;
  /** errno code of the injected failure, e.g. "EIO", "ENOSPC", "EEXIST", "EPERM", "EXDEV", "ENOTSUP". */
  code: string;
  /** Which calls count toward `n` (default: every call). `"mutating"` skips pure reads. */
  count?: "all" | "mutating" | ((name: FileOpName, args: unknown[]) => boolean);
}

export interface FaultyFileOps {
  ops: FileOps;
  /** How many counted calls were made so far. */
  calls(): number;
  /** Whether the fault fired (the Nth counted call happened). */
  fired(): boolean;
}

/**
 * Wraps `ops` so that the Nth counted call throws an errno-shaped error instead of running. Drives the
 * "fail call N for N = 1 .. until the operation completes" loop of the fault-injection suites.
 */
export function failNthCall(ops: FileOps, options: FailNthOptions): FaultyFileOps {
  let counted = 0;
  let fired = false;
  const select = options.count ?? "all";
  const wrapped = {} as Record<FileOpName, unknown>;
  for (const name of Object.keys(ops) as FileOpName[]) {
    const real = ops[name] as (...args: unknown[]) => unknown;
    wrapped[name] = (...args: unknown[]) => {
      const counts =
        select === "all" ? true : select === "mutating" ? !READ_ONLY.has(name) : select(name, args);
      if (counts) {
        counted += 1;
        if (counted === options.n) {
          fired = true;
          throw errnoError(options.code, name, args[0]);
        }
      }
      return real(...args);
    };
  }
  return { ops: wrapped as unknown as FileOps, calls: () => counted, fired: () => fired };
}

/**
 * fsync a directory, so the names created, removed or renamed in it survive a power loss (a name is only an
 * entry in its directory). The fs error is thrown; the descriptor is closed either way.
 */
export function fsyncDirectory(fs: FileOps, dir: string): void {
  const fd = fs.openSync(dir, nodeFs.constants.O_RDONLY | nodeFs.constants.O_DIRECTORY);
  try {
    fs.fsyncSync(fd);
  } finally {
    try {
      fs.closeSync(fd);
    } catch {
      // The flush's own outcome (or error) is what matters; a failed close changes nothing on disk.
    }
  }
}

/**
 * Flushes every directory above `dir` on `dir`'s own file system (its parent, the parent's parent, … up to
 * that file system's root), so that `dir` and every directory on its path there survive a power loss. A
 * directory that exists need not be durable: one made by a process killed before it flushed the parent, by
 * a call whose flush failed, or by someone else (`mkdir -p` without fsync) is visible now and can vanish
 * with a power loss, taking with it what was acknowledged in it. So a store calls this once, before the
 * first write it acknowledges in `dir`; a flush of a directory with nothing unsaved costs little. A mount
 * point's own name belongs to the file system below it, the administrator's (and some cannot flush a
 * directory at all): the walk stops there. An ancestor this process may not open for reading (EACCES,
 * EPERM: an execute-only home directory) is skipped: no drydock process made it, so it is as durable as its
 * owner left it. Any other failure is thrown.
 */
export function flushAncestry(fs: FileOps, dir: string): void {
  const start = resolve(dir);
  // bigint: as every other stat of drydock's (device numbers beyond 2^53 stay exact).
  const deviceOf = (path: string) => fs.statSync(path, { bigint: true }).dev;
  const device = deviceOf(start);
  for (let child = start; dirname(child) !== child; child = dirname(child)) {
    const parent = dirname(child);
    try {
      if (deviceOf(parent) !== device) return;
      fsyncDirectory(fs, parent);
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code !== "EACCES" && code !== "EPERM") throw error;
    }
  }
}

/**
 * `mkdir -p dir` with `mode`; returns the directories whose fsync makes the new names durable (the parent
 * of each directory it created, deepest first), empty when nothing was created. The caller flushes them
 * (`fsyncDirectory`) before it relies on the new directories surviving a power loss.
 */
export function makeDirectories(fs: FileOps, dir: string, mode = 0o700): string[] {
  const first = fs.mkdirSync(dir, { recursive: true, mode });
  if (first === undefined) return [];
  const parents: string[] = [];
  for (let created = dir; ; created = dirname(created)) {
    parents.push(dirname(created));
    if (resolve(created) === resolve(first) || dirname(created) === created) break;
  }
  return parents;
}

export function errnoError(code: string, syscall: string, path?: unknown): NodeJS.ErrnoException {
  const where = typeof path === "string" ? ` '${path}'` : "";
  const error = new Error(`${code}: injected failure, ${syscall}${where}`) as NodeJS.ErrnoException;
  error.code = code;
  error.syscall = syscall;
  if (typeof path === "string") error.path = path;
  return error;
}
