import { isAbsolute, join, sep } from "node:path";
import {
  acquireLockSync,
  createSystemIdentity,
  type FileOps,
  inspectLock,
  isLockError,
  judgeOwnerLiveness,
  type LockError,
  type LockHandle,
  type LockOptions,
  nodeFileOps,
  type TornLock,
  takeoverLock,
} from "@drydock/file-lock";
import { errnoOf, isSagaError, SagaError } from "./errors.js";
import { domainDigest, plainDigest, sha256Hex } from "./internal/canonical.js";
import { ensurePrivateDir } from "./internal/files.js";
import {
  lockFailed,
  releaseSettled,
  releaseWithRetry,
  retryInBackground,
  stillHeld,
  withStateLock,
} from "./internal/state-lock.js";
import { boundedText } from "./internal/text.js";
import {
  OPERATION_ID_PATTERN,
  type WorkspaceLockOwner,
  WorkspaceLockOwnerSchema,
  type WorkspaceLockPayload,
  WorkspaceLockPayloadSchema,
  type WorkspaceLockPurpose,
} from "./schema.js";

/**
 * Workspace lock: one @drydock/file-lock file per workspace, `<dataDir>/locks/ws-<sha256(root)>.lock`,
 * owned with `reapDeadOwners: false` (a dead restore's lock is evidence, not garbage) and carrying the
 * payload `{ transactionId, workspaceRoot, purpose }`. Published with `durable: true`: the owner is flushed
 * before link(2) and the directory after, by acquire and by takeover alike, so a lock that a failed restore
 * retains (retainForRecovery writes nothing: it keeps the file acquire or takeover published) is still there
 * after a power loss. Two fsyncs per restore; the registry lock stays a plain short lock.
 *
 * Overlap (a lock on /a refuses /a/b and the reverse) is decided by a scan of every workspace lock in the
 * directory, made while holding `<dataDir>/locks/registry.lock`. Paths are compared, and so are the device
 * and inode of each locked root with ours: the same directory reached through a bind mount has another
 * path (and so another lock file) but the same identity. A bind mount BELOW a locked root is not seen.
 * Every acquisition and takeover scans and publishes under that registry lock, so two overlapping workspaces can never both pass the scan. Release
 * does not need it: removing a lock can only make a later scan less restrictive. A registry lock left by a
 * dead process is reaped (it guards nothing once its holder is gone).
 *
 * Purpose. A restore's lock (`checkpoint-restore`, the default) is never taken over implicitly: dead, it
 * guards a half-restored workspace. A `workspace-edit` lock (a file write, deletion or checkpoint: each
 * atomic per file, leaving at most unreferenced blobs and temps behind) guards nothing once its holder is
 * dead, so every acquisition and takeover that meets one dead (file-lock's verdict: pid, start time, boot
 * id, pid namespace; never a live or unverifiable owner), on this workspace or an overlapping one, takes
 * it over under the registry lock with file-lock's exact-owner `takeoverLock` (the file is renamed over,
 * never unlinked blindly): an acquisition of this workspace keeps it as its own lock, one of an
 * overlapping workspace releases it again. `reapDeadEditLocks` does the same for every such lock at once.
 */

export const WORKSPACE_LOCK_PURPOSE = "checkpoint-restore";
/** The purpose of a file write's, deletion's or checkpoint's lock: taken over by the next acquisition once dead. */
export const WORKSPACE_EDIT_LOCK_PURPOSE = "workspace-edit";
const WORKSPACE_LOCK_FILE = /^ws-[0-9a-f]{64}\.lock$/;

/** The owner digest the saga records and an operator echoes back: `"sha256:" + hex(sha256(canonical owner))`. */
export function ownerDigest(owner: WorkspaceLockOwner): string {
  return plainDigest(owner);
}

export interface WorkspaceLockBaseOptions {
  /** Locks live in `<dataDir>/locks`. */
  dataDir: string;
  /** Canonicalised with realpath; the filesystem root is refused. */
  workspaceRoot: string;
  fs?: FileOps;
  /** Liveness probe, like `process.kill(pid, 0)` (return = alive, throw ESRCH = dead). */
  isProcessAlive?: (pid: number) => boolean;
  identity?: LockOptions["identity"];
  now?: () => number;
}

export interface WorkspaceLockOptions extends WorkspaceLockBaseOptions {
  /** The saga this lock belongs to (for a workspace edit: an id naming the edit). */
  transactionId: string;
  /**
   * What the lock guards (default `checkpoint-restore`). `workspace-edit`: a short edit that leaves nothing
   * to recover if its process dies (its dead lock is taken over by the next acquisition). Takeovers
   * (`takeoverWorkspaceLock`) are for restores only.
   */
  purpose?: WorkspaceLockPurpose;
  /** How long to wait for a live overlapping owner to finish, ms (default 5000, max 60000). */
  waitMs?: number;
  /** Pause between attempts, ms (default 25). */
  retryMs?: number;
}

/** Takes over the exact dead owner `expectedOwner`. */
export interface WorkspaceOwnerRecoveryLockOptions extends WorkspaceLockOptions {
  /** The exact owner on disk, as `inspectWorkspaceLock` returned it; it must be dead. */
  expectedOwner: WorkspaceLockOwner;
  expectedTorn?: undefined;
}

/** Takes over the exact lock file torn by a power loss that `inspectWorkspaceLockState` reported. */
export interface WorkspaceTornRecoveryLockOptions extends WorkspaceLockOptions {
  expectedOwner?: undefined;
  /**
   * The `torn` of an `unreadable` inspection (file-lock's `TornLock`): the very file, still unreadable and
   * last changed before this machine booted. The caller vouches that the lock is `transactionId`'s: a torn
   * file names no transaction.
   */
  expectedTorn: TornLock;
}

export type WorkspaceRecoveryLockOptions =
  | WorkspaceOwnerRecoveryLockOptions
  | WorkspaceTornRecoveryLockOptions;

/** Device, inode, size and ctime of a lock file, as fstat/lstat report them. */
export interface WorkspaceLockFileIdentity {
  readonly dev: number;
  readonly ino: number;
  readonly size: number;
  readonly ctimeMs: number;
}

/**
 * What a workspace's lock file holds, read-only. `unreadable`: a file is there but holds no owner of this
 * workspace (`reason` says why). `torn` is set when file-lock would report it as torn by a power loss (its
 * bytes are no lock owner and it was last changed before this machine booted): only then can it be taken
 * over (`expectedTorn`). `identity` is null when the file could not even be stat'ed.
 */
