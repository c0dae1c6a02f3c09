import { createHash } from "node:crypto";
import {
  restoreCommand as commandFor,
  type RestoreActionName,
  type RestorePreview,
  type RestoreReportItem,
  reportRestores,
} from "@drydock/recovery-controller";
import type { CommandContext } from "../context.js";
import { CliError } from "../errors.js";
import { type Rendered, table } from "../render.js";
import { nextLine, type Page, pageOf } from "../shared/pages.js";
import { controllerFor, findSaga, type Workspace, workspaces } from "../shared/workspaces.js";

const ACTIONS: readonly RestoreActionName[] = ["abort", "release", "complete", "rollback"];

/** The exact command that applies `action` against the previewed fence, for this data directory. */
export function restoreCommand(
  ctx: CommandContext,
  action: RestoreActionName,
  preview: RestorePreview,
): string {
  return commandFor(ctx.commandPrefix, action, preview);
}

/** One restore `restores list` and `status` show (the recovery controller's report item). */
export type RestoreListItem = RestoreReportItem;

/**
 * A workspace whose restores the report could not list in full: its sagas could not be listed at all
 * (the message names the bot and the failure), or the listing was cut short (more pending restores than
 * one report lists). Every other workspace is still reported; the gap itself needs a person.
 */
export interface RestoreListGap {
  botId: string;
  message: string;
}

/**
 * Every restore that may need a person, as the bot server's GET /v1/recovery reports it too (one
 * function in the recovery controller), and the gaps: a workspace that cannot be listed, or whose listing
 * was cut short, is one attention line naming its bot, never a failure that hides the others.
 */
export async function collectRestores(
  ctx: CommandContext,
): Promise<{ restores: RestoreListItem[]; gaps: RestoreListGap[] }> {
  // Read-only: a listing changes no file (a dead process's lock files and unpublished directories stay).
  const { restores, gaps } = await reportRestores({
    dataDir: ctx.dataDir,
    commandPrefix: ctx.commandPrefix,
    readOnly: true,
  });
  // The failure itself (`error`) stays here: its message is already in `message`, with the bot's name.
  return { restores, gaps: gaps.map(({ botId, message }) => ({ botId, message })) };
}

/** `restores list`: every restore that may need a person (`collectRestores`), rendered by `renderRestoresList`. */
export async function restoresList(ctx: CommandContext): Promise<Rendered> {
  // One report over every workspace shard (the recovery controller's): the line says how many it reads.
  const progress = ctx.progress("restores list");
  progress.phase(`reading the restore sagas of ${workspaces(ctx).length} workspace(s)`);
  try {
    const { restores, gaps } = await collectRestores(ctx);
    // In bot order, then operation: an operation id is unique. The gaps are few and always shown whole.
    const page = pageOf(ctx, restores, (item) => [item.botId, item.operationId], "restores list");
    return renderRestoresList(ctx, { restores: page.items, gaps }, page);
  } finally {
    progress.done();
  }
}

/** The restores as a table (the next step of each), the command of each, and the gaps. */
export function renderRestoresList(
  ctx: CommandContext,
  { restores: items, gaps }: { restores: RestoreListItem[]; gaps: RestoreListGap[] },
  page: Page<unknown>,
): Rendered {
  const { c } = ctx;
  const gapLines = gaps
    .map((gap) => `${c.yellow("!")} bot ${gap.botId}: ${gap.message}; the list above is incomplete there\n`)
    .join("");
  const human =
    (items.length === 0
      ? gaps.length === 0
        ? "No active restore sagas.\n"
        : "No active restore sagas among those that could be listed.\n"
      : table(
          ["bot", "operation", "phase", "base", "seq", "owner", "next"],
          items.map((item) => [
            item.botId,
            item.operationId,
            item.phase,
            item.basePhase,
            item.seq,
            item.ownerAlive === null ? "none" : item.ownerAlive ? "running" : "dead",
            item.problem
              ? item.inProgress
                ? `wait: ${item.problem}`
                : `inspect: ${item.problem}`
              : item.retainedByLiveOwner
                ? `stop process ${item.retainedByLiveOwner.pid} first`
                : item.stalledForMs
                  ? `no progress for ${Math.round(item.stalledForMs / 60_000)} min: check its process`
                  : (item.next ?? (item.ownerAlive ? "wait" : "-")),
          ]),
          ctx.tty,
        ) +
        items
          .filter((item) => item.command)
          .map((item) => `→ ${item.command}\n`)
          .join("")) +
    gapLines +
    nextLine(page);
  return { data: { restores: items, gaps, nextCursor: page.nextCursor }, human };
}

