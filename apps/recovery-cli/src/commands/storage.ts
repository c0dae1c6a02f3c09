import { createHash } from "node:crypto";
import {
  migrateStorage,
  type PendingMigration,
  pendingMigration,
  readStorageBinding,
  refuseOverFileLimits,
  type StorageExport,
  type StorageKind,
} from "@drydock/storage";
import { postgresBackend, redactUrl } from "@drydock/storage-postgres";
import { sqliteBackend } from "@drydock/storage-sqlite";
import type { CommandContext } from "../context.js";
import { CliError } from "../errors.js";
import type { Rendered } from "../render.js";
import { pgWorkspacesToMove, refuseLocalWorkspaces, writeWorkspacesBack } from "../shared/migrate-back.js";
import {
  copyWorkspaces,
  refuseLiveInstances,
  type WorkspacesToMove,
  workspacesToMove,
} from "../shared/migrate-workspaces.js";
import { openCliStorage } from "../storage.js";

const TARGETS = ["file", "sqlite", "postgres"] as const;

/**
 * The fence of a migration: a digest of everything the source holds (its whole export). The apply migrates
 * only when the export it finds is the one the preview showed, so nothing written after the preview is
 * carried across unseen.
 */
function exportDigest(data: StorageExport, workspaces?: WorkspacesToMove): string {
  const hash = createHash("sha256").update("drydock-storage-migrate-v1\0").update(JSON.stringify(data));
  if (workspaces !== undefined) hash.update("\0workspaces\0").update(workspaces.digest);
  return `sha256:${hash.digest("hex")}`;
}

/**
 * `--to postgres`: the database URL is the server's own setting (`--storage postgres://…`, DRYDOCK_STORAGE or
 * DRYDOCK_STORAGE_FILE; schema DRYDOCK_POSTGRES_SCHEMA), so the migrated directory starts with exactly it.
 */
function postgresTarget(ctx: CommandContext, side: "to" | "from" = "to"): { url: string; where: string } {
  const setting = ctx.storageSetting();
  if (setting === undefined || !/^postgres(ql)?:\/\//.test(setting)) {
    throw new CliError(
      "USAGE",
      side === "from"
        ? `The data directory ${ctx.dataDir} is bound to postgres: migrating out of it takes the database URL as the server was started with it: --storage postgres://…, DRYDOCK_STORAGE=postgres://… or DRYDOCK_STORAGE_FILE (a file holding the URL), and DRYDOCK_POSTGRES_SCHEMA for a schema other than drydock. Nothing was read or changed.`
        : "--to postgres takes the database URL as the server will be started with it: --storage postgres://…, DRYDOCK_STORAGE=postgres://… or DRYDOCK_STORAGE_FILE (a file holding the URL), and DRYDOCK_POSTGRES_SCHEMA for a schema other than drydock. Nothing was read or changed.",
    );
  }
  return { url: setting, where: `${redactUrl(setting)} (schema ${ctx.postgresSchema ?? "drydock"})` };
}

const workspaceSummary = (w: WorkspacesToMove) =>
  `${w.counts.workspaces} bot workspace(s) (${w.counts.files} file(s), ${w.counts.checkpoints} checkpoint(s), ${w.counts.bytes} byte(s)); ${w.retired} retired workspace(s) of deleted bots stay behind, not moved`;

const movedSentence = (c: ReturnType<typeof counts>) =>
  `${c.creates} create row(s), ${c.deletes} deletion fence(s), ${c.bots} bot(s), ${c.meta} meta value(s)`;

function counts(data: StorageExport) {
  return {
    creates: data.creates.length,
    deletes: data.deletes.length,
    bots: data.bots.length,
    meta: Object.keys(data.meta).length,
  };
}

/**
 * `drydock storage migrate --to file|sqlite`: moves the data directory's coordination state (create and
 * delete journals, bot registry, meta singletons) to another backend with @drydock/storage's
 * `migrateStorage` — offline (refused while a server or a writing drydock command claims the directory),
 * verified (the target's export must equal the source's), and leaving the source retired so that neither
 * drydock nor the seeds' code writes to it again. Without --yes: what would move, and the fence to echo.
 */
