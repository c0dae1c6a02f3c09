import { constants } from "node:fs";
import { basename, dirname, join } from "node:path";
import { type FileOps, isProcessLevelErrno } from "@drydock/file-lock";
import type { CheckpointStore } from "../checkpoints/index.js";
import { errnoOf, SagaError } from "../errors.js";
import type { ManifestEntry } from "../schema.js";
import { domainDigest } from "./canonical.js";
import {
  type CloseBehind,
  chmodDir,
  closeBehind,
  ensurePrivateDir,
  errnoBehind,
  flushBehind,
  fsyncPaths,
  isTempFor,
  isTempName,
  removeQuietly,
  writeTemp,
} from "./files.js";
import { type ScannedEntry, scanTree, treeDigest } from "./tree.js";

const { O_RDONLY, O_NOFOLLOW, O_NONBLOCK } = constants;

type FileEntry = Extract<ManifestEntry, { type: "file" }>;

/** One workspace change. Removals run deepest first, then directories shallow first, then files. */
export type PlanOp =
  | { op: "remove"; path: string; kind: "file" | "dir" | "other" }
  | { op: "mkdir"; path: string; mode: number }
  | { op: "chmod"; path: string; mode: number }
  | { op: "write"; entry: FileEntry };

export interface RestorePlan {
  ops: PlanOp[];
  /** Digest of the workspace as scanned when planning. */
  prestateDigest: string;
  /** Digest of the tree the workspace must equal afterwards. */
  targetDigest: string;
  /** Digest of the ops themselves (binds intent and rollback evidence to this exact plan). */
  planDigest: string;
}

const PLAN_DOMAIN = "drydock-restore-plan-v1";

function byPath(a: { path: string }, b: { path: string }): number {
  return a.path < b.path ? -1 : a.path > b.path ? 1 : 0;
}

function depth(path: string): number {
  return path.split("/").length;
}

/** The changes that make the workspace equal `target` exactly (files absent from it are removed). */
export function planRestore(fs: FileOps, root: string, target: readonly ManifestEntry[]): RestorePlan {
  return planFromScan(scanTree(fs, root, { strict: false }), target);
}

/** `planRestore` from a scan already made (a safety capture's entries). */
export function planFromScan(
  current: readonly ScannedEntry[],
  target: readonly ManifestEntry[],
): RestorePlan {
  const currentByPath = new Map<string, ScannedEntry>(current.map((entry) => [entry.path, entry]));
  const targetByPath = new Map<string, ManifestEntry>(target.map((entry) => [entry.path, entry]));

  const removals: PlanOp[] = [];
  for (const entry of current) {
    const wanted = targetByPath.get(entry.path);
    if (!wanted || wanted.type !== entry.type) {
      removals.push({ op: "remove", path: entry.path, kind: entry.type });
    }
  }
  // Deepest first, so a directory is empty when its turn comes (everything under a removed directory
  // is absent from the target too, or it would not be removed).
  removals.sort((a, b) => {
    const pa = (a as { path: string }).path;
    const pb = (b as { path: string }).path;
    return depth(pb) - depth(pa) || (pa < pb ? 1 : pa > pb ? -1 : 0);
  });
  const removed = new Set(removals.map((op) => (op as { path: string }).path));

  const dirs: PlanOp[] = [];
  const writes: PlanOp[] = [];
  for (const entry of [...target].sort(byPath)) {
    const existing = removed.has(entry.path) ? undefined : currentByPath.get(entry.path);
    if (entry.type === "dir") {
      if (!existing) dirs.push({ op: "mkdir", path: entry.path, mode: entry.mode });
      else if (existing.type === "dir" && existing.mode !== entry.mode) {
        dirs.push({ op: "chmod", path: entry.path, mode: entry.mode });
      }
    } else if (
      existing?.type !== "file" ||
      existing.sha256 !== entry.sha256 ||
      existing.mode !== entry.mode
    ) {
      writes.push({ op: "write", entry });
    }
  }
  const ops = [...removals, ...dirs, ...writes];
  const prestateDigest = treeDigest(current);
  const targetDigest = treeDigest(target);
  return {
    ops,
    prestateDigest,
    targetDigest,
    planDigest: domainDigest(PLAN_DOMAIN, { prestateDigest, targetDigest, ops }),
  };
}

