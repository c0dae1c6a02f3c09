import { createHash } from "node:crypto";
import { migrateStorage, readStorageBinding, type StorageExport, type StorageKind } from "@drydock/storage";
import { sqliteBackend } from "@drydock/storage-sqlite";
import type { CommandContext } from "../context.js";
import { CliError } from "../errors.js";
import type { Rendered } from "../render.js";
import { openCliStorage } from "../storage.js";

const TARGETS = ["file", "sqlite"] as const;

/**
 * The fence of a migration: a digest of everything the source holds (its whole export). The apply migrates
 * only when the export it finds is the one the preview showed, so nothing written after the preview is
 * carried across unseen.
 */
function exportDigest(data: StorageExport): string {
  return `sha256:${createHash("sha256").update("drydock-storage-migrate-v1\0").update(JSON.stringify(data)).digest("hex")}`;
}

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
    throw new CliError(
      "USAGE",
      `--to must be one of ${TARGETS.join(", ")} (postgres is not wired into drydock yet). Nothing was changed.`,
    );
  }
  const target = to as StorageKind;
  const binding = await readStorageBinding(ctx.dataDir);
  const from = binding?.kind ?? "file";
  const source = await openCliStorage(ctx.dataDir, from, ctx.now);
  let data: StorageExport;
  try {
    data = await source.exportAll();
  } finally {
    await source.close();
  }
  const digest = exportDigest(data);
  const moved = counts(data);
  const summary = `${moved.creates} create row(s), ${moved.deletes} deletion fence(s), ${moved.bots} bot(s), ${moved.meta} meta value(s)`;
  const command = `${ctx.commandPrefix} storage migrate --to ${target} --yes --expected-state ${digest}`;
  if (from === target && binding !== null) {
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
      human: `The data directory is already bound to ${target}. Nothing was changed.\n`,
    };
  }
  if (!ctx.yes) {
    return {
      confirm: { command },
      data: {
        ok: true,
        preview: true,
        changed: false,
        from,
        to: target,
        counts: moved,
        expectedState: digest,
        command,
      },
      human: `Preview: move ${summary} from ${from} to ${target}. Stop every drydock server on this data directory first: the migration refuses while one runs. Nothing was changed. To apply it, run:\n  ${command}\n`,
    };
  }
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
  const result = await migrateStorage({
    dataDir: ctx.dataDir,
    to: target,
    backends: { sqlite: sqliteBackend },
    now: ctx.now,
  });
  return {
    data: { ok: true, preview: false, changed: result.outcome !== "unchanged", ...result },
    human: `Migrated ${summary} from ${result.from} to ${result.to} (${result.outcome}); the export of both sides was compared and is equal. The data directory is now bound to ${result.to}; start the server with DRYDOCK_STORAGE=${result.to}.\n`,
  };
}