/** What `restores show` shows: the saga's preview, its workspace, and the command of each eligible action. */
export interface RestoreShown {
  operationId: string;
  workspace: Workspace;
  preview: RestorePreview;
  /** The exact command of each action, null when it is not eligible. */
  commands: Record<RestoreActionName, string | null>;
}

/** `restores show`: one restore's preview (`showRestore`), rendered by `renderRestoreShow`. */
export async function restoresShow(ctx: CommandContext, operationId: string): Promise<Rendered> {
  return renderRestoreShow(ctx, await showRestore(ctx, operationId));
}

/** The restore recovery controller's preview of one restore, with the command of each eligible action. */
export async function showRestore(ctx: CommandContext, operationId: string): Promise<RestoreShown> {
  const workspace = findSaga(ctx, operationId);
  const preview = await controllerFor(ctx, workspace, { readOnly: true }).preview(operationId);
  const commands = Object.fromEntries(
    ACTIONS.map((action) => [
      action,
      preview.actions[action].eligible ? restoreCommand(ctx, action, preview) : null,
    ]),
  ) as Record<RestoreActionName, string | null>;
  return { operationId, workspace, preview, commands };
}

/** The saga, its events, the live owner, the fence to echo, each action's verdict and command. */
export function renderRestoreShow(
  ctx: CommandContext,
  { operationId, workspace, preview, commands }: RestoreShown,
): Rendered {
  const { c } = ctx;
  const lines = [
    `${c.bold(`Restore ${operationId}`)} (bot ${workspace.botId}, ${workspace.root})`,
    `phase ${preview.saga.phase} (base ${preview.saga.basePhase ?? "-"}), seq ${preview.saga.seq}${preview.saga.archived ? ", archived" : ""}${preview.saga.terminal ? ", finished" : ""}`,
    `chain: verified (${preview.saga.events.length} events, head ${preview.saga.headHash})`,
    preview.tornLock
      ? `workspace lock: unreadable, torn by a power loss (${preview.tornLock.size} bytes, last changed ${preview.tornLock.changedAt}, before this machine booted): an action takes over this very file, only while every process the restore recorded is dead; ${preview.tornLock.digest}`
      : preview.owner === null
        ? preview.saga.terminal || preview.saga.phase === "created"
          ? "workspace lock: none"
          : "workspace lock: none (a stopped restore keeps its lock, so someone removed it; an action takes a fresh one, only if no lock covers this workspace and every process the restore recorded is dead)"
        : `workspace lock: pid ${preview.owner.pid} ${preview.owner.alive ? c.yellow("running") : c.red("dead")}, owner ${preview.owner.digest}`,
    "",
    table(
      ["seq", "phase", "at"],
      preview.saga.events.map((event) => [event.seq, event.phase, event.timestamp ?? null]),
      ctx.tty,
    ).trimEnd(),
    "",
    `fence: --expected-seq ${preview.fence.expectedSeq} --expected-hash ${preview.fence.expectedHash} --expected-owner-digest ${preview.fence.expectedOwnerDigest ?? "none"}`,
    "",
    ...ACTIONS.map((action) =>
      preview.actions[action].eligible
        ? `${c.green(action)}: eligible${preview.recommended === action ? " (recommended)" : ""}\n  → ${commands[action]}`
        : `${action}: not eligible (${preview.actions[action].blockers.join("; ")})`,
    ),
    ...(preview.actions.complete.eligible && preview.actions.rollback.eligible
      ? [
          "",
          "The restore applied every change before it stopped: complete keeps the restored files (what was asked for); rollback puts back the workspace as it was before the restore.",
        ]
      : []),
  ];
  return {
    data: {
      restore: { ...preview, botId: workspace.botId, workspaceRoot: workspace.root, chain: "verified" },
      commands,
    },
    human: `${lines.join("\n")}\n`,
  };
}

