import * as nodeFs from "node:fs";
import { basename, dirname, join, resolve, sep } from "node:path";
import type { FileOps } from "@drydock/file-lock";

/**
 * A power-loss model of the file system under ALICE's *weak* persistence model (Pillai et al.,
 * OSDI 2014):
 *   - a file's data is durable only after fsync of that file;
 *   - a new, removed or renamed directory entry is durable only after fsync of its directory;
 *   - unsynced operations are unordered (any subset of them may have reached the disk);
 *   - writes and appends may tear (a prefix of the latest bytes);
 *   - a file's or directory's mode is inode metadata: the mode it was created with lands with its name, a
 *     later chmod/fchmod is durable only after fsync of that file or directory (fsync(2) flushes the inode;
 *     a flush of the parent flushes names, not the child's inode). Unsynced mode changes are unordered too:
 *     an image may hold the durable mode or any of them.
 *
 * The model runs over a real scratch directory (`root`): every call goes to the real file system, so the
 * code under test sees ordinary behaviour, while a shadow model records what is durable. `crashImage`
 * then materialises one disk image a power loss could leave into a fresh directory.
 *
 * Nodes are tracked by model ids, not inode numbers: the kernel reuses an inode number as soon as the
 * last link is gone, but the durable image may still name the old inode.
 */

const { O_CREAT, O_TRUNC } = nodeFs.constants;

type Id = number;

interface FileNode {
  kind: "file";
  /** Bytes that survive any power loss. A new file's durable data is empty until its first fsync. */
  durable: Buffer;
  /** The latest bytes (what a reader sees now). */
  current: Buffer;
}

interface DirNode {
  kind: "dir";
}

interface SymlinkNode {
  kind: "symlink";
  target: string;
}

type ModelNode = FileNode | DirNode | SymlinkNode;

/** One directory-entry change: `name` in `dir` goes from `from` to `to` (null = absent). */
interface EntryChange {
  dir: Id;
  name: string;
  from: Id | null;
  to: Id | null;
}

/**
 * One unsynced namespace operation (create, link, unlink, rename, mkdir, rmdir). A rename is one operation
 * (crash-atomic on every file system ALICE studied): in an image it lands whole or not at all.
 */
interface EntryOp {
  call: number;
  what: string;
  changes: EntryChange[];
  /** The directory whose fsync makes this operation durable (a rename: the directory of the new name). */
  durableWith: Id;
}

export type CrashMode = "drop-all-unsynced" | "keep-all" | "random-subset";

export interface CrashImageOptions {
  mode: CrashMode;
  /** Seed of the random choices of `random-subset` (ignored otherwise). */
  seed?: number;
}

export interface CrashImageResult {
  /** Unsynced namespace operations that landed / were dropped in this image. */
  keptOps: number;
  droppedOps: number;
  /** Files whose data differed between durable and latest, and what this image gave them. */
  files: { durable: number; latest: number; torn: number };
  /** Files and directories with unsynced mode changes: given their durable mode, or one of the changes. */
  modes: { durable: number; changed: number };
}

export interface PowerLossFsOptions {
  /** The scratch directory the model covers; it must exist. Everything in it at creation is durable. */
  root: string;
  /**
   * Crash after this many counted (state-changing) calls: the call that makes the count reach it runs,
   * then every later call, reads included, throws `EIO` without touching anything (CrashFs's "fused"
   * client: no `finally` cleanup can hide the crash). Default: never.
   */
  crashAfter?: number;
}

export interface PowerLossFs {
  /** The seam to hand to the code under test. */
  readonly ops: FileOps;
  readonly root: string;
  /** Counted (state-changing) calls made so far, including the one the crash happened after. */
  steps(): number;
  /** Whether the crash point was reached. */
  crashed(): boolean;
  /** Unsynced namespace operations, files whose latest data is not durable, nodes whose mode is not. */
  pending(): { entryOps: number; dirtyFiles: number; dirtyModes: number };
  /** Calls on paths inside `root` whose effect the model could not attribute (a bug in the seam's users). */
  anomalies(): readonly string[];
  /** Writes one possible post-crash disk image of `root` into `target` (created; must not exist). */
  crashImage(target: string, options: CrashImageOptions): CrashImageResult;
}

/**
 * The real file system minus fsync, for throwaway directories (post-crash images being reopened): what they
 * hold after *their* power loss is never asked, and a real flush costs milliseconds per call.
 */