export type WorkspaceLockState =
  | { readonly kind: "absent" }
  | { readonly kind: "owner"; readonly owner: WorkspaceLockOwner }
  | {
      readonly kind: "unreadable";
      readonly path: string;
      readonly reason: string;
      readonly torn: TornLock | null;
      readonly identity: WorkspaceLockFileIdentity | null;
    };

export interface WorkspaceLease {
  readonly workspaceRoot: string;
  /** The owner this process published (its token is the proof of ownership: never log it). */
  readonly owner: WorkspaceLockOwner;
  readonly ownerDigest: string;
  /** The dead owner a takeover replaced; null for a fresh lock (and for a torn lock's takeover). */
  readonly priorOwner: WorkspaceLockOwner | null;
  /** The torn lock file a takeover replaced (`expectedTorn`); null or absent otherwise. */
  readonly priorTornLock?: TornLock | null;
  /** The transaction a takeover recovers; null for a fresh lock. */
  readonly recoveryOfOperationId: string | null;
  /** Throws LOCK_OWNERSHIP_LOST unless the lock file still holds exactly this owner. */
  assertOwned(): void;
  /**
   * Always throws a RECOVERY_REQUIRED error. If the callback of `withWorkspaceLock` lets THAT error
   * object propagate, the lock is kept on disk so only a fenced takeover can settle the transaction;
   * catching or replacing it releases the lock as usual. It first checks that the lock file still holds
   * this owner: a lock taken over or removed is never claimed as retained (LOCK_OWNERSHIP_LOST instead).
   */
  retainForRecovery(reason: string): never;
}

export interface HeldWorkspaceLock extends WorkspaceLease {
  /**
   * Locks of stopped workspace edits (dead `workspace-edit` owners, of this or an overlapping workspace)
   * this acquisition took over and removed, or kept as its own; empty for most.
   */
  readonly reapedEditLocks: readonly WorkspaceLockOwner[];
  /** The error `retainForRecovery` threw, if it was called. */
  readonly retention: SagaError | null;
  /** Removes the lock if it still holds this owner (one retry on a transient failure). */
  release(): void;
}

function invalid(message: string): SagaError {
  return new SagaError({ code: "INVALID_ARGUMENT", message });
}

function canonicalRoot(fs: FileOps, workspaceRoot: string): string {
  if (typeof workspaceRoot !== "string" || !isAbsolute(workspaceRoot)) {
    throw invalid("A workspace lock needs an absolute workspaceRoot.");
  }
  let root: string;
  try {
    root = fs.realpathSync(workspaceRoot);
  } catch (error) {
    throw new SagaError({
      code: "INVALID_ARGUMENT",
      cause: error,
      message: `The workspace ${workspaceRoot} cannot be resolved (${errnoOf(error) ?? "error"}). Check that it exists.`,
    });
  }
  if (root === sep) throw invalid("The filesystem root cannot be locked as a workspace.");
  return root;
}

function locksDirOf(dataDir: string): string {
  if (typeof dataDir !== "string" || !isAbsolute(dataDir))
    throw invalid("The workspace lock needs an absolute dataDir.");
  return join(dataDir, "locks");
}

/** The lock file of a (canonical) workspace root. */
export function workspaceLockPath(dataDir: string, canonicalWorkspaceRoot: string): string {
  return join(locksDirOf(dataDir), `ws-${sha256Hex(canonicalWorkspaceRoot)}.lock`);
}

function overlaps(a: string, b: string): boolean {
  return a === b || a.startsWith(b + sep) || b.startsWith(a + sep);
}

function corruptLock(path: string, cause?: unknown): SagaError {
  return new SagaError({
    code: "LOCK_FAILED",
    cause,
    message: `The workspace lock ${path} is unreadable or not a workspace lock, so no workspace it might cover can be locked. It was left as it is: it may guard a restore that stopped. Do not remove it; settle that restore first (\`drydock restores list\`, then \`drydock restores show <operation>\` says what happened to the lock and prints the command that settles the restore).`,
  });
}

function parseOwner(path: string, owner: unknown): WorkspaceLockOwner {
  const parsed = WorkspaceLockOwnerSchema.safeParse(owner);
  if (!parsed.success) throw corruptLock(path);
  // The file name binds the lock to its workspace: a payload naming another root is not ours to trust.
  if (workspaceLockPath(join(path, "..", ".."), parsed.data.payload.workspaceRoot) !== path)
    throw corruptLock(path);
  return parsed.data;
}

function readOwner(fs: FileOps, path: string): WorkspaceLockOwner | null {
  let owner: unknown;
  try {
    owner = inspectLock(path, { fs });
  } catch (error) {
    // LOCK_IO: this process could not read the file (out of descriptors or memory, interrupted), which
    // says nothing about the lock; never tell a person to remove it for that.
    if (isLockError(error) && error.code === "LOCK_IO") throw readOwnerIoError(path, error);
    throw corruptLock(path, error);
  }
  return owner === null ? null : parseOwner(path, owner);
}

function readOwnerIoError(path: string, error: Error): SagaError {
  return new SagaError({
    code: "LOCK_FAILED",
    cause: error,
    message: `The workspace lock ${path} could not be read by this process (${error.message}), so it was not judged and nothing was changed. Retry shortly.`,
  });
}

/** The owner of a workspace's lock, or null. Read-only: creates nothing. */
export function inspectWorkspaceLock(options: WorkspaceLockBaseOptions): WorkspaceLockOwner | null {
  const fs = options.fs ?? nodeFileOps;
  const root = canonicalRoot(fs, options.workspaceRoot);
  return readOwner(fs, workspaceLockPath(options.dataDir, root));
}

/** The sha256 digest an operator echoes back to take over a torn lock (`torn:` + it, in drydock's fence). */
export function tornLockDigest(torn: TornLock): string {
  const { dev, ino, size, ctimeMs } = torn;
  return domainDigest("drydock-torn-workspace-lock-v1", { torn: true, dev, ino, size, ctimeMs });
}

function isTornLockShape(value: unknown): value is TornLock {
  if (typeof value !== "object" || value === null) return false;
  const torn = value as Record<string, unknown>;
  const natural = (n: unknown) => typeof n === "number" && Number.isSafeInteger(n) && n >= 0;
  return (
    torn.torn === true &&
    natural(torn.dev) &&
    natural(torn.ino) &&
    natural(torn.size) &&
    typeof torn.ctimeMs === "number" &&
    Number.isFinite(torn.ctimeMs)
  );
}