function parseFence(
  ctx: CommandContext,
  operationId: string,
): {
  expectedSeq: number;
  expectedHash: string;
  expectedOwnerDigest: string | null;
} {
  const { expectedSeq, expectedHash, expectedOwnerDigest } = ctx.options;
  if (expectedSeq === undefined || expectedHash === undefined || expectedOwnerDigest === undefined) {
    throw new CliError(
      "USAGE",
      `Applying a restore action needs the fence printed by \`${ctx.commandPrefix} restores show ${operationId}\`: --expected-seq, --expected-hash and --expected-owner-digest (sha256:…, torn:sha256:… or none).`,
    );
  }
  const seq = Number(expectedSeq);
  if (!/^[1-9][0-9]{0,15}$/.test(expectedSeq) || !Number.isSafeInteger(seq)) {
    throw new CliError("USAGE", "--expected-seq must be a positive integer.");
  }
  if (!/^sha256:[0-9a-f]{64}$/.test(expectedHash)) {
    throw new CliError("USAGE", "--expected-hash must be sha256: followed by 64 hex digits.");
  }
  // torn:sha256:… names a workspace lock file torn by a power loss (no owner to digest): that very file.
  if (expectedOwnerDigest !== "none" && !/^(torn:)?sha256:[0-9a-f]{64}$/.test(expectedOwnerDigest)) {
    throw new CliError("USAGE", "--expected-owner-digest must be sha256:…, torn:sha256:… or none.");
  }
  return {
    expectedSeq: seq,
    expectedHash,
    expectedOwnerDigest: expectedOwnerDigest === "none" ? null : expectedOwnerDigest,
  };
}

/**
 * abort | release | complete | rollback. Without --yes: the preview and the exact command, nothing changed. With it:
 * the fence flags (usage error if missing) → a fresh preview → the flags must equal the fresh fence
 * (FENCE_MISMATCH, exit 4) → the action must be eligible (exit 5) → the controller, which re-checks
 * everything under the lock.
 */