export const scratchFileOps: FileOps = {
  ...nodeFs,
  fsyncSync: (fd: number) => void nodeFs.fstatSync(fd),
  fsync: ((fd: number, done: (error: NodeJS.ErrnoException | null) => void) =>
    nodeFs.fstat(fd, (error) => done(error))) as FileOps["fsync"],
};

/** Small, fast, seedable PRNG (mulberry32): images must be reproducible from their seed. */
export function seededRandom(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * `fchmodSync` is modelled whether or not the seam names it yet (a seam that adds it gets it tracked); any
 * other call added to `FileOps` fails to compile in `WRAPPED` below until the model decides what it does.
 */
type ModelledCall = keyof FileOps | "fchmodSync";

const COUNTED = new Set<ModelledCall>([
  "openSync",
  "closeSync",
  "writeSync",
  "fsyncSync",
  "fsync",
  "writeFileSync",
  "linkSync",
  "unlinkSync",
  "renameSync",
  "mkdirSync",
  "rmdirSync",
  "rmSync",
  "chmodSync",
  "fchmodSync",
  "symlinkSync",
  "ftruncateSync",
]);

/** Every call of the seam the model wraps (an object, so that a call added to `FileOps` is a type error). */
const WRAPPED: Record<keyof FileOps, true> & Record<"fchmodSync", true> = {
  openSync: true,
  closeSync: true,
  close: true,
  writeSync: true,
  readSync: true,
  fsyncSync: true,
  fsync: true,
  fstatSync: true,
  readFileSync: true,
  writeFileSync: true,
  linkSync: true,
  unlinkSync: true,
  renameSync: true,
  statSync: true,
  lstatSync: true,
  mkdirSync: true,
  readdirSync: true,
  rmdirSync: true,
  rmSync: true,
  chmodSync: true,
  fchmodSync: true,
  symlinkSync: true,
  readlinkSync: true,
  realpathSync: true,
  ftruncateSync: true,
  existsSync: true,
};

/** Permission bits of a stat (what chmod sets). */
const modeBits = (stat: { mode: number }): number => stat.mode & 0o7777;

function powerLost(name: string): NodeJS.ErrnoException {
  const error = new Error(`EIO: power lost (simulated), ${name}`) as NodeJS.ErrnoException;
  error.code = "EIO";
  error.syscall = name;
  return error;
}

function flagBits(flags: unknown): { create: boolean; truncate: boolean } {
  if (typeof flags === "number")
    return { create: (flags & O_CREAT) !== 0, truncate: (flags & O_TRUNC) !== 0 };
  if (typeof flags === "string") return { create: /^[wa]/.test(flags), truncate: flags.startsWith("w") };
  return { create: false, truncate: false };
}

export function createPowerLossFs(options: PowerLossFsOptions): PowerLossFs {
  const real = nodeFs;
  const root = resolve(options.root);
  const crashAfter = options.crashAfter ?? Number.POSITIVE_INFINITY;
  const nodes = new Map<Id, ModelNode>();
  /** Durable entries of every directory node (a new directory starts with none). */
  const durableEntries = new Map<Id, Map<string, Id>>();
  /** Live kernel inode (dev:ino) → model node. */
  const live = new Map<string, Id>();
  const pendingOps: EntryOp[] = [];
  /**
   * Mode of every file and directory node: `durable`, and the chmods since its last fsync, in order (the
   * latest is what a reader sees now). The creation mode is durable: the inode lands with its name.
   */
  const modes = new Map<Id, { durable: number; pending: number[] }>();
  const anomalies: string[] = [];
  let nextId = 1;
  let steps = 0;
  // crashAfter 0: the power is lost before the first call.
  let crashed = crashAfter <= 0;

  const keyOf = (stat: { dev: number; ino: number }): string => `${stat.dev}:${stat.ino}`;

  function newNode(node: ModelNode, stat: { dev: number; ino: number; mode: number }): Id {
    const id = nextId++;
    nodes.set(id, node);
    if (node.kind !== "symlink") modes.set(id, { durable: modeBits(stat), pending: [] });
    if (node.kind === "dir") durableEntries.set(id, new Map());
    live.set(keyOf(stat), id);
    return id;
  }

  function inside(path: string): boolean {
    return path === root || path.startsWith(root + sep);
  }

  function lstatOrNull(path: string): nodeFs.Stats | null {
    try {
      return real.lstatSync(path);
    } catch {
      return null;
    }
  }

  /** The node a path names now. A name the model never saw created means a write bypassed the seam. */
  function idOfPath(path: string): Id | null {
    const stat = lstatOrNull(path);
    if (!stat) return null;
    const id = live.get(keyOf(stat));
    if (id !== undefined) return id;
    anomalies.push(`untracked ${path}`);
    return adopt(path, stat, false);
  }

  /** Gives a node to something found on disk (the initial scan, or an anomaly). */
  function adopt(path: string, stat: nodeFs.Stats, durable: boolean): Id {
    if (stat.isDirectory()) return newNode({ kind: "dir" }, stat);
    if (stat.isSymbolicLink()) return newNode({ kind: "symlink", target: real.readlinkSync(path) }, stat);
    const bytes = stat.isFile() ? real.readFileSync(path) : Buffer.alloc(0);
    return newNode({ kind: "file", durable: durable ? bytes : Buffer.alloc(0), current: bytes }, stat);
  }

  function scan(dirPath: string, dirId: Id): void {
    const entries = durableEntries.get(dirId)!;
    for (const name of real.readdirSync(dirPath)) {
      const path = join(dirPath, name);
      const stat = real.lstatSync(path);
      const known = live.get(keyOf(stat));
      const id = known ?? adopt(path, stat, true);
      entries.set(name, id);
      if (known === undefined && stat.isDirectory()) scan(path, id);
    }
  }

  const rootId = newNode({ kind: "dir" }, real.lstatSync(root));
  scan(root, rootId);

  function record(what: string, changes: EntryChange[], durableWith: Id): void {
    pendingOps.push({ call: steps, what, changes, durableWith });
  }

  function parentId(path: string): Id | null {
    return inside(dirname(path)) ? idOfPath(dirname(path)) : null;
  }

  function fileNodeOfFd(fd: number): { id: Id; node: ModelNode } | null {
    const id = live.get(keyOf(real.fstatSync(fd)));
    if (id === undefined) return null;
    return { id, node: nodes.get(id)! };
  }

  /** The latest bytes of an open file, read through /proc (the descriptor itself may be write-only). */
  function refreshFd(fd: number): void {
    const found = fileNodeOfFd(fd);
    if (found?.node.kind === "file") found.node.current = real.readFileSync(`/proc/self/fd/${fd}`);
  }

  /** Records a chmod/fchmod of a node (its new mode read back from the disk, umask and all). */
  function changeMode(id: Id | undefined, stat: { mode: number }): void {
    const mode = id === undefined ? undefined : modes.get(id);
    if (mode) mode.pending.push(modeBits(stat));
  }

  function syncMode(id: Id): void {
    const mode = modes.get(id);
    if (mode && mode.pending.length > 0) {
      mode.durable = mode.pending[mode.pending.length - 1]!;
      mode.pending = [];
    }
  }

  function syncDir(dirId: Id): void {
    const remaining: EntryOp[] = [];
    for (const op of pendingOps) {
      if (op.durableWith === dirId) applyOp(durableEntries, op);
      else remaining.push(op);
    }
    pendingOps.splice(0, pendingOps.length, ...remaining);
  }

  function applyOp(entries: Map<Id, Map<string, Id>>, op: EntryOp): void {
    for (const change of op.changes) {
      let map = entries.get(change.dir);
      if (!map) {
        map = new Map();
        entries.set(change.dir, map);
      }
      if (change.to === null) {
        if (map.get(change.name) === change.from) map.delete(change.name);
      } else {
        map.set(change.name, change.to);
      }
    }
  }

  /** Every entry below `path`, deepest first: the removals an `rm -r` performs one by one. */
  function removalsBelow(path: string, into: EntryChange[]): void {
    const stat = lstatOrNull(path);
    const id = stat ? live.get(keyOf(stat)) : undefined;
    if (!stat || id === undefined) return;
    if (stat.isDirectory()) {
      for (const name of real.readdirSync(path)) removalsBelow(join(path, name), into);
    }
    const parent = live.get(keyOf(real.lstatSync(dirname(path))));
    if (parent !== undefined) into.push({ dir: parent, name: basename(path), from: id, to: null });
  }

  // biome-ignore lint/suspicious/noExplicitAny: the seam forwards node's overloaded signatures untouched.
  type AnyFn = (...args: any[]) => any;
  const handlers: Partial<Record<ModelledCall, AnyFn>> = {
    openSync(path: nodeFs.PathLike, flags?: nodeFs.OpenMode, mode?: nodeFs.Mode) {
      const abs = resolve(String(path));
      const tracked = inside(abs);
      const { create, truncate } = flagBits(flags ?? "r");
      const existed = tracked ? lstatOrNull(abs) !== null : true;
      const fd = real.openSync(path, flags ?? "r", mode);
      if (!tracked) return fd;
      const stat = real.fstatSync(fd);
      if (create && !existed) {
        const id = newNode({ kind: "file", durable: Buffer.alloc(0), current: Buffer.alloc(0) }, stat);
        const parent = parentId(abs);
        if (parent !== null)
          record(`create ${abs}`, [{ dir: parent, name: basename(abs), from: null, to: id }], parent);
      } else if (truncate) {
        refreshFd(fd);
      }
      return fd;
    },
    writeSync(fd: number, ...rest: unknown[]) {
      const written = (real.writeSync as AnyFn)(fd, ...rest);
      refreshFd(fd);
      return written;
    },
    ftruncateSync(fd: number, len?: number) {
      real.ftruncateSync(fd, len);
      refreshFd(fd);
    },
    fsyncSync(fd: number) {
      // The model decides what is durable; flushing the real scratch disk would only cost time. fstat still
      // fails like fsync would on a bad descriptor.
      real.fstatSync(fd);
      const found = fileNodeOfFd(fd);
      if (!found) return;
      // fsync(2) flushes the inode too: the latest mode of this file or directory is durable now.
      syncMode(found.id);
      if (found.node.kind === "file") found.node.durable = Buffer.from(found.node.current);
      else if (found.node.kind === "dir") syncDir(found.id);
    },
    // The asynchronous flush takes effect when it completes, on a later tick as node's does, and only if
    // the power is still on then: calls made meanwhile (other flushes in flight) may be the crash point.
    fsync(fd: number, done: (error: NodeJS.ErrnoException | null) => void) {
      process.nextTick(() => {
        if (crashed) return done(powerLost("fsync"));
        try {
          handlers.fsyncSync?.(fd);
        } catch (error) {
          return done(error as NodeJS.ErrnoException);
        }
        done(null);
      });
    },
    writeFileSync(file: nodeFs.PathOrFileDescriptor, data: unknown, opts?: unknown) {
      if (typeof file === "number") {
        (real.writeFileSync as AnyFn)(file, data, opts);
        refreshFd(file);
        return;
      }
      const abs = resolve(String(file));
      const tracked = inside(abs);
      const existed = tracked ? lstatOrNull(abs) !== null : true;
      (real.writeFileSync as AnyFn)(file, data, opts);
      if (!tracked) return;
      const stat = real.lstatSync(abs);
      const bytes = real.readFileSync(abs);
      if (!existed) {
        const id = newNode({ kind: "file", durable: Buffer.alloc(0), current: bytes }, stat);
        const parent = parentId(abs);
        if (parent !== null)
          record(`create ${abs}`, [{ dir: parent, name: basename(abs), from: null, to: id }], parent);
      } else {
        const id = idOfPath(abs);
        const node = id === null ? undefined : nodes.get(id);
        if (node?.kind === "file") node.current = bytes;
      }
    },
    linkSync(existing: nodeFs.PathLike, newPath: nodeFs.PathLike) {
      const from = resolve(String(existing));
      const to = resolve(String(newPath));
      real.linkSync(existing, newPath);
      if (!inside(to)) return;
      const id = idOfPath(from);
      const parent = parentId(to);
      if (id !== null && parent !== null) {
        record(`link ${to}`, [{ dir: parent, name: basename(to), from: null, to: id }], parent);
      }
    },
    unlinkSync(path: nodeFs.PathLike) {
      const abs = resolve(String(path));
      const tracked = inside(abs);
      const id = tracked ? idOfPath(abs) : null;
      const parent = tracked ? parentId(abs) : null;
      real.unlinkSync(path);
      if (id !== null && parent !== null) {
        record(`unlink ${abs}`, [{ dir: parent, name: basename(abs), from: id, to: null }], parent);
      }
    },
    rmdirSync(path: nodeFs.PathLike, opts?: nodeFs.RmDirOptions) {
      const abs = resolve(String(path));
      const tracked = inside(abs);
      const id = tracked ? idOfPath(abs) : null;
      const parent = tracked ? parentId(abs) : null;
      real.rmdirSync(path, opts);
      if (id !== null && parent !== null) {
        record(`rmdir ${abs}`, [{ dir: parent, name: basename(abs), from: id, to: null }], parent);
      }
    },
    rmSync(path: nodeFs.PathLike, opts?: nodeFs.RmOptions) {
      const abs = resolve(String(path));
      const changes: EntryChange[] = [];
      if (inside(abs)) removalsBelow(abs, changes);
      real.rmSync(path, opts);
      // One operation per removed entry, as rm -r unlinks them one at a time.
      for (const change of changes) record(`rm ${change.name}`, [change], change.dir);
    },
    renameSync(oldPath: nodeFs.PathLike, newPath: nodeFs.PathLike) {
      const from = resolve(String(oldPath));
      const to = resolve(String(newPath));
      const tracked = inside(from) && inside(to);
      const moved = tracked ? idOfPath(from) : null;
      const replaced = tracked ? idOfPath(to) : null;
      const fromParent = tracked ? parentId(from) : null;
      const toParent = tracked ? parentId(to) : null;
      real.renameSync(oldPath, newPath);
      if (moved === null || fromParent === null || toParent === null || moved === replaced) return;
      record(
        `rename ${from} -> ${to}`,
        [
          { dir: toParent, name: basename(to), from: replaced, to: moved },
          { dir: fromParent, name: basename(from), from: moved, to: null },
        ],
        toParent,
      );
    },
    mkdirSync(path: nodeFs.PathLike, opts?: nodeFs.MakeDirectoryOptions | nodeFs.Mode) {
      const abs = resolve(String(path));
      // Which directories this call creates: the missing ones from the first existing ancestor down.
      const missing: string[] = [];
      if (inside(abs)) {
        for (let p = abs; inside(p) && lstatOrNull(p) === null; p = dirname(p)) missing.unshift(p);
      }
      const result = (real.mkdirSync as AnyFn)(path, opts);
      for (const dir of missing) {
        const stat = lstatOrNull(dir);
        if (!stat) continue;
        const id = newNode({ kind: "dir" }, stat);
        const parent = parentId(dir);
        if (parent !== null)
          record(`mkdir ${dir}`, [{ dir: parent, name: basename(dir), from: null, to: id }], parent);
      }
      return result;
    },
    chmodSync(path: nodeFs.PathLike, mode: nodeFs.Mode) {
      real.chmodSync(path, mode);
      // chmod follows symlinks, so the node changed is the inode the path leads to, wherever the path is:
      // `/proc/self/fd/N` (an fchmod by path, as restore-saga's fchmodOf does) names a tracked file too.
      const stat = real.statSync(path);
      let id = live.get(keyOf(stat));
      if (id === undefined && inside(real.realpathSync(path))) {
        anomalies.push(`untracked ${resolve(String(path))}`);
        id = adopt(real.realpathSync(path), stat, false);
      }
      changeMode(id, stat);
    },
    fchmodSync(fd: number, mode: nodeFs.Mode) {
      real.fchmodSync(fd, mode);
      changeMode(fileNodeOfFd(fd)?.id, real.fstatSync(fd));
    },
    symlinkSync(target: nodeFs.PathLike, path: nodeFs.PathLike, type?: nodeFs.symlink.Type) {
      const abs = resolve(String(path));
      real.symlinkSync(target, path, type);
      if (!inside(abs)) return;
      const id = newNode({ kind: "symlink", target: String(target) }, real.lstatSync(abs));
      const parent = parentId(abs);
      if (parent !== null)
        record(`symlink ${abs}`, [{ dir: parent, name: basename(abs), from: null, to: id }], parent);
    },
  };

  const ops = {} as Record<ModelledCall, AnyFn>;
  const names = Object.keys(WRAPPED) as ModelledCall[];
  for (const name of names) {
    const handler = handlers[name] ?? (real[name] as AnyFn);
    ops[name] = (...args: unknown[]) => {
      if (crashed) throw powerLost(name);
      if (COUNTED.has(name)) {
        steps += 1;
        // The crash happens *after* this call: it runs, then nothing else does.
        if (steps >= crashAfter) {
          try {
            return handler(...args);
          } finally {
            crashed = true;
          }
        }
      }
      return handler(...args);
    };
  }
  // existsSync never throws in node; a fused one answers "absent" like node does for any error.
  const exists = ops.existsSync;
  ops.existsSync = (...args: unknown[]) => {
    try {
      return exists(...args);
    } catch {
      return false;
    }
  };

  function crashImage(target: string, imageOptions: CrashImageOptions): CrashImageResult {
    const random = seededRandom(imageOptions.seed ?? 1);
    const entries = new Map<Id, Map<string, Id>>();
    for (const [dir, map] of durableEntries) entries.set(dir, new Map(map));
    let keptOps = 0;
    let droppedOps = 0;
    for (const op of pendingOps) {
      const keep =
        imageOptions.mode === "keep-all" || (imageOptions.mode === "random-subset" && random() < 0.5);
      if (keep) {
        applyOp(entries, op);
        keptOps += 1;
      } else {
        droppedOps += 1;
      }
    }
    const files = { durable: 0, latest: 0, torn: 0 };
    const modeCounts = { durable: 0, changed: 0 };
    const modeOf = new Map<Id, number>();
    // Random draws only for nodes with unsynced mode changes, so images of workloads without chmod are the
    // same as before modes were modelled.
    const chooseMode = (id: Id): number => {
      const chosen = modeOf.get(id);
      if (chosen !== undefined) return chosen;
      const { durable, pending } = modes.get(id) ?? { durable: 0o600, pending: [] };
      let mode = durable;
      if (pending.length > 0) {
        const index =
          imageOptions.mode === "drop-all-unsynced"
            ? 0
            : imageOptions.mode === "keep-all"
              ? pending.length
              : Math.floor(random() * (pending.length + 1));
        mode = index === 0 ? durable : pending[index - 1]!;
        if (index === 0) modeCounts.durable += 1;
        else modeCounts.changed += 1;
      }
      modeOf.set(id, mode);
      return mode;
    };
    const dataOf = new Map<Id, Buffer>();
    const chooseData = (id: Id, node: FileNode): Buffer => {
      const chosen = dataOf.get(id);
      if (chosen) return chosen;
      let data: Buffer;
      if (node.durable.equals(node.current)) data = node.current;
      else if (imageOptions.mode === "drop-all-unsynced") {
        data = node.durable;
        files.durable += 1;
      } else if (imageOptions.mode === "keep-all") {
        data = node.current;
        files.latest += 1;
      } else {
        const r = random();
        if (r < 1 / 3) {
          data = node.durable;
          files.durable += 1;
        } else if (r < 2 / 3 || node.current.length === 0) {
          data = node.current;
          files.latest += 1;
        } else {
          const kept = node.current.subarray(0, Math.floor(random() * node.current.length));
          // Torn two ways: cut short, or the full size with zeros after the cut (the size reached the
          // journal, the data blocks did not: ext4 data=writeback, XFS).
          data =
            random() < 0.5 ? kept : Buffer.concat([kept, Buffer.alloc(node.current.length - kept.length)]);
          files.torn += 1;
        }
      }
      dataOf.set(id, data);
      return data;
    };
    const written = new Map<Id, string>();
    const visited = new Set<Id>();
    const materialise = (dirId: Id, dirPath: string): void => {
      visited.add(dirId);
      real.mkdirSync(dirPath, { mode: 0o700 });
      const map = entries.get(dirId) ?? new Map<string, Id>();
      for (const [name, id] of [...map].sort(([a], [b]) => (a < b ? -1 : 1))) {
        const node = nodes.get(id)!;
        const path = join(dirPath, name);
        if (node.kind === "dir") {
          // A directory reachable twice (two unordered renames both landed) is materialised once.
          if (!visited.has(id)) materialise(id, path);
        } else if (node.kind === "symlink") {
          real.symlinkSync(node.target, path);
        } else {
          const first = written.get(id);
          if (first !== undefined) real.linkSync(first, path);
          else {
            real.writeFileSync(path, chooseData(id, node), { mode: 0o600 });
            real.chmodSync(path, chooseMode(id));
            written.set(id, path);
          }
        }
      }
      // Last, once its entries are made (a mode without write permission would refuse them to a non-root).
      real.chmodSync(dirPath, chooseMode(dirId));
    };
    materialise(rootId, resolve(target));
    return { keptOps, droppedOps, files, modes: modeCounts };
  }

  return {
    ops: ops as unknown as FileOps,
    root,
    steps: () => steps,
    crashed: () => crashed,
    pending: () => {
      let dirtyFiles = 0;
      for (const node of nodes.values()) {
        if (node.kind === "file" && !node.durable.equals(node.current)) dirtyFiles += 1;
      }
      let dirtyModes = 0;
      for (const mode of modes.values()) if (mode.pending.length > 0) dirtyModes += 1;
      return { entryOps: pendingOps.length, dirtyFiles, dirtyModes };
    },
    anomalies: () => anomalies,
    crashImage,
  };
}