function sameFile(a: WorkspaceLockFileIdentity | null, b: WorkspaceLockFileIdentity | null): boolean {
  return (
    a !== null &&
    b !== null &&
    a.dev === b.dev &&
    a.ino === b.ino &&
    a.size === b.size &&
    a.ctimeMs === b.ctimeMs
  );
}

function lockFileIdentity(fs: FileOps, path: string): WorkspaceLockFileIdentity | null {
  try {
    const { dev, ino, size, ctimeMs } = fs.lstatSync(path);
    return { dev, ino, size, ctimeMs };
  } catch {
    // Gone, or not even stat-able: no identity, so never torn (file-lock would not call it torn either).
    return null;
  }
}

/** This machine's boot time as file-lock's boot-time rule reads it; undefined where unknown. */
function bootTimeOf(identity: LockOptions["identity"] | undefined): number | undefined {
  return (identity ?? createSystemIdentity()).bootTimeMs();
}

/**
 * The lock file's state. The file is stat'ed before and after its bytes are judged, so the identity is the
 * one of the bytes read (file-lock reads them through one descriptor; a file replaced in between is read
 * again). Torn, exactly as file-lock decides it: its bytes are no lock owner (file-lock's LOCK_INVALID or
 * LOCK_UNREADABLE) and its ctime is older than this boot. A valid file-lock owner that is not a workspace
 * lock of this workspace is unreadable but never torn: a complete file was written there.
 */
function readState(fs: FileOps, path: string, bootTimeMs: () => number | undefined): WorkspaceLockState {
  for (let attempt = 0; ; attempt += 1) {
    const before = lockFileIdentity(fs, path);
    let owner: unknown;
    try {
      owner = inspectLock(path, { fs });
    } catch (error) {
      if (isLockError(error) && error.code === "LOCK_IO") throw readOwnerIoError(path, error);
      const after = lockFileIdentity(fs, path);
      if (after === null && before === null) {
        // Could not be stat'ed either time: unreadable, identity unknown, never torn.
        return { kind: "unreadable", path, reason: reasonOf(error), torn: null, identity: null };
      }
      if (!sameFile(before, after)) {
        if (attempt < 3) continue;
        throw new SagaError({
          code: "LOCK_FAILED",
          cause: error,
          message: `The workspace lock ${path} kept changing while it was read, so it was not judged and nothing was changed. Retry shortly; if this persists, find what rewrites it.`,
        });
      }
      const identity = after as WorkspaceLockFileIdentity;
      const boot = bootTimeMs();
      const torn =
        boot !== undefined && identity.ctimeMs < boot ? { torn: true as const, ...identity } : null;
      return { kind: "unreadable", path, reason: reasonOf(error), torn, identity };
    }
    if (owner === null) return { kind: "absent" };
    try {
      return { kind: "owner", owner: parseOwner(path, owner) };
    } catch {
      return {
        kind: "unreadable",
        path,
        reason: "it holds a lock owner that is not a workspace lock of this workspace",
        torn: null,
        identity: lockFileIdentity(fs, path),
      };
    }
  }
}

function reasonOf(error: unknown): string {
  if (isLockError(error)) {
    const why = /(?:lock owner file|could not be read) \(([^)]*)\)/.exec(error.message)?.[1];
    const what =
      error.code === "LOCK_UNREADABLE" ? "it could not be read" : "it is not a valid lock owner file";
    return why ? `${what}: ${why}` : what;
  }
  return error instanceof Error ? error.message : String(error);
}

/**
 * Like `inspectWorkspaceLock`, but an unreadable lock file is a result, never an error: `unreadable`, with
 * why, the file's identity, and `torn` when it may be taken over (`takeoverWorkspaceLock` with
 * `expectedTorn`). Read-only: creates nothing. Throws only when this process could not judge the file
 * (LOCK_FAILED: out of descriptors or memory, or the file kept changing) or the workspace is invalid.
 */
export function inspectWorkspaceLockState(options: WorkspaceLockBaseOptions): WorkspaceLockState {
  const fs = options.fs ?? nodeFileOps;
  const root = canonicalRoot(fs, options.workspaceRoot);
  return readState(fs, workspaceLockPath(options.dataDir, root), () => bootTimeOf(options.identity));
}

type Judge = (owner: WorkspaceLockOwner) => "alive" | "dead";

function makeJudge(options: Pick<WorkspaceLockBaseOptions, "isProcessAlive" | "identity">): Judge {
  const seams = {
    ...(options.isProcessAlive ? { isProcessAlive: options.isProcessAlive } : {}),
    ...(options.identity ? { identity: options.identity } : {}),
  };
  // file-lock's own verdict, so an overlapping neighbour's lock is judged as its own path would be (another
  // host or pid namespace is never dead); for a neighbour it only decides which error to give.
  return (owner) => (judgeOwnerLiveness(owner, seams) === "dead" ? "dead" : "alive");
}

function blockedError(
  owner: WorkspaceLockOwner,
  dead: boolean,
  root: string,
  sameDirectory = false,
): SagaError {
  const details = {
    ownerOperationId: owner.payload.transactionId,
    ownerPid: owner.pid,
    ownerWorkspaceRoot: owner.payload.workspaceRoot,
  };
  const relation =
    owner.payload.workspaceRoot === root
      ? "this workspace"
      : sameDirectory
        ? "this same directory under another path"
        : "an overlapping workspace";
  if (owner.payload.purpose === WORKSPACE_EDIT_LOCK_PURPOSE) {
    // A dead one is taken over by the next attempt; this is only said when it changed while being removed.
    return new SagaError({
      code: "WORKSPACE_LOCKED",
      ...details,
      message: dead
        ? `A lock left by a stopped file write, deletion or checkpoint (${owner.payload.transactionId}) on ${relation} (${owner.payload.workspaceRoot}) changed while it was being removed. Retry.`
        : `A file write, deletion or checkpoint (${owner.payload.transactionId}, pid ${owner.pid}) is in progress on ${relation} (${owner.payload.workspaceRoot}). Wait for it to finish, then retry.`,
    });
  }
  if (dead) {
    return new SagaError({
      code: "RECOVERY_REQUIRED",
      workspaceLockRetained: false,
      ...details,
      message: `Restore ${owner.payload.transactionId} on ${relation} (${owner.payload.workspaceRoot}) stopped without finishing and still holds its lock. It is never taken over implicitly: inspect it with the recovery tool and abort, roll back or release it.`,
    });
  }
  return new SagaError({
    code: "WORKSPACE_LOCKED",
    ...details,
    message: `Restore ${owner.payload.transactionId} (pid ${owner.pid}) is running on ${relation} (${owner.payload.workspaceRoot}). Wait for it to finish, then retry.`,
  });
}