/** Whether the plan writes any file: only files are staged (see `prepareStaging`). */
export function writesFiles(plan: RestorePlan): boolean {
  return plan.ops.some((op) => op.op === "write");
}

/** The longest name (one path segment) Linux file systems take, in bytes (NAME_MAX). */
export const NAME_MAX_BYTES = 255;

/**
 * Refuses, before anything changes, a plan that would create a name no file system here takes (longer
 * than NAME_MAX bytes: a checkpoint made on another file system). The temps the apply stages under are
 * of bounded length (`tempNameFor`), so every name that fits can be staged; one that does not would stop
 * the apply half-way with ENAMETOOLONG. Returns the first such path, or null.
 */
export function overlongName(plan: RestorePlan): string | null {
  for (const op of plan.ops) {
    if (op.op !== "write" && op.op !== "mkdir") continue;
    const path = opPath(op);
    if (path.split("/").some((segment) => Buffer.byteLength(segment, "utf8") > NAME_MAX_BYTES)) return path;
  }
  return null;
}

function opPath(op: PlanOp): string {
  return op.op === "write" ? op.entry.path : op.path;
}

/** Every path a plan changes (removes, creates, rewrites or chmods). */
export function touchedPaths(plan: RestorePlan): Set<string> {
  return new Set(plan.ops.map(opPath));
}

function ancestors(path: string): string[] {
  const parts = path.split("/");
  return parts.slice(1).map((_, i) => parts.slice(0, i + 1).join("/"));
}

/**
 * The part of `plan` (made from `current`) that touches only `paths`, plus the creation of any missing
 * directory those changes need. What lies outside `paths` is left exactly as it is, even where it differs
 * from the plan's target: the rollback of a restore undoes what that restore did, not what someone wrote
 * since. Returns the restricted plan, or the entries it would have to delete although they lie outside
 * `paths` (something written inside a directory the restore created): the caller refuses then.
 */
export function restrictPlan(
  plan: RestorePlan,
  current: readonly ScannedEntry[],
  paths: ReadonlySet<string>,
): { plan: RestorePlan; outside: string[] } {
  const keep = (op: PlanOp): boolean => paths.has(opPath(op));
  // Every directory a kept creation or change needs above it (a removal needs nothing created).
  const needed = new Set<string>();
  for (const op of plan.ops) {
    if (op.op !== "remove" && keep(op)) for (const above of ancestors(opPath(op))) needed.add(above);
  }
  const ops = plan.ops.filter((op) => keep(op) || (op.op === "mkdir" && needed.has(op.path)));
  const removed = new Set(ops.filter((op) => op.op === "remove").map(opPath));
  const removedDirs = new Set(
    ops.filter((op) => op.op === "remove" && op.kind === "dir").map((op) => opPath(op)),
  );
  const currentByPath = new Map<string, ScannedEntry>(current.map((entry) => [entry.path, entry]));
  const outside: string[] = [];
  // What lies outside `paths` but would go anyway: inside a directory the kept changes remove...
  for (const entry of current) {
    if (!removed.has(entry.path) && ancestors(entry.path).some((above) => removedDirs.has(above))) {
      outside.push(entry.path);
    }
  }
  // ...or in the way of a directory they need (something put where one of its parents belongs).
  for (const path of needed) {
    const entry = currentByPath.get(path);
    if (entry !== undefined && entry.type !== "dir" && !removed.has(path)) outside.push(path);
  }
  const { prestateDigest, targetDigest } = plan;
  return {
    plan: {
      ops,
      prestateDigest,
      targetDigest,
      planDigest: domainDigest(PLAN_DOMAIN, { prestateDigest, targetDigest, ops, paths: [...paths].sort() }),
    },
    outside: outside.sort(),
  };
}

export interface ApplyContext {
  fs: FileOps;
  root: string;
  /**
   * Temporary files are written here, OUTSIDE the workspace, then renamed into place. One directory per
   * workspace: the caller holds that workspace's lock, so whatever temps are found here belong to an apply
   * that died, and are removed.
   */
  stagingDir: string;
  /** The data directory the staging directory is in (errors name what is in the way below it). */
  dataDir: string;
  checkpoints: CheckpointStore;
  /** Called after each change is in place (a crash point). */
  onApplied: (index: number) => void;
  /** Called before each change (ownership check). */
  beforeEach?: () => void;
  /** Flush each file and the touched directories (default true); see RestoreOptions.durable. */
  durable?: boolean;
  /** What `verifyPlanBlobs` kept: written as they are, without reading the blob again. */
  verified?: VerifiedBlobs;
  /**
   * Runs once every change is in place, while the touched directories are flushed (the restore re-scans
   * the workspace here). A throw propagates once those flushes have settled.
   */
  whileFlushing?: () => void;
}