export async function restoresAction(
  ctx: CommandContext,
  action: RestoreActionName,
  operationId: string,
): Promise<Rendered> {
  const fence = ctx.yes ? parseFence(ctx, operationId) : null;
  const workspace = findSaga(ctx, operationId);
  // The preview and the fence check read through a read-only store: a preview, a stale fence or an action
  // that is not eligible changes no file. Only the apply below opens the store that writes.
  const preview = await controllerFor(ctx, workspace, { readOnly: true }).preview(operationId);
  const verdict = preview.actions[action];

  if (fence === null) {
    const command = verdict.eligible ? restoreCommand(ctx, action, preview) : null;
    const human = verdict.eligible
      ? `Preview: ${action} restore ${operationId} (phase ${preview.saga.phase}, seq ${preview.saga.seq}). Nothing was changed.\nTo apply it, run:\n  ${command}\n`
      : `Preview: ${action} is not possible for restore ${operationId} now: ${verdict.blockers.join("; ")}. Nothing was changed.\n`;
    return {
      data: {
        ok: true,
        preview: true,
        changed: false,
        action,
        operationId,
        eligible: verdict.eligible,
        blockers: verdict.blockers,
        fence: preview.fence,
        command,
      },
      human,
      ...(command === null ? {} : { confirm: { command } }),
    };
  }

  const fresh = preview.fence;
  if (
    fresh.expectedSeq !== fence.expectedSeq ||
    fresh.expectedHash !== fence.expectedHash ||
    fresh.expectedOwnerDigest !== fence.expectedOwnerDigest
  ) {
    // Say which part of the fence differs: "now seq 6" for a seq that is 6 would send a person looking
    // in the wrong place.
    const differs = [
      fresh.expectedSeq !== fence.expectedSeq
        ? `its seq is ${fresh.expectedSeq}, not ${fence.expectedSeq}`
        : null,
      fresh.expectedHash !== fence.expectedHash ? "its head hash differs" : null,
      fresh.expectedOwnerDigest !== fence.expectedOwnerDigest
        ? `its workspace lock owner is ${fresh.expectedOwnerDigest === null ? "none" : fresh.expectedOwnerDigest}, not ${fence.expectedOwnerDigest ?? "none"}`
        : null,
    ].filter((part) => part !== null);
    throw new CliError(
      "FENCE_MISMATCH",
      `Restore ${operationId} is no longer in the state you previewed (${differs.join("; ")}); nothing was changed. Run \`${ctx.commandPrefix} restores show ${operationId}\` again.`,
    );
  }
  if (!verdict.eligible) {
    throw new CliError(
      "ACTION_NOT_ELIGIBLE",
      `${action} is not possible for restore ${operationId}: ${verdict.blockers.join("; ")}. Nothing was changed.`,
    );
  }
  const controller = controllerFor(ctx, workspace);
  const result =
    action === "abort"
      ? await controller.abort(operationId, {
          ...fence,
          ...(ctx.options.reason ? { reason: ctx.options.reason } : {}),
        })
      : action === "release"
        ? await controller.release(operationId, fence)
        : action === "complete"
          ? await controller.complete(operationId, fence)
          : await controller.rollback(operationId, fence);
  const warning = result.warning
    ? `\nwarning: the saga is settled but not archived yet (${result.warning.code}); \`${ctx.commandPrefix} restores release ${operationId}\` files it later.`
    : "";
  return {
    data: result,
    human: `${action}: restore ${operationId} is ${result.phase} (seq ${result.seq})${result.archived ? ", archived" : ""}.${warning}\n`,
  };
}

const DAY_MS = 24 * 60 * 60 * 1000;

/** An archive a purge keeps (its chain does not verify, or it cannot be read), and why. */
interface PurgeKept {
  botId: string;
  operationId: string;
  problem: string;
}

export interface PurgeCandidate {
  botId: string;
  operationId: string;
  phase: string;
  seq: number;
  headHash: string;
  finishedAt: string;
}

/**
 * The fence of a purge: a digest of exactly which archives the preview listed, each at its final seq and
 * head hash. A purge applies only when the list it finds again is the same, so an archive that crossed the
 * age cutoff (or appeared, or was purged by someone else) after the preview is never purged unseen.
 */
function purgeDigest(candidates: readonly PurgeCandidate[]): string {
  const facts = candidates
    .map((c) => [c.botId, c.operationId, c.seq, c.headHash] as const)
    .sort((a, b) => (a[0] === b[0] ? a[1].localeCompare(b[1]) : a[0].localeCompare(b[0])));
  const hash = createHash("sha256").update("drydock-restores-purge-v1\0").update(JSON.stringify(facts));
  return `sha256:${hash.digest("hex")}`;
}

/**
 * Every archived saga finished at or before `cutoff`, with the store that holds it; an archive whose chain
 * does not verify (or cannot be read) is `kept`, with why: it is evidence, never purged.
 */
async function findPurgeCandidates(
  ctx: CommandContext,
  cutoff: number,
): Promise<{ candidates: (PurgeCandidate & { store: Workspace["store"] })[]; kept: PurgeKept[] }> {
  const candidates: (PurgeCandidate & { store: Workspace["store"] })[] = [];
  const kept: PurgeKept[] = [];
  const all = workspaces(ctx);
  const reading = ctx.progress("restores purge: reading archives", all.length);
  try {
    for (const workspace of all) {
      reading.step(`bot ${workspace.botId}`);
      for (const operationId of await workspace.store.listArchived()) {
        try {
          const saga = await workspace.store.loadArchived(operationId);
          const finishedAt = saga.events.at(-1)?.timestamp ?? "";
          if (Date.parse(finishedAt) > cutoff) continue;
          candidates.push({
            botId: workspace.botId,
            operationId,
            phase: saga.phase,
            seq: saga.seq,
            headHash: saga.headHash,
            finishedAt,
            store: workspace.store,
          });
        } catch (error) {
          kept.push({ botId: workspace.botId, operationId, problem: (error as Error).message });
        }
      }
    }
  } finally {
    reading.done();
  }
  return { candidates, kept };
}