interface DirIdentity {
  dev: bigint;
  ino: bigint;
}

/** Device and inode of a directory; null when it no longer exists (a gone root is nobody's alias). */
function dirIdentity(fs: FileOps, path: string, root: string): DirIdentity | null {
  try {
    const { dev, ino } = fs.statSync(path, { bigint: true });
    return { dev, ino };
  } catch (error) {
    const code = errnoOf(error);
    if (code === "ENOENT" || code === "ENOTDIR") return null;
    // Fails closed, like an unreadable lock: an unknown identity could be ours.
    throw new SagaError({
      code: "LOCK_FAILED",
      cause: error,
      message: `The directory ${path} could not be inspected (${code ?? "error"}), so whether a workspace lock on it covers ${root} under another path is unknown. Nothing was changed; retry shortly, or check that directory.`,
    });
  }
}

/**
 * Scans every workspace lock except `exceptPath` for one whose root overlaps `root`: by path (equal,
 * parent or child), or by identity (the same directory under another path, e.g. a bind mount; lock file
 * names stay keyed by path, for compatibility, so this is the only place such an alias is seen).
 */
async function findOverlap(p: Prepared, reaped: WorkspaceLockOwner[]): Promise<SagaError | null> {
  const { fs, locksDir, root, judge } = p;
  const exceptPath = p.path;
  let names: string[];
  try {
    names = fs.readdirSync(locksDir);
  } catch (error) {
    throw lockFailed(error, `the workspace lock registry ${locksDir}`);
  }
  let ours: DirIdentity | null | undefined;
  for (const name of names.sort()) {
    if (!WORKSPACE_LOCK_FILE.test(name)) continue;
    const path = join(locksDir, name);
    if (path === exceptPath) continue;
    const owner = readOwner(fs, path);
    if (!owner) continue;
    const other = owner.payload.workspaceRoot;
    let sameDirectory = false;
    if (!overlaps(other, root)) {
      if (ours === undefined) ours = dirIdentity(fs, root, root);
      const theirs = ours && dirIdentity(fs, other, root);
      if (!(ours && theirs && theirs.dev === ours.dev && theirs.ino === ours.ino)) continue;
      sameDirectory = true;
    }
    const dead = judge(owner) === "dead";
    if (dead && owner.payload.purpose === WORKSPACE_EDIT_LOCK_PURPOSE) {
      // A stopped edit's lock guards nothing: removed (exact owner), and the scan goes on.
      if (await removeDeadEditLock(p, path, owner)) {
        reaped.push(owner);
        continue;
      }
    }
    return blockedError(owner, dead, root, sameDirectory);
  }
  return null;
}

/** file-lock options for a lock file holding `payload` (a takeover publishes an owner carrying it). */
function ownerLockOptions(
  fs: FileOps,
  payload: WorkspaceLockPayload,
  seams: Pick<WorkspaceLockBaseOptions, "isProcessAlive" | "identity" | "now">,
): LockOptions {
  return {
    fs,
    payload,
    reapDeadOwners: false,
    durable: true,
    label: payload.purpose === WORKSPACE_EDIT_LOCK_PURPOSE ? "workspace edit" : "workspace restore",
    ...(seams.isProcessAlive ? { isProcessAlive: seams.isProcessAlive } : {}),
    ...(seams.identity ? { identity: seams.identity } : {}),
    ...(seams.now ? { now: seams.now } : {}),
  };
}

/**
 * Takes over the exact dead workspace-edit owner `owner` of `path` (file-lock's `takeoverLock`: the same
 * payload, this process as owner, renamed over the file under the reap election, so the lock is never
 * absent), runs `whileHeld`, and releases it. Only ever called under the registry lock. false: the lock is
 * no longer exactly that dead owner (gone, replaced, or alive after all), nothing was changed.
 */
async function removeDeadEditLock(
  p: Pick<Prepared, "fs" | "seams">,
  path: string,
  owner: WorkspaceLockOwner,
  whileHeld?: (owner: WorkspaceLockOwner) => void | Promise<void>,
): Promise<boolean> {
  const handle = await takeoverDeadEdit(path, owner, ownerLockOptions(p.fs, owner.payload, p.seams));
  if (handle === null) return false;
  let failed: { error: unknown } | null = null;
  try {
    await whileHeld?.(owner);
  } catch (error) {
    failed = { error };
  }
  try {
    releaseWithRetry(handle);
  } catch (error) {
    throw new SagaError({
      code: "LOCK_FAILED",
      cause: error,
      message: `The lock ${path}, left by a stopped workspace edit (${owner.payload.transactionId}), was taken over to be removed, but its release failed: ${(error as Error).message}`,
    });
  }
  if (failed !== null) throw failed.error;
  return true;
}

/** `takeoverLock` of an exact dead workspace-edit owner; null when the lock changed (or is alive after all). */
async function takeoverDeadEdit(
  path: string,
  owner: WorkspaceLockOwner,
  lockOptions: LockOptions,
): Promise<LockHandle | null> {
  if (owner.payload.purpose !== WORKSPACE_EDIT_LOCK_PURPOSE) return null;
  try {
    return await takeoverLock(path, owner, { ...lockOptions, waitMs: 1_000 });
  } catch (error) {
    if (isLockError(error) && (error.code === "LOCK_OWNERSHIP_LOST" || error.code === "LOCK_TIMEOUT"))
      return null;
    throw lockFailed(error, `the lock ${path} left by a stopped workspace edit`);
  }
}

function clampWait(value: number | undefined): number {
  if (value === undefined) return 5_000;
  if (!Number.isFinite(value) || value < 0 || value > 60_000) throw invalid("waitMs is 0 to 60000 ms.");
  return value;
}

interface Prepared {
  fs: FileOps;
  root: string;
  locksDir: string;
  path: string;
  payload: WorkspaceLockPayload;
  lockOptions: LockOptions;
  seams: Pick<WorkspaceLockBaseOptions, "isProcessAlive" | "identity" | "now">;
  judge: Judge;
  waitMs: number;
  retryMs: number;
}