function errnoPath(error: unknown): string | undefined {
  const path = (error as NodeJS.ErrnoException | null)?.path;
  return typeof path === "string" ? path : undefined;
}

/**
 * A change of `path` (workspace-relative) that failed, as a person reads it. A failure on a temp in the
 * staging directory (its write, its flush) happened in the data directory, and is named there.
 */
function applyFailure(path: string, error: unknown, stagingDir?: string): SagaError {
  if (error instanceof SagaError) return error;
  const errno = errnoOf(error) ?? "error";
  const at = errnoPath(error);
  if (stagingDir !== undefined && at?.startsWith(`${stagingDir}/`)) {
    return new SagaError({
      code: "WRITE_FAILED",
      cause: error,
      message: `Writing ${at === path ? "a staged file" : `the staged copy of ${path}`} in the restore staging directory failed (${errno} on ${at}, in the data directory). The workspace may be partly restored; the restore's safety checkpoint can roll it back.`,
    });
  }
  return new SagaError({
    code: "WRITE_FAILED",
    cause: error,
    message: `Changing ${path} in the workspace failed (${errno}). The workspace is partly restored; the restore's safety checkpoint can roll it back.`,
  });
}

/** Blob contents already read and hash-checked, by sha256. */
export type VerifiedBlobs = ReadonlyMap<string, Buffer>;

/**
 * How many verified bytes `verifyPlanBlobs` keeps for `applyPlan`, which then writes exactly the bytes
 * that were checked instead of reading and hashing them again; blobs beyond it are read (and checked)
 * again when their turn comes.
 */
const VERIFIED_BYTES_KEPT = 128 * 1024 * 1024;

/**
 * Every blob the plan needs, read and hash-checked before anything changes: a missing or damaged blob
 * must stop the restore while the workspace is still untouched.
 */
export function verifyPlanBlobs(checkpoints: CheckpointStore, plan: RestorePlan): VerifiedBlobs {
  const verified = new Map<string, Buffer>();
  const seen = new Set<string>();
  let kept = 0;
  for (const op of plan.ops) {
    if (op.op !== "write" || seen.has(op.entry.sha256)) continue;
    const bytes = checkpoints.readBlob(op.entry);
    seen.add(op.entry.sha256);
    if (kept + bytes.length <= VERIFIED_BYTES_KEPT) {
      verified.set(op.entry.sha256, bytes);
      kept += bytes.length;
    }
  }
  return verified;
}

/**
 * The parent of `rel` must be the real directory it names: a symlink anywhere on the way would let a
 * write land outside the workspace.
 */
function assertInside(fs: FileOps, root: string, rel: string): void {
  const parentRel = dirname(rel);
  const expected = parentRel === "." ? root : join(root, parentRel);
  let real: string;
  try {
    real = fs.realpathSync(expected);
  } catch (error) {
    throw applyFailure(rel, error);
  }
  if (real !== expected) {
    throw new SagaError({
      code: "CORRUPT",
      message: `The workspace path ${rel} leads through a symlink (${expected} resolves to ${real}); refusing to write outside the workspace.`,
    });
  }
}

/**
 * Renames a staged temp over its target. Staging on another file system cannot be renamed from: the
 * bytes are then written again beside the target (flushed first when `durable`) and renamed from there;
 * `ctx` remembers it, so later files are staged beside their targets directly. A SIGKILL in that window
 * leaves the temp in the workspace, named for its target (`.drydock.<tag of name>.<pid>.<hex>.tmp`); the rollback,
 * which changes nothing but the touched paths, removes every such temp named for one of them before it
 * plans (`removeLeftTemps`).
 */
