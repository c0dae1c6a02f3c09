import {
  checkWorkspaceInput as check,
  corruptFailure,
  idConflicts,
  parseWorkspaceManifest,
  pathClashError,
  retiredNameOf,
  sha256Of,
  versionConflict,
  type WorkspaceCheckpoint,
  WorkspaceError,
  type WorkspaceFile,
  type WorkspaceRestore,
  type WorkspaceStore,
  type WorkspaceWriteOptions,
  workspaceFileOf,
  workspacePathClash,
} from "@drydock/storage";
import type { PgHandle, PgTx } from "./database.js";

/**
 * Workspaces on PostgreSQL (issue 24, shape 1): `ws_blobs` by sha256, one `ws_heads` row per bot (version and
 * manifest), `ws_checkpoints`, `ws_restores`. Every change runs in one `handle.write` transaction under the
 * bot's own advisory lock, reads the head FOR UPDATE, checks the caller's expected version and replaces the
 * head with `UPDATE … WHERE version = <read>` (the compare-and-set); a lost COMMIT is resolved by call id
 * (`ops`) as every other write of this backend. Reads are one REPEATABLE READ snapshot, and a blob is served
 * only if its bytes still hash to the manifest's sha256.
 */

interface Head {
  version: number;
  files: WorkspaceFile[];
}

const ms = (column: string) => `floor(extract(epoch FROM ${column}) * 1000)::float8`;

const CHECKPOINT_COLUMNS = `checkpoint_id, bot_id, version::float8 AS version, jsonb_array_length(manifest) AS files,
  (SELECT coalesce(sum((e->>'size')::bigint), 0) FROM jsonb_array_elements(manifest) e)::float8 AS bytes,
  ${ms("created_at")} AS created_at`;
const RESTORE_COLUMNS = `operation_id, bot_id, checkpoint_id, from_version::float8 AS from_version,
  to_version::float8 AS to_version, state, ${ms("started_at")} AS started_at, ${ms("completed_at")} AS completed_at`;

interface CheckpointRaw {
  checkpoint_id: string;
  bot_id: string;
  version: number;
  files: number;
  bytes: number;
  created_at: number;
}
interface RestoreRaw {
  operation_id: string;
  bot_id: string;
  checkpoint_id: string;
  from_version: number;
  to_version: number;
  state: "completed";
  started_at: number;
  completed_at: number;
}

const checkpointOf = (raw: CheckpointRaw): WorkspaceCheckpoint => ({
  checkpointId: raw.checkpoint_id,
  botId: raw.bot_id,
  version: raw.version,
  files: raw.files,
  bytes: raw.bytes,
  createdAt: raw.created_at,
});
const restoreOf = (raw: RestoreRaw): WorkspaceRestore => ({
  operationId: raw.operation_id,
  botId: raw.bot_id,
  checkpointId: raw.checkpoint_id,
  fromVersion: raw.from_version,
  toVersion: raw.to_version,
  state: raw.state,
  startedAt: raw.started_at,
  completedAt: raw.completed_at,
});

/**
 * What `drydock storage migrate --to postgres` writes for one bot: its local tree as the head, and each of its
 * restore-saga checkpoints under its own id and creation time. `blobs` holds every file's bytes by sha256.
 */
export interface WorkspaceImport {
  files: WorkspaceFile[];
  checkpoints: { checkpointId: string; createdAt: number; files: WorkspaceFile[] }[];
  blobs: ReadonlyMap<string, Uint8Array>;
}

/** A postgres store's workspaces, with the migration-only import (not part of the WorkspaceStore contract). */
export interface PgWorkspaceStore extends WorkspaceStore {
  /**
   * Migration only: writes `input` as `botId`'s head (version 1) and checkpoints in one transaction.
   * Idempotent (a re-run after a crash): a head or checkpoint already holding exactly this manifest is kept;
   * one holding anything else is WORKSPACE_ID_CONFLICT and nothing is changed.
   */
  importWorkspace(botId: string, input: WorkspaceImport): Promise<void>;
  /**
   * Migration only: `botId`'s head manifest and every checkpoint's (id, createdAt, manifest), read in one
   * snapshot, and the sha256 of every blob they name that is missing or does not hash to its name. With
   * `{ blobs: true }` (`storage migrate` out of postgres) also the bytes of every good blob, by sha256.
   */
  exportWorkspace(
    botId: string,
    options?: { blobs?: boolean },
  ): Promise<{
    files: WorkspaceFile[];
    checkpoints: { checkpointId: string; createdAt: number; files: WorkspaceFile[] }[];
    badBlobs: string[];
    blobs?: Map<string, Uint8Array>;
  }>;
}