export async function storageMigrate(ctx: CommandContext, to: string | undefined): Promise<Rendered> {
  if (to === undefined || !(TARGETS as readonly string[]).includes(to)) {
    throw new CliError("USAGE", `--to must be one of ${TARGETS.join(", ")}. Nothing was changed.`);
  }
  const target = to as StorageKind;
  // A migration killed mid-way: its source may be retired already (it refuses to be read), so the preview
  // describes the interrupted migration instead, and the apply lets migrateStorage finish it.
  const pending = pendingMigration(ctx.dataDir);
  if (pending !== null) return finishInterrupted(ctx, target, pending);
  const binding = await readStorageBinding(ctx.dataDir);
  const from = binding?.kind ?? "file";
  const pgSource = from === "postgres" ? postgresTarget(ctx, "from") : null;
  const back = target === "postgres" ? null : pgSource;
  const source = await openCliStorage(ctx.dataDir, pgSource === null ? from : pgSource.url, ctx.now, {
    postgresSchema: ctx.postgresSchema,
  });
  let data: StorageExport;
  let ws: WorkspacesToMove | undefined;
  try {
    data = await source.exportAll();
    if (back !== null) {
      await refuseLiveInstances(source, ctx.commandPrefix);
      refuseLocalWorkspaces(ctx.dataDir);
      ws = await pgWorkspacesToMove(source, data);
    }
  } finally {
    await source.close();
  }
  // Before the preview: a store the file backend cannot hold is never offered a command that would fail.
  if (target === "file") refuseOverFileLimits(ctx.dataDir, from, data);
  const pg = target === "postgres" ? postgresTarget(ctx) : null;
  if (pg !== null) ws = await workspacesToMove(ctx.dataDir, ctx.commandPrefix);
  const digest = exportDigest(data, ws);
  const moved = counts(data);
  const summary = `${movedSentence(moved)}${ws === undefined ? "" : `, ${workspaceSummary(ws)}`}`;
  const command = `${ctx.commandPrefix} storage migrate --to ${target} --yes --expected-state ${digest}`;
  // A directory no backend was bound to is read as file (the server binds it at its first start): moving
  // it "from file to file" would only write storage.json.
  if (from === target) {
    return {
      data: {
        ok: true,
        preview: !ctx.yes,
        changed: false,
        from,
        to: target,
        outcome: "unchanged",
        counts: moved,
      },
      human:
        binding === null
          ? `The data directory is not bound to a backend yet and is read as ${target}: there is nothing to move. Nothing was changed.\n`
          : `The data directory is already bound to ${target}. Nothing was changed.\n`,
    };
  }
  if (!ctx.yes) {
    return fencedPreview(
      command,
      digest,
      { from, to: target, counts: moved, ...postgresFields(pg, ws), ...sourceFields(back, ws) },
      `Preview: move ${summary} from ${back === null ? from : `postgres ${back.where}`} to ${pg === null ? target : `postgres ${pg.where}`}.${pg === null ? "" : " The target must be empty and no bot-server instance live in it. Afterwards the local workspace tree is left in place, and the server on postgres never reads it."}${back === null ? "" : ` No bot-server instance may be live in the database, and the local ${target} store, workspaces and checkpoints must be empty. Afterwards the postgres schema is retired: every later open of it refuses.`}`,
    );
  }
  checkFence(ctx, digest);
  return applied(ctx, from, target, summary, ws);
}

function postgresFields(pg: { where: string } | null, ws: WorkspacesToMove | undefined) {
  if (pg === null || ws === undefined) return {};
  return { target: pg.where, workspaces: { ...ws.counts, retired: ws.retired } };
}

function sourceFields(back: { where: string } | null, ws: WorkspacesToMove | undefined) {
  if (back === null || ws === undefined) return {};
  return { source: back.where, workspaces: { ...ws.counts, retired: ws.retired } };
}

async function applied(
  ctx: CommandContext,
  from: StorageKind,
  target: StorageKind,
  summary: string | null,
  planned?: WorkspacesToMove,
): Promise<Rendered> {
  if (from === "postgres" && target !== "postgres") return appliedBack(ctx, target, summary, planned);
  const pg = target === "postgres" ? postgresTarget(ctx) : null;
  // Read again on a resumed migration: the local workspaces are never changed by one.
  const ws = pg === null ? undefined : (planned ?? (await workspacesToMove(ctx.dataDir, ctx.commandPrefix)));
  const result = await migrateStorage({
    dataDir: ctx.dataDir,
    to: target,
    backends: { sqlite: sqliteBackend, postgres: postgresBackend },
    now: ctx.now,
    ...(pg === null || ws === undefined
      ? {}
      : {
          url: pg.url,
          ...(ctx.postgresSchema === undefined ? {} : { backendOptions: { schema: ctx.postgresSchema } }),
          checkTarget: (store) => refuseLiveInstances(store, ctx.commandPrefix),
          copyWorkspaces: (store) => copyWorkspaces(store, ws),
        }),
  });
  const what = summary ?? movedSentence(result.counts);
  const start =
    pg === null
      ? `DRYDOCK_STORAGE=${result.to}`
      : "the same postgres URL (DRYDOCK_STORAGE_FILE or DRYDOCK_STORAGE) and DRYDOCK_POSTGRES_SCHEMA";
  return {
    data: {
      ok: true,
      preview: false,
      changed: result.outcome !== "unchanged",
      ...result,
      ...postgresFields(pg, ws),
    },
    human: `Migrated ${what} from ${result.from} to ${pg === null ? result.to : `postgres ${pg.where}`} (${result.outcome}); the export of both sides was compared and is equal${ws === undefined ? "" : ", and every workspace head and checkpoint read back equals the local one"}. The data directory is now bound to ${result.to}; start the server with ${start}.${ws === undefined ? "" : " The local workspace tree is left in place; the server on postgres never reads it."}\n`,
  };
}

