import { relative } from "node:path";
import { collectGarbage, type LockRow, listLocks, lockGarbage } from "@drydock/recovery-controller";
import type { CommandContext } from "../context.js";
import { type Rendered, table } from "../render.js";
import { nextLine, type Page, pageOf } from "../shared/pages.js";

export type { LockRow };

/** The lock files (recovery-controller's `listLocks`, the one listing the bot server's GET /v1/locks shares). */
export function collectLocks(ctx: CommandContext): LockRow[] {
  return listLocks(ctx.dataDir, { commandPrefix: ctx.commandPrefix });
}

/** `locks list`: the lock files (`collectLocks`), rendered by `renderLocks`. */
export async function locksList(ctx: CommandContext): Promise<Rendered> {
  // In path order: a lock file's path is unique.
  return renderLocks(
    ctx,
    pageOf(ctx, collectLocks(ctx), (row) => [row.path], "locks list"),
  );
}

/** The lock files as a table: owner liveness (digest only), the restore or edit holding each, leftovers. */
export function renderLocks(ctx: CommandContext, page: Page<LockRow>): Rendered {
  const rows = page.items;
  const human =
    rows.length === 0
      ? "No lock files.\n"
      : table(
          ["lock", "kind", "pid", "owner", "since", "restore", "leftovers", "kept"],
          rows.map((row) => [
            row.path,
            row.kind,
            row.pid,
            row.problem
              ? `unreadable: ${row.problem}`
              : !row.present
                ? "absent"
                : row.note
                  ? `${row.alive ? "running" : "dead"}: ${row.note}`
                  : row.alive
                    ? "running"
                    : "dead",
            row.createdAt,
            // A workspace edit is no restore: its id is shown as what it is.
            row.purpose === "workspace-edit" ? `(edit) ${row.transactionId}` : row.transactionId,
            row.leftovers,
            row.kept,
          ]),
          ctx.tty,
        ) + nextLine(page);
  return { data: { locks: rows, nextCursor: page.nextCursor }, human };
}

/**
 * Removes election records whose lock moved on and candidates of dead processes (file-lock decides which
 * are garbage), and the workspace locks stopped workspace edits left (restore-saga's `reapDeadEditLocks`:
 * dead `workspace-edit` owners only, each by an exact-owner takeover under the registry lock). No other lock
 * file is ever touched: a restore's dead lock waits for its fenced recovery. Without --yes: what could be
 * removed.
 */
export async function locksGc(ctx: CommandContext): Promise<Rendered> {
  const garbage = lockGarbage(ctx.dataDir, { commandPrefix: ctx.commandPrefix });
  const leftovers = [
    ...garbage.stoppedEdits,
    ...garbage.leftovers.map((file) => relative(ctx.dataDir, file)),
  ];
  if (!ctx.yes) {
    const command = `${ctx.commandPrefix} locks gc --yes`;
    return {
      ...(leftovers.length === 0 ? {} : { confirm: { command } }),
      data: { ok: true, preview: true, changed: false, candidates: leftovers, command },
      human:
        leftovers.length === 0
          ? "Preview: no election records or candidates beside any lock, and no lock of a stopped workspace edit. Nothing was changed.\n"
          : `Preview: ${leftovers.length} leftover file(s) (beside locks, or locks of stopped workspace edits); those that are provably garbage would be removed:\n${leftovers.map((file) => `  ${file}\n`).join("")}Nothing was changed. To apply it, run:\n  ${command}\n`,
    };
  }
  let progress: ReturnType<CommandContext["progress"]> | null = null;
  let removed: string[];
  try {
    const files = await collectGarbage(
      ctx.dataDir,
      garbage.stoppedEdits.length > 0,
      (path, _index, total) => {
        progress ??= ctx.progress("locks gc", total);
        progress.step(relative(ctx.dataDir, path));
      },
    );
    removed = files.map((file) => relative(ctx.dataDir, file));
  } finally {
    (progress as ReturnType<CommandContext["progress"]> | null)?.done();
  }
  return {
    data: { ok: true, removed, kept: leftovers.filter((file) => !removed.includes(file)) },
    human: `Removed ${removed.length} garbage file(s).\n${removed.map((file) => `  ${file}\n`).join("")}`,
  };
}