export function pgWorkspaces(
  handle: PgHandle,
  options: { live: () => void; maxFileBytes: number },
): PgWorkspaceStore {
  const corrupt = (what: string) => corruptFailure(handle.where, what);

  async function headOf(tx: PgTx, botId: string, forUpdate: boolean): Promise<Head> {
    const row = (
      await tx.query<{ version: number; manifest: unknown }>(
        `SELECT version::float8 AS version, manifest FROM ws_heads WHERE bot_id = $1${forUpdate ? " FOR UPDATE" : ""}`,
        [botId],
      )
    )[0];
    if (row === undefined) return { version: 0, files: [] };
    const files = parseWorkspaceManifest(row.manifest);
    if (files === null) throw corrupt(`the head manifest of bot ${botId}'s workspace breaks its format`);
    return { version: row.version, files };
  }

  /** The compare-and-set: the head moves from `from` to `from + 1` holding `files`, or nothing changes. */
  async function setHead(tx: PgTx, botId: string, from: number, files: WorkspaceFile[]): Promise<number> {
    const manifest = JSON.stringify(files);
    const rows =
      from === 0
        ? await tx.query<{ version: number }>(
            "INSERT INTO ws_heads (bot_id, version, manifest) VALUES ($1, 1, $2::jsonb) ON CONFLICT (bot_id) DO NOTHING RETURNING version::float8 AS version",
            [botId, manifest],
          )
        : await tx.query<{ version: number }>(
            "UPDATE ws_heads SET version = version + 1, manifest = $3::jsonb, updated_at = clock_timestamp() WHERE bot_id = $1 AND version = $2 RETURNING version::float8 AS version",
            [botId, from, manifest],
          );
    const version = rows[0]?.version;
    if (version === undefined) throw versionConflict(botId, from, (await headOf(tx, botId, false)).version);
    return version;
  }

  /** One transaction on `botId`'s workspace: its head read FOR UPDATE and checked against the expectation. */
  function change<R>(
    botId: string,
    writeOptions: WorkspaceWriteOptions | undefined,
    body: (tx: PgTx, head: Head) => Promise<R>,
    replay?: (tx: PgTx) => Promise<R | undefined>,
  ): Promise<R> {
    options.live();
    check.botId(botId);
    const expected = check.expectedVersion(writeOptions);
    return handle.write(`workspace:${botId}`, async (tx) => {
      const recorded = replay === undefined ? undefined : await replay(tx);
      if (recorded !== undefined) return recorded;
      const head = await headOf(tx, botId, true);
      if (expected !== undefined && expected !== head.version) {
        throw versionConflict(botId, expected, head.version);
      }
      return body(tx, head);
    });
  }

  const checkpointRow = async (tx: PgTx, checkpointId: string) =>
    (
      await tx.query<CheckpointRaw>(
        `SELECT ${CHECKPOINT_COLUMNS} FROM ws_checkpoints WHERE checkpoint_id = $1`,
        [checkpointId],
      )
    )[0];
  const restoreRow = async (tx: PgTx, operationId: string) =>
    (
      await tx.query<RestoreRaw>(`SELECT ${RESTORE_COLUMNS} FROM ws_restores WHERE operation_id = $1`, [
        operationId,
      ])
    )[0];

  /** An import that finds something else under its ids (migration only). */
  const idConflict = (what: string) =>
    new WorkspaceError(
      "WORKSPACE_ID_CONFLICT",
      `${what}. Nothing was changed. Use a fresh id for a new one; retry with the same id only what was asked with it.`,
    );

  return {
    async importWorkspace(botId, input) {
      options.live();
      check.botId(botId);
      for (const c of input.checkpoints) check.checkpointId(c.checkpointId);
      const all = [...input.files, ...input.checkpoints.flatMap((c) => c.files)];
      for (const file of all) {
        const bytes = input.blobs.get(file.sha256);
        if (bytes === undefined || bytes.byteLength !== file.size || sha256Of(bytes) !== file.sha256) {
          throw new WorkspaceError(
            "WORKSPACE_INVALID_ARGUMENT",
            `the bytes of '${file.path}' (bot ${botId}) do not hash to its manifest's sha256. Nothing was changed.`,
          );
        }
      }
      const same = (stored: unknown, files: WorkspaceFile[]) =>
        JSON.stringify(parseWorkspaceManifest(stored)) === JSON.stringify(files);
      await handle.write(`workspace:${botId}`, async (tx) => {
        for (const sha of new Set(all.map((f) => f.sha256))) {
          const bytes = input.blobs.get(sha) as Uint8Array;
          await tx.query(
            "INSERT INTO ws_blobs (sha256, size, bytes) VALUES ($1, $2, $3) ON CONFLICT (sha256) DO NOTHING",
            [sha, bytes.byteLength, Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)],
          );
        }
        const head = (
          await tx.query<{ manifest: unknown }>(
            "SELECT manifest FROM ws_heads WHERE bot_id = $1 FOR UPDATE",
            [botId],
          )
        )[0];
        if (head === undefined) {
          await tx.query("INSERT INTO ws_heads (bot_id, version, manifest) VALUES ($1, 1, $2::jsonb)", [
            botId,
            JSON.stringify(input.files),
          ]);
        } else if (!same(head.manifest, input.files)) {
          throw idConflict(
            `bot ${botId} already has a workspace in ${handle.where} that is not the one imported`,
          );
        }
        for (const c of input.checkpoints) {
          const row = (
            await tx.query<{ bot_id: string; manifest: unknown }>(
              "SELECT bot_id, manifest FROM ws_checkpoints WHERE checkpoint_id = $1",
              [c.checkpointId],
            )
          )[0];
          if (row === undefined) {
            await tx.query(
              "INSERT INTO ws_checkpoints (checkpoint_id, bot_id, version, manifest, created_at) VALUES ($1, $2, 0, $3::jsonb, to_timestamp($4::float8 / 1000))",
              [c.checkpointId, botId, JSON.stringify(c.files), c.createdAt],
            );
          } else if (row.bot_id !== botId || !same(row.manifest, c.files)) {
            throw idConflict(`the checkpoint id '${c.checkpointId}' is already taken in ${handle.where}`);
          }
        }
      });
    },

    async exportWorkspace(botId, exportOptions) {
      options.live();
      check.botId(botId);
      return handle.read(async (tx) => {
        const head = await headOf(tx, botId, false);
        const rows = await tx.query<{ checkpoint_id: string; created_at: number; manifest: unknown }>(
          `SELECT checkpoint_id, ${ms("created_at")} AS created_at, manifest FROM ws_checkpoints WHERE bot_id = $1 ORDER BY created_at, checkpoint_id`,
          [botId],
        );
        const checkpoints = rows.map((row) => {
          const files = parseWorkspaceManifest(row.manifest);
          if (files === null)
            throw corrupt(`the manifest of checkpoint ${row.checkpoint_id} breaks its format`);
          return { checkpointId: row.checkpoint_id, createdAt: row.created_at, files };
        });
        const named = [
          ...new Set([...head.files, ...checkpoints.flatMap((c) => c.files)].map((f) => f.sha256)),
        ];
        const blobs = await tx.query<{ sha256: string; bytes: Buffer }>(
          "SELECT sha256, bytes FROM ws_blobs WHERE sha256 = ANY($1::text[])",
          [named],
        );
        const goodBlobs = blobs.filter((b) => sha256Of(b.bytes) === b.sha256);
        const good = new Set(goodBlobs.map((b) => b.sha256));
        return {
          files: head.files,
          checkpoints,
          badBlobs: named.filter((sha) => !good.has(sha)),
          ...(exportOptions?.blobs === true
            ? { blobs: new Map(goodBlobs.map((b) => [b.sha256, new Uint8Array(b.bytes)])) }
            : {}),
        };
      });
    },

    async head(botId) {
      options.live();
      check.botId(botId);
      const head = await handle.read((tx) => headOf(tx, botId, false));
      return { botId, ...head };
    },

    async readFile(botId, path) {
      options.live();
      check.botId(botId);
      check.path(path);
      return handle.read(async (tx) => {
        const head = await headOf(tx, botId, false);
        const file = head.files.find((f) => f.path === path);
        if (file === undefined) {
          throw new WorkspaceError("WORKSPACE_FILE_NOT_FOUND", `No file at '${path}' in this workspace.`);
        }
        const blob = (
          await tx.query<{ bytes: Buffer }>("SELECT bytes FROM ws_blobs WHERE sha256 = $1", [file.sha256])
        )[0];
        if (blob === undefined)
          throw corrupt(`the blob ${file.sha256} of '${path}' (bot ${botId}) is missing`);
        if (blob.bytes.length !== file.size || sha256Of(blob.bytes) !== file.sha256) {
          throw corrupt(`the blob ${file.sha256} of '${path}' (bot ${botId}) does not hash to its name`);
        }
        return { file, bytes: blob.bytes, version: head.version };
      });
    },

    async writeFile(botId, path, bytes, writeOptions) {
      check.path(path);
      const { data, file } = workspaceFileOf(path, bytes, options.maxFileBytes);
      return change(botId, writeOptions, async (tx, head) => {
        const clash = workspacePathClash(head.files, path);
        if (clash !== undefined) throw pathClashError(path, clash);
        await tx.query(
          "INSERT INTO ws_blobs (sha256, size, bytes) VALUES ($1, $2, $3) ON CONFLICT (sha256) DO NOTHING",
          [file.sha256, file.size, data],
        );
        const files = [...head.files.filter((f) => f.path !== path), file].sort((a, b) =>
          a.path < b.path ? -1 : 1,
        );
        return { file, version: await setHead(tx, botId, head.version, files) };
      });
    },

    async deleteFile(botId, path, writeOptions) {
      check.path(path);
      return change(botId, writeOptions, async (tx, head) => {
        const files = head.files.filter((f) => f.path !== path);
        if (files.length === head.files.length) {
          throw new WorkspaceError(
            "WORKSPACE_FILE_NOT_FOUND",
            `No file at '${path}' in this workspace. Nothing was changed.`,
          );
        }
        return { version: await setHead(tx, botId, head.version, files) };
      });
    },

    async checkpoint(botId, checkpointId, writeOptions) {
      check.checkpointId(checkpointId);
      const recorded = async (tx: PgTx) => {
        const row = await checkpointRow(tx, checkpointId);
        if (row === undefined) return undefined;
        if (row.bot_id !== botId) throw idConflicts.checkpointOfAnotherBot(checkpointId);
        return checkpointOf(row);
      };
      return change(
        botId,
        writeOptions,
        async (tx, head) => {
          const inserted = await tx.query(
            "INSERT INTO ws_checkpoints (checkpoint_id, bot_id, version, manifest) VALUES ($1, $2, $3, $4::jsonb) ON CONFLICT (checkpoint_id) DO NOTHING RETURNING 1",
            [checkpointId, botId, head.version, JSON.stringify(head.files)],
          );
          // Another bot's transaction took the id meanwhile (its own lock is not ours).
          if (inserted.length === 0) throw idConflicts.justTaken("checkpoint id", checkpointId);
          return checkpointOf((await checkpointRow(tx, checkpointId)) as CheckpointRaw);
        },
        recorded,
      );
    },

    async getCheckpoint(botId, checkpointId) {
      options.live();
      check.botId(botId);
      check.checkpointId(checkpointId);
      const row = await handle.read((tx) => checkpointRow(tx, checkpointId));
      return row === undefined || row.bot_id !== botId ? null : checkpointOf(row);
    },

    async listCheckpoints(botId) {
      options.live();
      check.botId(botId);
      const rows = await handle.read((tx) =>
        tx.query<CheckpointRaw>(
          `SELECT ${CHECKPOINT_COLUMNS} FROM ws_checkpoints WHERE bot_id = $1 ORDER BY created_at, checkpoint_id`,
          [botId],
        ),
      );
      return rows.map(checkpointOf);
    },

    async restore(botId, checkpointId, operationId, writeOptions) {
      check.checkpointId(checkpointId);
      check.operationId(operationId);
      const recorded = async (tx: PgTx) => {
        const row = await restoreRow(tx, operationId);
        if (row === undefined) return undefined;
        if (row.bot_id !== botId || row.checkpoint_id !== checkpointId) {
          throw idConflicts.restoreRecorded(operationId, row.checkpoint_id, row.bot_id);
        }
        return restoreOf(row);
      };
      return change(
        botId,
        writeOptions,
        async (tx, head) => {
          const checkpoint = (
            await tx.query<{ bot_id: string; manifest: unknown }>(
              "SELECT bot_id, manifest FROM ws_checkpoints WHERE checkpoint_id = $1",
              [checkpointId],
            )
          )[0];
          if (checkpoint === undefined || checkpoint.bot_id !== botId) {
            throw new WorkspaceError(
              "WORKSPACE_CHECKPOINT_NOT_FOUND",
              `No checkpoint '${checkpointId}' of this workspace. Nothing was changed.`,
            );
          }
          const files = parseWorkspaceManifest(checkpoint.manifest);
          if (files === null) throw corrupt(`the manifest of checkpoint ${checkpointId} breaks its format`);
          const digests = [...new Set(files.map((f) => f.sha256))];
          const present = await tx.query<{ n: number }>(
            "SELECT count(*)::int AS n FROM ws_blobs WHERE sha256 = ANY($1::text[])",
            [digests],
          );
          if (present[0]?.n !== digests.length) {
            throw corrupt(`blobs of checkpoint ${checkpointId} are missing, so it cannot be restored`);
          }
          const toVersion = await setHead(tx, botId, head.version, files);
          const inserted = await tx.query<RestoreRaw>(
            `INSERT INTO ws_restores (operation_id, bot_id, checkpoint_id, from_version, to_version, state, started_at)
             VALUES ($1, $2, $3, $4, $5, 'completed', to_timestamp($6::float8 / 1000))
             ON CONFLICT (operation_id) DO NOTHING RETURNING ${RESTORE_COLUMNS}`,
            [operationId, botId, checkpointId, head.version, toVersion, tx.now],
          );
          // Another bot's restore took the id meanwhile: this transaction (and its head change) rolls back.
          if (inserted[0] === undefined) throw idConflicts.justTaken("restore operation id", operationId);
          return restoreOf(inserted[0]);
        },
        recorded,
      );
    },

    async getRestore(operationId) {
      options.live();
      check.operationId(operationId);
      const row = await handle.read((tx) => restoreRow(tx, operationId));
      return row === undefined || row.bot_id.includes(".retired-") ? null : restoreOf(row);
    },

    async retireWorkspace(botId) {
      // The head stays and moves on by one, empty: versions of a bot id only ever increase, so a writer that
      // read the deleted bot's workspace fails its compare-and-set on the next bot's. Its files are kept as a
      // checkpoint of the retired name, with the bot's checkpoints and restores.
      return change(botId, undefined, async (tx, head) => {
        const owned = await tx.query("SELECT 1 FROM ws_checkpoints WHERE bot_id = $1 LIMIT 1", [botId]);
        if (head.files.length === 0 && owned.length === 0) return { retiredAs: null };
        const retiredAs = retiredNameOf(botId, tx.now);
        await tx.query(
          `WITH c AS (UPDATE ws_checkpoints SET bot_id = $2 WHERE bot_id = $1),
                r AS (UPDATE ws_restores SET bot_id = $2 WHERE bot_id = $1)
           INSERT INTO ws_checkpoints (checkpoint_id, bot_id, version, manifest) VALUES ($2, $2, $3, $4::jsonb)`,
          [botId, retiredAs, head.version, JSON.stringify(head.files)],
        );
        if (head.version > 0) await setHead(tx, botId, head.version, []);
        return { retiredAs };
      });
    },
  };
}