function renameIntoPlace(
  ctx: ApplyContext,
  state: { besideTarget: boolean },
  temp: string,
  entry: FileEntry,
  bytes: Buffer,
  durable: boolean,
  closer: CloseBehind,
): void {
  const { fs } = ctx;
  const target = join(ctx.root, entry.path);
  // The file being replaced stays open across the rename and is closed behind (see `closeBehind`): the
  // rename then frees nothing, and the kernel frees the old blocks off this thread. Read-only, without
  // following a symlink, never blocking on a FIFO; a target that cannot be opened is simply not held.
  let replaced: number | null = null;
  try {
    replaced = fs.openSync(target, O_RDONLY | O_NOFOLLOW | O_NONBLOCK);
  } catch {
    // Absent (a new file) or not openable: the rename goes ahead as it is.
  }
  try {
    try {
      fs.renameSync(temp, target);
      return;
    } catch (error) {
      removeQuietly(fs, temp);
      if (errnoOf(error) !== "EXDEV") throw error;
    }
    state.besideTarget = true;
    const beside = writeTemp(fs, dirname(target), basename(entry.path), bytes, entry.mode, durable);
    try {
      fs.renameSync(beside, target);
    } catch (error) {
      removeQuietly(fs, beside);
      throw error;
    }
  } finally {
    if (replaced !== null) closer.add(replaced);
  }
}

/**
 * Removes from the workspace the temps an apply staging beside its targets (see `renameIntoPlace`) left
 * when it was killed: regular files named as temps for a touched path `<name>` beside it (`isTempFor`:
 * `.drydock.<tag of name>.<pid>.<hex>.tmp`, or an earlier version's `.<name>.<pid>.<hex>.tmp`)
 * (inside a directory the restore created too). Never the workspace's content, never promoted. Returns
 * the scan `current` without them; with `removeTemps: false` (a read-only preview) nothing is removed.
 * Only for a caller holding the workspace's lock.
 */
export function removeLeftTemps(
  fs: FileOps,
  root: string,
  current: readonly ScannedEntry[],
  touched: ReadonlySet<string>,
  options: { removeTemps: boolean; held?: ReadonlySet<string> },
): ScannedEntry[] {
  // The touched names by the directory they are in (`a/b/` for `a/b/c.txt`, `` at the root).
  const touchedIn = new Map<string, string[]>();
  for (const path of touched) {
    const slash = path.lastIndexOf("/");
    const dir = path.slice(0, slash + 1);
    const names = touchedIn.get(dir);
    if (names === undefined) touchedIn.set(dir, [path.slice(slash + 1)]);
    else names.push(path.slice(slash + 1));
  }
  const isLeftTemp = (entry: ScannedEntry): boolean => {
    if (entry.type !== "file" || options.held?.has(entry.path)) return false;
    const slash = entry.path.lastIndexOf("/");
    const name = entry.path.slice(slash + 1);
    if (!isTempName(name)) return false;
    return (touchedIn.get(entry.path.slice(0, slash + 1)) ?? []).some((target) => isTempFor(name, target));
  };
  const kept: ScannedEntry[] = [];
  for (const entry of current) {
    if (!isLeftTemp(entry)) {
      kept.push(entry);
    } else if (options.removeTemps) {
      try {
        assertInside(fs, root, entry.path);
        fs.unlinkSync(join(root, entry.path));
      } catch (error) {
        if (error instanceof SagaError) throw error;
        if (errnoOf(error) === "ENOENT") continue;
        throw new SagaError({
          code: "WRITE_FAILED",
          cause: error,
          message: `The temp ${entry.path} an interrupted restore left in the workspace could not be removed (${errnoOf(error) ?? "error"}). Nothing else was changed; retry.`,
        });
      }
    }
  }
  return kept;
}

/**
 * Removes the temps in a workspace's staging directory. Only for a caller holding that workspace's lock:
 * whatever is there was left by an apply that died, and is never promoted.
 */
export function sweepStaging(fs: FileOps, stagingDir: string): void {
  let names: string[];
  try {
    names = fs.readdirSync(stagingDir);
  } catch (error) {
    // Absent, or not a directory (a file is in the way, at it or above it): no temp of ours is there.
    const errno = errnoOf(error);
    if (errno === "ENOENT" || errno === "ENOTDIR") return;
    throw error;
  }
  for (const name of names) {
    if (isTempName(name)) removeQuietly(fs, join(stagingDir, name));
  }
}

/**
 * The first of `path` and its parents below `within` (the data directory) that exists and is not a
 * directory (a file or a symlink put there), or null.
 */