function prepare(options: WorkspaceLockOptions): Prepared {
  const fs = options.fs ?? nodeFileOps;
  if (typeof options.transactionId !== "string" || !OPERATION_ID_PATTERN.test(options.transactionId)) {
    throw invalid("A workspace lock needs the operation id of its transaction.");
  }
  const locksDir = locksDirOf(options.dataDir);
  const root = canonicalRoot(fs, options.workspaceRoot);
  const purpose = options.purpose ?? WORKSPACE_LOCK_PURPOSE;
  if (purpose !== WORKSPACE_LOCK_PURPOSE && purpose !== WORKSPACE_EDIT_LOCK_PURPOSE)
    throw invalid(
      `A workspace lock's purpose is ${WORKSPACE_LOCK_PURPOSE} or ${WORKSPACE_EDIT_LOCK_PURPOSE}.`,
    );
  const payload = WorkspaceLockPayloadSchema.parse({
    transactionId: options.transactionId,
    workspaceRoot: root,
    purpose,
  });
  try {
    ensurePrivateDir(fs, locksDir);
  } catch (error) {
    if (error instanceof SagaError) throw error;
    throw lockFailed(error, `the workspace lock directory ${locksDir}`);
  }
  const seams = {
    ...(options.isProcessAlive ? { isProcessAlive: options.isProcessAlive } : {}),
    ...(options.identity ? { identity: options.identity } : {}),
    ...(options.now ? { now: options.now } : {}),
  };
  return {
    fs,
    root,
    locksDir,
    path: workspaceLockPath(options.dataDir, root),
    payload,
    lockOptions: ownerLockOptions(fs, payload, seams),
    seams,
    judge: makeJudge(options),
    waitMs: clampWait(options.waitMs),
    retryMs: options.retryMs ?? 25,
  };
}

function registryLockOptions(p: Prepared) {
  return {
    waitMs: 5_000,
    ...(p.lockOptions.isProcessAlive ? { isProcessAlive: p.lockOptions.isProcessAlive } : {}),
    ...(p.lockOptions.identity ? { identity: p.lockOptions.identity } : {}),
  };
}

function makeLease(
  p: Prepared,
  handle: LockHandle,
  priorOwner: WorkspaceLockOwner | null,
  priorTornLock: TornLock | null = null,
  reapedEditLocks: readonly WorkspaceLockOwner[] = [],
): HeldWorkspaceLock {
  const holder =
    p.payload.purpose === WORKSPACE_EDIT_LOCK_PURPOSE
      ? `workspace edit ${p.payload.transactionId}`
      : `restore ${p.payload.transactionId}`;
  const owner = parseOwner(p.path, handle.owner);
  const digest = ownerDigest(owner);
  let retention: SagaError | null = null;
  let released = false;
  const lease: HeldWorkspaceLock = {
    workspaceRoot: p.root,
    owner,
    ownerDigest: digest,
    priorOwner,
    priorTornLock,
    reapedEditLocks: Object.freeze([...reapedEditLocks]),
    recoveryOfOperationId: priorOwner
      ? priorOwner.payload.transactionId
      : priorTornLock
        ? p.payload.transactionId
        : null,
    get retention() {
      return retention;
    },
    assertOwned() {
      try {
        handle.assertOwned();
      } catch (error) {
        // A lock file that could not be read just now (I/O, unreadable) is no proof of a loss: the work stops
        // all the same, and whoever settles it says whether the lock was kept. Another owner, no file, or a
        // file rewritten into something that is no owner record (LOCK_INVALID: our own is always published
        // whole) is a loss.
        if (isLockError(error) && (error.code === "LOCK_IO" || error.code === "LOCK_UNREADABLE")) {
          throw new SagaError({
            code: "LOCK_FAILED",
            cause: error,
            ownerOperationId: p.payload.transactionId,
            message: `The lock on workspace ${p.root} could not be checked (${error.code}), so the work under it stopped. Check the data directory's disk.`,
          });
        }
        throw new SagaError({
          code: "LOCK_OWNERSHIP_LOST",
          cause: error,
          ownerOperationId: p.payload.transactionId,
          message: `The lock on workspace ${p.root} no longer belongs to ${holder}. Stop: another process may be changing the workspace. Inspect it with the recovery tool.`,
        });
      }
    },
    retainForRecovery(reason: string): never {
      if (p.payload.purpose !== WORKSPACE_LOCK_PURPOSE) {
        // Its dead lock would be taken over by the next acquisition: there is nothing to retain it for.
        throw new SagaError({
          code: "INVALID_ARGUMENT",
          message: `Only a restore's workspace lock can be retained for recovery, not ${holder}'s; it is released.`,
        });
      }
      // A lock that is no longer ours is never claimed as retained (LOCK_OWNERSHIP_LOST): the file on disk
      // is another owner's, or gone, and another process may be changing the workspace. A lock that could
      // not be checked (I/O, unreadable) is retained all the same: fail closed, as release() keeps a lock
      // it cannot read.
      try {
        lease.assertOwned();
      } catch (error) {
        if (isSagaError(error) && error.code === "LOCK_OWNERSHIP_LOST") throw error;
      }
      if (retention) throw retention;
      const text = boundedText(reason, "", 512);
      retention = new SagaError({
        code: "RECOVERY_REQUIRED",
        workspaceLockRetained: true,
        retainedOwnerDigest: digest,
        retentionReason: text || "the transaction's outcome is unknown",
        ownerOperationId: p.payload.transactionId,
        message: `Restore ${p.payload.transactionId} on ${p.root} did not finish (${text || "outcome unknown"}). The workspace lock is kept so nothing else touches the workspace; settle it with the fenced recovery that is eligible for it (abort, release, complete or rollback).`,
      });
      throw retention;
    },
    release() {
      if (released) return;
      try {
        releaseWithRetry(handle);
      } catch (error) {
        // file-lock has given the handle up: the lock on disk is another owner's (or gone) and stays so.
        if (isLockError(error) && error.code === "LOCK_OWNERSHIP_LOST") released = true;
        // Still ours (the unlink or the read before it failed): retried in the background, so a workspace
        // is not blocked until this process exits by one bad moment of its disk. Never a retained lock.
        else if (stillHeld(error)) {
          retryInBackground(() => {
            if (released || retention !== null) return true;
            if (!releaseSettled(handle)) return false;
            released = true;
            return true;
          });
          throw releaseFailed(p, error, true);
        }
        throw releaseFailed(p, error);
      }
      released = true;
    },
  };
  return lease;
}

