import { join } from "node:path";
import type { FileOps, LockOptions } from "@drydock/file-lock";
import type { z } from "zod";
import { type DeepReadonly, isNotDamaged, openJsonJournal } from "./journal.js";
import { toJournalStateError } from "./state-errors.js";

/**
 * The shell the Boat journals (`@drydock/boat-create-journal`, `@drydock/boat-delete-journal`) share: their
 * error class's shape, their refusal's wording, and the open/read/peek/update around `openJsonJournal`
 * that turns everything escaping into the journal's own error. It lives here, the one package below both
 * (neither journal may depend on the other), next to `toJournalStateError` which it wraps.
 */

/** What a journal's error is built from. */
export interface JournalStateErrorInit<Code extends string> {
  code: Code;
  message: string;
  /** The short reason, e.g. `invalid`, `unreadable`, `locked by another drydock process`. */
  detail: string;
  cause?: unknown;
}

/**
 * The shape of a journal's one error class: `code`, the `status` its journal's table gives that code, the
 * short `detail`, and a registered-symbol marker (`Symbol.for`), so its `isX()` guard (see
 * {@link hasMarker}) also recognises an error thrown by a duplicate copy of the package. A subclass sets
 * `name` and passes its marker and status table.
 */
export abstract class JournalStateErrorBase<Code extends string, Status extends number> extends Error {
  readonly code: Code;
  readonly status: Status;
  readonly detail: string;

  protected constructor(
    marker: symbol,
    statuses: Readonly<Record<Code, Status>>,
    init: JournalStateErrorInit<Code>,
  ) {
    super(init.message, init.cause === undefined ? undefined : { cause: init.cause });
    this.code = init.code;
    this.status = statuses[init.code];
    this.detail = init.detail;
    Object.defineProperty(this, marker, { value: true });
  }
}

/** True when `value` carries `marker` (set by {@link JournalStateErrorBase}); works across package copies. */
export function hasMarker(value: unknown, marker: symbol): boolean {
  return typeof value === "object" && value !== null && (value as Record<symbol, unknown>)[marker] === true;
}

/**
 * The seeds' refusal: "<what> is paused because its recovery state is <detail>." and, unless the journal
 * is merely not readable just now (TRANSIENTLY_UNREADABLE: EMFILE and the like) or written by a newer
 * drydock (NEWER_FORMAT) — then its detail says to retry or to upgrade, and nothing sends a person to
 * repair it — the `advice` on what to check before repairing.
 */
export function pausedMessage(what: string, detail: string, advice: string): string {
  const base = `${what} is paused because its recovery state is ${detail}.`;
  return isNotDamaged(detail) ? base : `${base} ${advice}`;
}

/**
 * V8's JSON.parse messages quote a slice of the text, which may be part of an idempotency key or a request
 * body; such a cause is replaced by one that says the same without the bytes.
 */
export function redactParseCause(cause: unknown): unknown {
  if (cause instanceof SyntaxError) return new SyntaxError("the journal file is not valid JSON");
  return cause;
}

export interface JournalShellOptions<T> {
  /** Directory holding the journal; `file` and `lockFile` are names inside it. */
  dataDir: string;
  file: string;
  lockFile: string;
  schema: z.ZodType<T>;
  empty: () => T;
  check: (doc: T) => string | null;
  /** The journal's "paused" error for a detail (also json-journal's `stateError`). */
  paused: (detail: string, cause?: unknown) => Error;
  /** The journal's own guard: its errors pass through unchanged. */
  isOwn: (value: unknown) => boolean;
  /** Passed to the lock, labelled "drydock" unless it says otherwise. */
  lock?: LockOptions;
  /** File system seam, for the journal and, unless `lock.fs` is set, its lock. */
  fs?: FileOps;
}

/**
 * A journal's document with every escape turned into its own error (`toJournalStateError`). `read` and
 * `peek` run `view` inside that guard, so what a view throws is handled the same way.
 */
export interface JournalShell<T> {
  read<R>(view: (doc: T) => R): Promise<R>;
  peek<R>(view: (doc: DeepReadonly<T>) => R): Promise<R>;
  update<R>(fn: (doc: T) => { next?: T; result: R }): Promise<R>;
}

export function openJournalShell<T>(options: JournalShellOptions<T>): JournalShell<T> {
  const { fs, paused, isOwn } = options;
  const lockFs = options.lock?.fs ?? fs;
  const journal = openJsonJournal<T>({
    file: join(options.dataDir, options.file),
    lockFile: join(options.dataDir, options.lockFile),
    schema: options.schema,
    empty: options.empty,
    check: options.check,
    stateError: paused,
    lock: { label: "drydock", ...options.lock, ...(lockFs ? { fs: lockFs } : {}) },
    ...(fs ? { fs } : {}),
  });

  async function guard<R>(run: () => Promise<R>): Promise<R> {
    try {
      return await run();
    } catch (error) {
      throw toJournalStateError(error, isOwn, paused);
    }
  }

  return {
    read: (view) => guard(async () => view(await journal.read())),
    peek: (view) => guard(async () => view(await journal.peek())),
    update: (fn) => guard(() => journal.update(fn)),
  };
}