function blockingEntry(fs: FileOps, path: string, within: string): string | null {
  const chain: string[] = [];
  for (let at = path; at.startsWith(`${within}/`); at = dirname(at)) chain.unshift(at);
  for (const at of chain) {
    try {
      if (!fs.lstatSync(at).isDirectory()) return at;
    } catch {
      return null;
    }
  }
  return null;
}

/**
 * Why the staging directory `stagingDir` (in the data directory `dataDir`) could not be made ready, naming
 * the real path in the way; `outcome` says what that means for the workspace ("Nothing was restored or
 * changed", …).
 */
function stagingFailure(
  fs: FileOps,
  stagingDir: string,
  dataDir: string,
  error: unknown,
  outcome: string,
): SagaError {
  const errno = errnoBehind(error);
  const blocking = blockingEntry(fs, stagingDir, dataDir);
  if (blocking !== null) {
    return new SagaError({
      code: "CORRUPT",
      cause: error,
      message: `The restore staging directory ${stagingDir} in the data directory cannot be used: ${blocking} is ${
        blocking === stagingDir ? "" : "in its way and is "
      }a file or a symlink, not a directory${errno ? ` (${errno})` : ""}. ${outcome} Move ${blocking} aside (drydock never removes it; it is not drydock's), then retry.`,
    });
  }
  return new SagaError({
    code: isProcessLevelErrno(errno) ? "LOCK_FAILED" : "WRITE_FAILED",
    cause: error,
    message: `The restore staging directory ${stagingDir} in the data directory could not be made ready (${
      errno ?? (error as Error)?.name ?? "error"
    }). ${outcome} Check that directory and its disk (permissions, free space), then retry.`,
  });
}

/**
 * Makes the workspace's staging directory (in the data directory) ready: created 0700 if missing, a real
 * directory, what a dead apply left there swept. A restore calls it before its intent, so a file in the
 * way stops it while nothing has changed. Only for a caller holding the workspace's lock.
 */
export function prepareStaging(
  fs: FileOps,
  stagingDir: string,
  dataDir: string,
  outcome = "Nothing was restored or changed.",
): void {
  try {
    ensurePrivateDir(fs, stagingDir);
    sweepStaging(fs, stagingDir);
  } catch (error) {
    throw stagingFailure(fs, stagingDir, dataDir, error, outcome);
  }
}

/** Owner read, write and search: what the apply needs on a directory it removes from or writes into. */
const OWNER_RWX = 0o700;

/**
 * Applies the plan, then (when durable) flushes every directory it touched; returns how many changes were
 * applied. Removals and directories are changed in plan order. Each file is staged as a temp and renamed
 * over its target only once its bytes are flushed, several flushes in flight at a time, so a published
 * name never points at unflushed bytes.
 *
 * Directory modes as tar sets them, so that a process that is not root can restore a read-only
 * directory: before anything else, a directory the plan removes is made owner-writable and one whose mode
 * it changes gets that mode plus owner rwx (shallowest first); one it creates is created with its mode
 * plus owner rwx; a mode without owner rwx is set only once every file is in place, deepest first. All of
 * these are touched paths: a rollback after a crash in between sets (and verifies) their modes like any
 * other change. A directory the plan does not touch keeps its mode: if it is read-only, what the plan
 * changes inside it fails (WRITE_FAILED) for a process that is not root.
 */
export async function applyPlan(ctx: ApplyContext, plan: RestorePlan): Promise<number> {
  const { fs } = ctx;
  // Only files are staged: a plan that writes none (removals, directories, modes: a rollback of a restore
  // that stopped before writing any file) does not need the staging directory at all.
  if (writesFiles(plan)) {
    prepareStaging(fs, ctx.stagingDir, ctx.dataDir, "Nothing in the workspace was changed by this step.");
  } else {
    // What a dead apply left there is still swept, best effort: nothing here depends on it.
    try {
      sweepStaging(fs, ctx.stagingDir);
    } catch {
      // Unreadable just now: the next apply that writes files sweeps it, or fails on it before its intent.
    }
  }
  const run: Applying = {
    ctx,
    touchedDirs: new Set<string>(),
    durable: ctx.durable !== false,
    flusher: flushBehind(fs),
    closer: closeBehind(fs),
    staged: new Set<string>(),
    state: { besideTarget: false },
    finalModes: [],
    index: 0,
  };
  try {
    openDirsFirst(run, plan);
    for (const op of plan.ops) await applyOp(run, op);
    try {
      await run.flusher.drain();
    } catch (error) {
      throw applyFailure(errnoPath(error) ?? "a restored file", error, ctx.stagingDir);
    }
    // Children sort after their parents: reversed, the deepest directories get their final modes first.
    for (const { path, mode } of run.finalModes.reverse()) {
      try {
        ctx.beforeEach?.();
        setDirMode(run, path, () => mode);
      } catch (error) {
        throw applyFailure(path, error);
      }
    }
  } finally {
    await run.flusher.settle();
    await run.closer.settle();
    for (const temp of run.staged) removeQuietly(fs, temp);
  }
  await flushTouchedDirs(run);
  return run.index;
}