/** A lease's release failed. Never "could not lock, nothing was changed": the restore ran under it. */
function releaseFailed(p: Prepared, error: unknown, retrying = false): SagaError {
  const tx = p.payload.transactionId;
  if (isLockError(error) && error.code === "LOCK_OWNERSHIP_LOST") {
    return new SagaError({
      code: "LOCK_OWNERSHIP_LOST",
      cause: error,
      ownerOperationId: tx,
      message: `The lock on workspace ${p.root} was no longer restore ${tx}'s when it released it: it had been taken by another owner or removed, and was left as it is. What the restore did may have overlapped with another process: inspect the workspace with the recovery tool.`,
    });
  }
  // file-lock's own words say whether the lock is still held (LOCK_IO, LOCK_UNREADABLE: call release()
  // again, or exit) or was rewritten by something else (LOCK_INVALID: left as it is, inspect it).
  return new SagaError({
    code: "LOCK_FAILED",
    cause: error,
    ownerOperationId: tx,
    message: `The lock of restore ${tx} on workspace ${p.root} was not released: ${(error as Error).message}${
      retrying
        ? " This process retries releasing it in the background for about a minute; if that fails too, the lock is freed when the process exits."
        : ""
    }`,
  });
}

/**
 * The registry lock was no longer ours when acquireWorkspaceLock let go of it: another process may have
 * passed its own overlap scan meanwhile, so the workspace lock just taken (if any) is given up again.
 */
function registryLost(p: Prepared, error: SagaError, lease: HeldWorkspaceLock | undefined): SagaError {
  let outcome = " Nothing was changed.";
  if (lease) {
    try {
      lease.release();
      outcome = " The workspace lock it had just taken was released again; nothing was changed.";
    } catch (releaseError) {
      const why = errnoOf((releaseError as Error).cause) ?? (releaseError as SagaError).code;
      outcome = stillHeld((releaseError as Error).cause)
        ? ` Giving up the workspace lock it had just taken failed too (${why}): this process retries that in the background for about a minute, and holds the lock until then (at the latest, until it exits).`
        : ` Giving up the workspace lock it had just taken failed too (${why}): this process holds it until it exits.`;
    }
  }
  return new SagaError({
    code: "LOCK_FAILED",
    cause: error,
    message: `The workspace lock registry in ${p.locksDir} was taken from this process while it checked ${p.root} for overlapping restores, so that check cannot be trusted.${outcome} Retry shortly, and inspect ${p.locksDir} if this persists.`,
  });
}

const sleep = (ms: number): Promise<void> => new Promise((done) => setTimeout(done, ms));

/** How many times in a row a lock that was held when tried and gone when read is tried again at once. */
const VANISHED_RETRIES = 5;

/**
 * The workspace lock was held when acquireLockSync tried it (LOCK_TIMEOUT, or LOCK_OWNER_DEAD) and had no
 * owner when read right after: its holder released it (or a dead one was reaped) in between.
 */
class Vanished {
  constructor(readonly error: LockError) {}
  /** The holder the attempt saw (LOCK_TIMEOUT names it), if it parses as a workspace lock's owner. */
  holder(path: string): WorkspaceLockOwner | null {
    if (this.error.code !== "LOCK_TIMEOUT" || this.error.owner === undefined) return null;
    try {
      return parseOwner(path, this.error.owner);
    } catch {
      return null;
    }
  }
}

/**
 * Takes the workspace lock for `transactionId`. Waits up to `waitMs` while a live owner holds this or an
 * overlapping workspace (then WORKSPACE_LOCKED); a dead restore's owner gives RECOVERY_REQUIRED at once
 * and is never taken over here. A dead workspace edit's owner is taken over (see the module comment).
 */
export async function acquireWorkspaceLock(options: WorkspaceLockOptions): Promise<HeldWorkspaceLock> {
  const p = prepare(options);
  const start = performance.now();
  let vanishedInARow = 0;
  for (;;) {
    // A release of the registry that fails with LOCK_IO hands the lease back (the registry stayed ours
    // throughout; state-lock.ts releases it later); one that finds it lost gives the lease up.
    const made: { lease?: HeldWorkspaceLock } = {};
    let outcome: HeldWorkspaceLock | SagaError | Vanished;
    try {
      outcome = await withStateLock(
        join(p.locksDir, "registry.lock"),
        "the workspace lock registry",
        p.fs,
        registryLockOptions(p),
        async (): Promise<HeldWorkspaceLock | SagaError | Vanished> => {
          const reaped: WorkspaceLockOwner[] = [];
          const overlap = await findOverlap(p, reaped);
          if (overlap) return overlap;
          try {
            const handle = acquireLockSync(p.path, { ...p.lockOptions, waitMs: 0 });
            made.lease = makeLease(p, handle, null, null, reaped);
            return made.lease;
          } catch (error) {
            if (isLockError(error) && (error.code === "LOCK_TIMEOUT" || error.code === "LOCK_OWNER_DEAD")) {
              const owner = readOwner(p.fs, p.path);
              const dead = error.code === "LOCK_OWNER_DEAD";
              if (owner && dead && owner.payload.purpose === WORKSPACE_EDIT_LOCK_PURPOSE) {
                // A stopped edit's lock: ours now, through the exact owner's takeover (never unlocked).
                const handle = await takeoverDeadEdit(p.path, owner, p.lockOptions);
                if (handle !== null) {
                  made.lease = makeLease(p, handle, null, null, [...reaped, owner]);
                  return made.lease;
                }
              }
              if (owner) return blockedError(owner, dead, p.root);
              // Held when tried, gone when read: its holder let go in between. Not a failure: look again.
              return new Vanished(error);
            }
            if (error instanceof SagaError) throw error;
            throw lockFailed(error, `workspace ${p.root}`);
          }
        },
      );
    } catch (error) {
      if (isSagaError(error) && error.code === "LOCK_OWNERSHIP_LOST")
        throw registryLost(p, error, made.lease);
      throw error;
    }
    if (outcome instanceof Vanished) {
      // Looked again at once, a bounded number of times: two processes taking turns on a workspace can
      // free it between every attempt and its read. Past that it is a busy workspace, as WORKSPACE_LOCKED
      // says (with the holder the last attempt saw), never a lock to inspect.
      vanishedInARow += 1;
      if (vanishedInARow <= VANISHED_RETRIES) continue;
      const seen = outcome.holder(p.path);
      if (seen === null) throw lockFailed(outcome.error, `workspace ${p.root}`);
      outcome = blockedError(seen, false, p.root);
    } else {
      vanishedInARow = 0;
    }
    if (!(outcome instanceof SagaError)) return outcome;
    if (outcome.code !== "WORKSPACE_LOCKED" || performance.now() - start >= p.waitMs) throw outcome;
    await sleep(Math.min(p.retryMs, Math.max(1, p.waitMs - (performance.now() - start))));
  }
}