/**
 * Archived restore sagas finished at least `--older-than-days` days ago (default 30). Without --yes: the
 * list and its digest, nothing changed. With --yes and that digest (`--expected-state`): each is purged
 * with the fence just read (its events deleted, a receipt with its final phase, seq and head hash kept, the
 * id never reused), but only if the list is still exactly the one previewed (else exit 4, nothing purged).
 * An archive whose chain does not verify is reported and kept: it is evidence.
 */
export async function restoresPurge(ctx: CommandContext): Promise<Rendered> {
  const text = ctx.options.olderThanDays ?? "30";
  // Digits only: Number("") and Number(" ") are 0, which would list every archive as old enough.
  const days = /^[0-9]{1,6}$/.test(text) ? Number(text) : Number.NaN;
  if (!Number.isSafeInteger(days) || days < 0) {
    throw new CliError("USAGE", "--older-than-days takes a whole number of days (0 or more).");
  }
  const { candidates, kept } = await findPurgeCandidates(ctx, ctx.now() - days * DAY_MS);
  const listed = candidates.map(({ store: _store, ...rest }) => rest);
  const stateDigest = purgeDigest(listed);
  const keptText = kept.map((k) => `kept ${k.botId}/${k.operationId}: ${k.problem}\n`).join("");
  if (!ctx.yes) {
    const command = `${ctx.commandPrefix} restores purge --older-than-days ${days} --expected-state ${stateDigest} --yes`;
    const human =
      listed.length === 0
        ? `Preview: no archived restore finished ${days} or more days ago. Nothing was changed.\n${keptText}`
        : `${table(
            ["bot", "operation", "phase", "seq", "finished"],
            listed.map((c) => [c.botId, c.operationId, c.phase, c.seq, c.finishedAt]),
            ctx.tty,
          )}Preview: ${listed.length} archived restore(s) would be purged (events deleted, a receipt kept). Nothing was changed.\n${keptText}To apply it, run:\n  ${command}\n`;
    return {
      data: { ok: true, preview: true, changed: false, candidates: listed, kept, stateDigest, command },
      human,
      ...(listed.length === 0 ? {} : { confirm: { command } }),
    };
  }
  if (ctx.options.expectedState === undefined) {
    throw new CliError(
      "USAGE",
      `Purging needs --expected-state sha256:… from its preview: run \`${ctx.commandPrefix} restores purge --older-than-days ${days}\` (without --yes) and paste the command it prints. Nothing was changed.`,
    );
  }
  if (ctx.options.expectedState !== stateDigest) {
    throw new CliError(
      "FENCE_MISMATCH",
      `The archived restores to purge are not the ones previewed (now ${listed.length}); nothing was purged. Run \`${ctx.commandPrefix} restores purge --older-than-days ${days}\` again and check the list.`,
    );
  }
  const purged: PurgeCandidate[] = [];
  const purging = ctx.progress("restores purge", candidates.length);
  try {
    for (const { store, ...candidate } of candidates) {
      purging.step(`${candidate.botId}/${candidate.operationId}`);
      await store.purgeArchived(candidate.operationId, {
        expectedSeq: candidate.seq,
        expectedHash: candidate.headHash,
      });
      purged.push(candidate);
    }
  } finally {
    purging.done();
  }
  return {
    data: { ok: true, purged, kept },
    human: `Purged ${purged.length} archived restore(s).\n${purged.map((c) => `  ${c.botId}/${c.operationId} (${c.phase}, seq ${c.seq})\n`).join("")}${keptText}`,
  };
}