/** One apply under way: what its steps share. */
interface Applying {
  readonly ctx: ApplyContext;
  /** Directories whose names (or, for a directory made or re-moded, whose mode) must be flushed. */
  readonly touchedDirs: Set<string>;
  readonly durable: boolean;
  readonly flusher: ReturnType<typeof flushBehind>;
  readonly closer: ReturnType<typeof closeBehind>;
  /** Temps written and not yet renamed into place (removed if the apply fails). */
  readonly staged: Set<string>;
  readonly state: { besideTarget: boolean };
  /** Modes without owner rwx, set once every file is in place. */
  readonly finalModes: { path: string; mode: number }[];
  /** Changes in place so far. */
  index: number;
}

function applied(run: Applying, abs: string): void {
  run.touchedDirs.add(dirname(abs));
  run.index += 1;
  run.ctx.onApplied(run.index);
}

function setDirMode(run: Applying, rel: string, mode: (current: number) => number): void {
  assertInside(run.ctx.fs, run.ctx.root, rel);
  chmodDir(run.ctx.fs, join(run.ctx.root, rel), mode);
}

/**
 * First, shallowest first: the directories to remove are made owner-writable, those to re-mode get
 * their new mode plus owner rwx, so that what is removed from or written into them can be.
 */
function openDirsFirst(run: Applying, plan: RestorePlan): void {
  const opened = plan.ops.filter(
    (op) => (op.op === "remove" && op.kind === "dir") || op.op === "chmod",
  ) as Extract<PlanOp, { path: string }>[];
  for (const op of opened.sort((a, b) => depth(a.path) - depth(b.path))) {
    try {
      run.ctx.beforeEach?.();
      setDirMode(run, op.path, (current) => (op.op === "chmod" ? op.mode : current) | OWNER_RWX);
    } catch (error) {
      // A directory to remove that is gone already (a retry after a crash) is what we wanted.
      if (op.op !== "remove" || errnoOf(error) !== "ENOENT") throw applyFailure(op.path, error);
    }
  }
}

/** One change of the plan, in plan order (a file is staged here and renamed into place once flushed). */
async function applyOp(run: Applying, op: PlanOp): Promise<void> {
  const { ctx } = run;
  const { fs, root } = ctx;
  const rel = op.op === "write" ? op.entry.path : op.path;
  const abs = join(root, rel);
  try {
    if (op.op !== "write") ctx.beforeEach?.();
    switch (op.op) {
      case "remove":
        assertInside(fs, root, rel);
        try {
          if (op.kind === "dir") fs.rmdirSync(abs);
          else fs.unlinkSync(abs);
        } catch (error) {
          // Idempotent: already gone (a retry after a crash) is what we wanted.
          if (errnoOf(error) !== "ENOENT") throw error;
        }
        applied(run, abs);
        break;
      case "mkdir":
      case "chmod":
        if (op.op === "mkdir") {
          assertInside(fs, root, rel);
          try {
            fs.mkdirSync(abs, { mode: op.mode | OWNER_RWX });
          } catch (error) {
            if (errnoOf(error) !== "EEXIST" || !fs.lstatSync(abs).isDirectory()) throw error;
          }
          setDirMode(run, rel, () => op.mode | OWNER_RWX);
        }
        if ((op.mode | OWNER_RWX) !== op.mode) run.finalModes.push({ path: rel, mode: op.mode });
        // A mode is inode metadata: durable once the directory itself is flushed, not its parent.
        run.touchedDirs.add(abs);
        applied(run, abs);
        break;
      case "write":
        await stageWrite(run, op, rel, abs);
        break;
    }
  } catch (error) {
    throw applyFailure(rel, error, ctx.stagingDir);
  }
}

