import type { BoatCreateJournal, BoatCreateRequest } from "@drydock/boat-create-journal";
import type { BoatDeleteJournal, BoatDeletionRecord } from "@drydock/boat-delete-journal";
import type { Bot, BotRegistryStore } from "./bots.js";
import type { WorkspaceStore } from "./workspaces.js";

/**
 * The storage contract. A backend implements the very interfaces the journal packages export
 * (`BoatCreateJournal`, `BoatDeleteJournal`), so a consumer such as boat-lifecycle takes `storage.createJournal`
 * where it took `openBoatCreateJournal(...)`, unchanged. Each method is one atomic, durable transaction;
 * every decision is the journal's own pure step (`@drydock/boat-create-journal/logic`,
 * `@drydock/boat-delete-journal/logic`), run by the backend on the rows it read.
 */

export const STORAGE_KINDS = ["file", "sqlite", "postgres"] as const;
export type StorageKind = (typeof STORAGE_KINDS)[number];

/**
 * A crash point: a test-only hook called at each named durable step (see QUALITY.md, crash points). `scope`,
 * when the backend gives one, names what the step's transaction holds (postgres: its lock, e.g. `create` or
 * `workspace:<botId>`), so a test can stop one kind of transaction among many (a server's heartbeat writes too).
 */
export type StorageCrashHook = (point: string, scope?: string) => void;

/** Singletons of an installation (`environment-id`, the provider binding, …): first writer wins, never replaced. */
export interface MetaStore {
  /** The stored value, or null when none was ever written. */
  get(key: string): Promise<string | null>;
  /**
   * The stored value; when there is none, `mint()` is called and its value stored, unless another writer got
   * there first, whose value is returned instead. Two processes starting together agree on one value.
   */
  getOrCreate(key: string, mint: () => string): Promise<string>;
}

/** Everything a backend holds, canonically: the differential test and (later) migration compare these. */
export interface StorageExport {
  /** Create rows in the journal's order, every field (keys and bodies too: this never leaves the host). */
  creates: BoatCreateRequest[];
  /** Deletion fences in the journal's order. */
  deletes: BoatDeletionRecord[];
  /** Meta singletons by key (sorted). */
  meta: Record<string, string>;
  /** The bot registry, botId ascending, every field (deletion marks too). */
  bots: Bot[];
}

export interface Storage {
  readonly kind: StorageKind;
  readonly dataDir: string;
  readonly createJournal: BoatCreateJournal;
  readonly deleteJournal: BoatDeleteJournal;
  readonly meta: MetaStore;
  readonly bots: BotRegistryStore;
  /**
   * Workspaces as blobs and a versioned head manifest (see workspaces.ts), on every backend. The bot server
   * serves its workspaces from it on postgres only; on file and sqlite it keeps local files under the restore
   * saga (docs/decisions/0014-store-held-workspaces-on-every-backend.md).
   */
  readonly workspaces: WorkspaceStore;
  /** One consistent reading of everything stored (a read transaction, or each file under its lock). */
  exportAll(): Promise<StorageExport>;
  /**
   * Writes `data` verbatim (keys, timestamps, marks: export after import equals `data`) into an EMPTY store:
   * one transaction (a row backend) or one durable step per file (`file`). A store holding anything is
   * refused with STORAGE_NOT_EMPTY and left unchanged. For `migrateStorage`.
   */
  importAll(data: StorageExport): Promise<void>;
  /**
   * Retires this store after `migrateStorage` moved its state to `to`: from then on every open (and, for
   * `file`, the seeds' own code) refuses it, naming where the state went. Idempotent. Optional: a backend
   * without it cannot be migrated from.
   */
  retire?(to: StorageKind, at: number): Promise<void>;
  /**
   * A token that changes whenever the bot registry or either journal may have changed, by this process or
   * any other: equal tokens from the same Storage object mean nothing in them changed in between (a change
   * may also change it for nothing). Cheap enough to call on every request, so a reader may keep what it
   * derived from those rows until the token moves (the bot server's listing memo). Tokens of different
   * Storage objects are not comparable. sqlite: SQLite's data_version and this connection's writes. file:
   * each document's identity as the peeks trust it, and a token never handed out before while a document
   * changed within the last 2 s. Optional: a backend that cannot tell cheaply (postgres) leaves it out, and
   * readers read again. Throws as a read does (e.g. STORAGE_CLOSED).
   */
  changeToken?(): string;
  /** Releases the backend's handles; calls after it fail. Idempotent. */
  close(): Promise<void>;
}

export interface BackendOptions {
  dataDir: string;
  /** Wall clock, ms since the epoch (default Date.now). */
  now?: () => number;
  /** Mints idempotency keys (default crypto.randomUUID). */
  newKey?: () => string;
  /** Test-only crash points. */
  crash?: StorageCrashHook;
  /** A workspace file's size at most, bytes (default facts' DEFAULT_MAX_FILE_BYTES, 8 MiB). */
  maxFileBytes?: number;
}

/** How `openStorage` reaches a backend that lives in another package (see README: no hard dependency). */
export type BackendFactory = (options: BackendOptions & Record<string, unknown>) => Promise<Storage>;