/**
 * `storage migrate` on a directory an interrupted migration left (its progress record): the preview says
 * what was interrupted and prints the command that finishes it, fenced by a digest of that record (nothing
 * else writes to a directory mid-migration: a verified one's source is retired, and the apply refuses
 * while any drydock process claims the directory). A verified migration is finished only towards its own
 * target: going elsewhere first would leave the retired source bound.
 */
async function finishInterrupted(
  ctx: CommandContext,
  target: StorageKind,
  pending: PendingMigration,
): Promise<Rendered> {
  if (pending.phase === "verified" && pending.to !== target) {
    throw new CliError(
      "ACTION_NOT_ELIGIBLE",
      `A migration of ${ctx.dataDir} from ${pending.from} to ${pending.to} was interrupted after its copy was verified, so the ${pending.from} store may be retired already. Nothing was changed. Finish it first with \`${ctx.commandPrefix} storage migrate --to ${pending.to}\`, then migrate to ${target} if you still want to.`,
    );
  }
  const digest = `sha256:${createHash("sha256").update("drydock-storage-migrate-v1\0interrupted\0").update(JSON.stringify(pending)).digest("hex")}`;
  const command = `${ctx.commandPrefix} storage migrate --to ${target} --yes --expected-state ${digest}`;
  const started = new Date(pending.at).toISOString();
  if (!ctx.yes) {
    const step =
      pending.phase === "verified"
        ? "after its copy was verified: only retiring the old store and rebinding the directory remain"
        : `while copying: the partial ${pending.to} store is not trusted and the migration starts over`;
    return fencedPreview(
      command,
      digest,
      { from: pending.from, to: target, counts: null, interrupted: pending },
      `Preview: a migration from ${pending.from} to ${pending.to} started at ${started} was interrupted ${step}.`,
    );
  }
  checkFence(ctx, digest);
  return applied(ctx, pending.from, target, null);
}

/** The postgres source's workspaces, read again (a resumed migration). */
async function readPgWorkspaces(ctx: CommandContext, url: string): Promise<WorkspacesToMove> {
  const source = await openCliStorage(ctx.dataDir, url, ctx.now, { postgresSchema: ctx.postgresSchema });
  try {
    return await pgWorkspacesToMove(source, await source.exportAll());
  } finally {
    await source.close();
  }
}

/**
 * Out of postgres (`--to file|sqlite`): refused while any instance is live in the database; the workspaces
 * are written as local trees and checkpoints after the journals' import (verified, idempotent), then the
 * schema is retired and the directory rebound. A resumed migration reads the workspaces again (the source
 * is retired only after everything was verified, so it still opens while anything remains to copy).
 */
async function appliedBack(
  ctx: CommandContext,
  target: StorageKind,
  summary: string | null,
  planned?: WorkspacesToMove,
): Promise<Rendered> {
  const back = postgresTarget(ctx, "from");
  const result = await migrateStorage({
    dataDir: ctx.dataDir,
    to: target,
    backends: { sqlite: sqliteBackend, postgres: postgresBackend },
    now: ctx.now,
    url: back.url,
    ...(ctx.postgresSchema === undefined ? {} : { backendOptions: { schema: ctx.postgresSchema } }),
    checkSource: (store) => refuseLiveInstances(store, ctx.commandPrefix),
    copyWorkspaces: async () => {
      await writeWorkspacesBack(ctx.dataDir, planned ?? (await readPgWorkspaces(ctx, back.url)));
    },
  });
  const what = summary ?? movedSentence(result.counts);
  const data = { ok: true, preview: false, changed: result.outcome !== "unchanged", ...result };
  return {
    data: { ...data, source: back.where },
    human: `Migrated ${what} from postgres ${back.where} to ${result.to} (${result.outcome}); the export of both sides was compared and is equal, and every workspace head and checkpoint written locally reads back equal to the database's. The postgres schema is retired (every later open of it refuses); the data directory is now bound to ${result.to}; start the server with DRYDOCK_STORAGE=${result.to}.\n`,
  };
}

/** The apply's fence: --expected-state must be the digest the preview printed for the state as it is now. */
function checkFence(ctx: CommandContext, digest: string): void {
  const expected = ctx.options.expectedState;
  if (expected === undefined) {
    throw new CliError("USAGE", `--yes needs --expected-state (the preview prints it). Nothing was changed.`);
  }
  if (expected !== digest) {
    throw new CliError(
      "FENCE_MISMATCH",
      `The data directory's state changed since the preview (expected ${expected}, found ${digest}). Nothing was changed. Run the preview again.`,
    );
  }
}

/** A preview: what the command would do, and the fenced command that applies it (asked on a terminal). */
function fencedPreview(
  command: string,
  digest: string,
  data: Record<string, unknown>,
  sentence: string,
): Rendered {
  return {
    confirm: { command },
    data: { ok: true, preview: true, changed: false, ...data, expectedState: digest, command },
    human: `${sentence} Stop every drydock server on this data directory first: the migration refuses while one runs. Nothing was changed. To apply it, run:\n  ${command}\n`,
  };
}
