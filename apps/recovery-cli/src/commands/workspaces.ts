import { existsSync, readdirSync, statSync } from "node:fs";
import { join } from "node:path";
import {
  createRestoreRecoveryController,
  type RestoreRecoveryController,
  sagaStateDir,
} from "@drydock/recovery-controller";
import { openSagaStore, type PendingList, type SagaStore } from "@drydock/restore-saga";
import type { CommandContext } from "../context.js";
import { CliError } from "../errors.js";

export interface Workspace {
  botId: string;
  root: string;
  store: SagaStore;
}

/** `<dataDir>/workspaces/<botId>`: every bot workspace that exists, with its saga store. */
export function workspaces(ctx: CommandContext): Workspace[] {
  const dir = join(ctx.dataDir, "workspaces");
  let names: string[];
  try {
    names = readdirSync(dir).sort();
  } catch {
    return [];
  }
  const out: Workspace[] = [];
  for (const botId of names) {
    const root = join(dir, botId);
    try {
      if (!statSync(root).isDirectory()) continue;
    } catch {
      continue;
    }
    out.push({
      botId,
      root,
      store: openSagaStore({ stateDir: sagaStateDir(ctx.dataDir), workspaceRoot: root }),
    });
  }
  return out;
}

/** The workspace whose shard holds `operationId`, active or archived. */
export function findSaga(ctx: CommandContext, operationId: string): Workspace {
  if (!/^[a-zA-Z0-9][a-zA-Z0-9_-]{0,127}$/.test(operationId)) {
    throw new CliError(
      "USAGE",
      "An operation id is 1-128 letters, digits, '_' or '-', starting with a letter or digit.",
    );
  }
  for (const workspace of workspaces(ctx)) {
    const shard = workspace.store.shardDir;
    if (existsSync(join(shard, operationId)) || existsSync(join(shard, ".archive", operationId)))
      return workspace;
  }
  throw new CliError(
    "NOT_FOUND",
    `No restore ${operationId} exists under ${ctx.dataDir} (see \`drydock restores list\`).`,
  );
}

export function controllerFor(ctx: CommandContext, workspace: Workspace): RestoreRecoveryController {
  return createRestoreRecoveryController({ dataDir: ctx.dataDir, workspaceRoot: workspace.root });
}

/** Every pending saga of one workspace, page by page (bounded: 64 pages of 64). */
export async function allPending(store: SagaStore): Promise<PendingList> {
  const merged: PendingList = { items: [], diagnostics: [], nextCursor: null, truncated: false };
  let after: string | undefined;
  for (let page = 0; page < 64; page += 1) {
    const list = await store.listPending({ ...(after === undefined ? {} : { after }), limit: 64 });
    merged.items.push(...list.items);
    merged.diagnostics.push(...list.diagnostics);
    if (list.nextCursor === null) return merged;
    after = list.nextCursor;
  }
  merged.truncated = true;
  return merged;
}