/** Writes a file's temp and hands its rename to the flusher (or renames it at once when not durable). */
async function stageWrite(
  run: Applying,
  op: Extract<PlanOp, { op: "write" }>,
  rel: string,
  abs: string,
): Promise<void> {
  const { ctx, state, durable, closer } = run;
  const { fs, root } = ctx;
  const { entry } = op;
  const bytes = ctx.verified?.get(entry.sha256) ?? ctx.checkpoints.readBlob(entry);
  // The path is checked right before the rename; a temp written beside its target must be
  // checked before it is written too (a symlinked directory would take it outside the workspace).
  if (state.besideTarget) assertInside(fs, root, rel);
  const stageIn = state.besideTarget ? dirname(abs) : ctx.stagingDir;
  const temp = writeTemp(fs, stageIn, basename(rel), bytes, entry.mode, false);
  run.staged.add(temp);
  const publish = (): void => {
    try {
      ctx.beforeEach?.();
      assertInside(fs, root, rel);
      run.staged.delete(temp);
      renameIntoPlace(ctx, state, temp, entry, bytes, durable, closer);
    } catch (error) {
      throw applyFailure(rel, error);
    }
    applied(run, abs);
  };
  if (durable) await run.flusher.add(temp, publish);
  else publish();
}

/**
 * A directory removed later in the plan has nothing left to flush (and its parent was touched too).
 * The names (and the modes of the directories created or changed) are flushed after every file's bytes
 * and final directory mode, before workspace_applied is journaled, so that phase never claims more than
 * the disk holds (a file's mode is set before its temp is flushed). The re-scan runs while they flush.
 */
async function flushTouchedDirs(run: Applying): Promise<void> {
  const { ctx } = run;
  const { fs } = ctx;
  const dirs = run.durable ? [...run.touchedDirs].sort().filter((dir) => fs.existsSync(dir)) : [];
  const flushingDirs = fsyncPaths(fs, dirs);
  let rescan: { error: unknown } | null = null;
  try {
    ctx.whileFlushing?.();
  } catch (error) {
    rescan = { error };
  }
  try {
    await flushingDirs;
  } catch (error) {
    // A failed re-scan is the failure to report; otherwise the flush's.
    if (rescan === null) throw applyFailure(errnoPath(error) ?? "a restored directory", error);
  }
  if (rescan !== null) throw rescan.error;
}

/** Scans the workspace again and demands it equal the target tree exactly. Returns the post-state digest. */
/**
 * After a restricted apply: each of `paths` must now be exactly as in `expected` (present with the same
 * type, content and mode, or absent like there); the rest of the workspace is not compared. Returns the
 * digest of the whole workspace as it now is.
 */
export function verifyPaths(
  fs: FileOps,
  root: string,
  expected: readonly ManifestEntry[],
  paths: ReadonlySet<string>,
): string {
  const post = scanTree(fs, root, { strict: false });
  const now = new Map<string, ScannedEntry>(post.map((entry) => [entry.path, entry]));
  const wanted = new Map<string, ManifestEntry>(expected.map((entry) => [entry.path, entry]));
  for (const path of paths) {
    const a = now.get(path);
    const b = wanted.get(path);
    const same =
      a === undefined || b === undefined
        ? a === b
        : a.type === b.type &&
          (a.type !== "file" || b.type !== "file" || (a.sha256 === b.sha256 && a.mode === b.mode)) &&
          (a.type !== "dir" || b.type !== "dir" || a.mode === b.mode);
    if (!same) {
      throw new SagaError({
        code: "WRITE_FAILED",
        message: `After rolling back, ${path} in the workspace ${root} is not as the safety checkpoint holds it (something else changed it meanwhile, or a change was lost). Nothing else was changed; retry the rollback.`,
      });
    }
  }
  return treeDigest(post);
}

export function verifyTree(fs: FileOps, root: string, targetDigest: string): string {
  const post = treeDigest(scanTree(fs, root, { strict: false }));
  if (post !== targetDigest) {
    throw new SagaError({
      code: "WRITE_FAILED",
      message: `After restoring, the workspace ${root} does not equal the checkpoint (something else changed it meanwhile, or a change was lost). The restore's safety checkpoint can roll it back.`,
    });
  }
  return post;
}