/**
 * Replaces the exact dead owner `expectedOwner` of this workspace with a new owner of the SAME
 * transaction (new pid and token), for a fenced recovery. Refused if the owner changed (CONFLICT), is
 * alive (WORKSPACE_LOCKED), or another lock overlaps.
 */
export async function takeoverWorkspaceLock(
  options: WorkspaceRecoveryLockOptions,
): Promise<HeldWorkspaceLock> {
  if (options.purpose !== undefined && options.purpose !== WORKSPACE_LOCK_PURPOSE)
    throw invalid(
      `Only a restore's workspace lock (${WORKSPACE_LOCK_PURPOSE}) is ever taken over for recovery.`,
    );
  if (options.expectedTorn !== undefined) {
    if (options.expectedOwner !== undefined) throw invalid("Pass expectedOwner or expectedTorn, not both.");
    return takeoverTornWorkspaceLock(options);
  }
  const p = prepare(options);
  const expected = WorkspaceLockOwnerSchema.safeParse(options.expectedOwner);
  if (
    !expected.success ||
    expected.data.payload.purpose !== WORKSPACE_LOCK_PURPOSE ||
    expected.data.payload.transactionId !== p.payload.transactionId ||
    expected.data.payload.workspaceRoot !== p.root
  ) {
    throw invalid(
      "expectedOwner must be the exact checkpoint-restore owner of this operation and workspace.",
    );
  }
  const expectedOwner = expected.data;
  return takeoverUnderRegistry(p, async () => {
    try {
      const handle = await takeoverLock(p.path, options.expectedOwner, {
        ...p.lockOptions,
        waitMs: p.waitMs,
      });
      return { handle, expectedOwner, expectedTorn: null };
    } catch (error) {
      if (isLockError(error) && error.code === "LOCK_OWNERSHIP_LOST") throw changedSinceInspected(p, error);
      if (isLockError(error) && error.code === "LOCK_TIMEOUT")
        throw blockedError(expectedOwner, false, p.root);
      throw lockFailed(error, `workspace ${p.root}`);
    }
  });
}

function changedSinceInspected(p: Prepared, cause?: unknown): SagaError {
  return new SagaError({
    code: "CONFLICT",
    cause,
    ownerOperationId: p.payload.transactionId,
    message: `The lock on workspace ${p.root} changed since it was inspected, so it was not taken over. Inspect it again and decide anew.`,
  });
}

/**
 * A takeover under the registry lock, after the overlap check. `take` renames the new owner over the old
 * file, so this workspace's lock never goes missing and every overlapping acquisition sees a lock here
 * throughout, registry or not: if the registry is lost after the takeover (LOCK_IO hands the lease back by
 * itself), the lease is handed back too, since giving it up would unlock a workspace that needs recovery.
 */
async function takeoverUnderRegistry(
  p: Prepared,
  take: () => Promise<{
    handle: LockHandle;
    expectedOwner: WorkspaceLockOwner | null;
    expectedTorn: TornLock | null;
  }>,
): Promise<HeldWorkspaceLock> {
  const made: { lease?: HeldWorkspaceLock } = {};
  const reaped: WorkspaceLockOwner[] = [];
  try {
    return await withStateLock(
      join(p.locksDir, "registry.lock"),
      "the workspace lock registry",
      p.fs,
      registryLockOptions(p),
      async () => {
        const overlap = await findOverlap(p, reaped);
        if (overlap) throw overlap;
        const taken = await take();
        made.lease = makeLease(p, taken.handle, taken.expectedOwner, taken.expectedTorn, reaped);
        return made.lease;
      },
    );
  } catch (error) {
    if (made.lease && isSagaError(error) && error.code === "LOCK_OWNERSHIP_LOST") return made.lease;
    throw error;
  }
}

/**
 * Replaces the exact lock file torn by a power loss, `expectedTorn` (an `unreadable` inspection's `torn`),
 * with a new owner of `transactionId`, for a fenced recovery. Under the registry lock, like every
 * acquisition: refused if another lock overlaps (WORKSPACE_LOCKED / RECOVERY_REQUIRED), if the file is no
 * longer exactly that one (CONFLICT, nothing changed), or if it was last changed after this machine booted
 * (LOCK_FAILED: a process of this boot may have written it, so it is never taken over). file-lock's
 * takeoverLock checks the file once more under its election and renames the new owner over it, so the
 * workspace is never unlocked.
 */
async function takeoverTornWorkspaceLock(
  options: WorkspaceTornRecoveryLockOptions,
): Promise<HeldWorkspaceLock> {
  const p = prepare(options);
  if (!isTornLockShape(options.expectedTorn)) {
    throw invalid(
      "expectedTorn must be the `torn` of an unreadable workspace lock inspection ({ torn: true, dev, ino, size, ctimeMs }).",
    );
  }
  const { dev, ino, size, ctimeMs } = options.expectedTorn;
  const expectedTorn: TornLock = { torn: true, dev, ino, size, ctimeMs };
  const bootTimeMs = () => bootTimeOf(options.identity);
  const tx = p.payload.transactionId;
  return takeoverUnderRegistry(p, async () => {
    const state = readState(p.fs, p.path, bootTimeMs);
    if (state.kind !== "unreadable" || !sameFile(state.identity, expectedTorn))
      throw changedSinceInspected(p);
    if (state.torn === null) {
      throw new SagaError({
        code: "LOCK_FAILED",
        ownerOperationId: tx,
        message: `The workspace lock ${p.path} is unreadable (${state.reason}) but was last changed after this machine booted${bootTimeMs() === undefined ? " (or this machine's boot time is unknown)" : ""}, so a process of this boot may have written it: it is not a lock torn by a power loss and is never taken over (fail closed). It was left exactly as it is. Find out what wrote it; to settle restore ${tx}, stop every drydock server and CLI using this data directory, move the file aside and keep it, then settle the restore under a fresh lock (\`drydock restores show ${tx}\`, --expected-owner-digest none).`,
      });
    }
    try {
      const handle = await takeoverLock(p.path, expectedTorn, { ...p.lockOptions, waitMs: p.waitMs });
      return { handle, expectedOwner: null, expectedTorn };
    } catch (error) {
      if (isLockError(error) && error.code === "LOCK_OWNERSHIP_LOST") throw changedSinceInspected(p, error);
      throw lockFailed(error, `workspace ${p.root}`);
    }
  });
}

async function runHeld<T>(
  held: HeldWorkspaceLock,
  fn: (lease: WorkspaceLease) => T | Promise<T>,
): Promise<T> {
  let result: T;
  try {
    result = await fn(held);
  } catch (error) {
    // Kept only when the callback let the retention error itself through: a caught, replaced or
    // swallowed retention releases the lock, so a lock is never kept by accident.
    if (held.retention !== null && error === held.retention) throw error;
    try {
      held.release();
    } catch (releaseError) {
      // A lost lock outweighs the callback's failure: another process may be changing the workspace. The
      // loss is reported, carrying that failure (details.callbackError). Any other release failure (the
      // lock is still held, or unknown) leaves the callback's failure as the one the caller sees.
      if (isSagaError(releaseError) && releaseError.code === "LOCK_OWNERSHIP_LOST")
        throw lostWithCallbackError(releaseError, error);
    }
    throw error;
  }
  held.release();
  return result;
}

/** What a failure reads as in a message: its code (or name) and the start of its message. */
function failureSummary(error: unknown): string {
  const code = (error as { code?: unknown } | null)?.code;
  const label =
    typeof code === "string"
      ? code
      : error instanceof Error
        ? error.name
        : typeof error === "string"
          ? ""
          : "error";
  const message = boundedText(error instanceof Error ? error.message : error, "", 300);
  return [label, message].filter(Boolean).join(": ") || "unknown failure";
}

/**
 * The workspace lock turned out lost (`lost`, from `release()`) after the work under it failed with
 * `callbackError`. The loss is the error (its cause stays file-lock's, as on success) and carries the
 * failure, so a caller learns both: that the work failed, and that the lock was not theirs any more.
 */
export function lostWithCallbackError(lost: SagaError, callbackError: unknown): SagaError {
  return new SagaError({
    ...lost.details,
    code: "LOCK_OWNERSHIP_LOST",
    ...(lost.cause === undefined ? {} : { cause: lost.cause }),
    callbackError,
    message: `${lost.message} The work done under the lock had failed as well (${failureSummary(callbackError)}); see details.callbackError.`,
  });
}

/**
 * Runs `fn` holding the workspace lock; releases it afterwards unless `fn` let a retention propagate. A lock
 * found lost at that release is LOCK_OWNERSHIP_LOST, whether `fn` succeeded or failed (its error is then
 * `details.callbackError`).
 */
export async function withWorkspaceLock<T>(
  options: WorkspaceLockOptions,
  fn: (lease: WorkspaceLease) => T | Promise<T>,
): Promise<T> {
  return runHeld(await acquireWorkspaceLock(options), fn);
}

/** `withWorkspaceLock` through a takeover of the exact dead owner `expectedOwner`, or of the torn lock `expectedTorn`. */
export async function withWorkspaceRecoveryLock<T>(
  options: WorkspaceRecoveryLockOptions,
  fn: (lease: WorkspaceLease) => T | Promise<T>,
): Promise<T> {
  return runHeld(await takeoverWorkspaceLock(options), fn);
}

export interface ReapDeadEditLocksOptions {
  /** Locks live in `<dataDir>/locks`; a data directory without them has nothing to reap (nothing is created). */
  dataDir: string;
  fs?: FileOps;
  isProcessAlive?: (pid: number) => boolean;
  identity?: LockOptions["identity"];
  now?: () => number;
  /**
   * Runs while each stopped edit's lock is held by this process (taken over, not yet released), e.g. to
   * sweep the temps that edit left in its workspace (which may no longer exist). If it throws, the lock is
   * still released and the error propagates.
   */
  whileHeld?: (owner: WorkspaceLockOwner) => void | Promise<void>;
}

export interface ReapDeadEditLocksResult {
  /** The dead workspace-edit owners whose locks were removed. */
  readonly removed: readonly WorkspaceLockOwner[];
}

/**
 * Removes every workspace lock a stopped workspace edit left (a dead `workspace-edit` owner, judged by
 * file-lock: never a live or unverifiable one), each through the exact owner's takeover and a release,
 * under the registry lock. Restores' locks, live locks and unreadable lock files are left exactly as they
 * are. For a server's startup, so such a lock does not linger until the workspace's next acquisition.
 */
export async function reapDeadEditLocks(options: ReapDeadEditLocksOptions): Promise<ReapDeadEditLocksResult> {
  const fs = options.fs ?? nodeFileOps;
  const locksDir = locksDirOf(options.dataDir);
  const seams = {
    ...(options.isProcessAlive ? { isProcessAlive: options.isProcessAlive } : {}),
    ...(options.identity ? { identity: options.identity } : {}),
    ...(options.now ? { now: options.now } : {}),
  };
  const judge = makeJudge(seams);
  const isEditLock = (name: string): boolean => {
    if (!WORKSPACE_LOCK_FILE.test(name)) return false;
    try {
      return readOwner(fs, join(locksDir, name))?.payload.purpose === WORKSPACE_EDIT_LOCK_PURPOSE;
    } catch {
      return false;
    }
  };
  let names: string[];
  try {
    names = fs.readdirSync(locksDir);
  } catch (error) {
    if (errnoOf(error) === "ENOENT") return { removed: [] };
    throw lockFailed(error, `the workspace lock registry ${locksDir}`);
  }
  // Nothing to do without an edit lock on disk: the registry lock is not even taken.
  if (!names.some(isEditLock)) return { removed: [] };
  const removed: WorkspaceLockOwner[] = [];
  const registry = {
    waitMs: 5_000,
    ...(seams.isProcessAlive ? { isProcessAlive: seams.isProcessAlive } : {}),
    ...(seams.identity ? { identity: seams.identity } : {}),
  };
  try {
    await withStateLock(
      join(locksDir, "registry.lock"),
      "the workspace lock registry",
      fs,
      registry,
      async () => {
        for (const name of fs.readdirSync(locksDir).sort()) {
          if (!WORKSPACE_LOCK_FILE.test(name)) continue;
          const path = join(locksDir, name);
          let owner: WorkspaceLockOwner | null;
          try {
            owner = readOwner(fs, path);
          } catch {
            // Unreadable: not judged here (it may guard a restore); the recovery tools report it.
            continue;
          }
          if (owner === null || owner.payload.purpose !== WORKSPACE_EDIT_LOCK_PURPOSE) continue;
          if (judge(owner) !== "dead") continue;
          if (await removeDeadEditLock({ fs, seams }, path, owner, options.whileHeld)) removed.push(owner);
        }
      },
    );
  } catch (error) {
    // The registry was taken from this process at its release: what was removed is removed (a removal can
    // only make another process's overlap scan less restrictive), so that is no failure of this call.
    if (!(isSagaError(error) && error.code === "LOCK_OWNERSHIP_LOST")) throw error;
  }
  return { removed };
}
