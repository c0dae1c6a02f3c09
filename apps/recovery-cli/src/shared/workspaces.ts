import { existsSync } from "node:fs";
import { join } from "node:path";
import { RESTORE_OPERATION_ID } from "@drydock/facts";
import {
  createRestoreRecoveryController,
  listWorkspaces,
  type RestoreRecoveryController,
  sagaStateDir,
} from "@drydock/recovery-controller";
import { openSagaStore, type SagaStore } from "@drydock/restore-saga";
import type { CommandContext } from "../context.js";
import { CliError } from "../errors.js";

export interface Workspace {
  botId: string;
  root: string;
  store: SagaStore;
}

/** `<dataDir>/workspaces/<botId>`: every bot workspace that exists, with its saga store. */
export function workspaces(ctx: CommandContext): Workspace[] {
  return listWorkspaces(ctx.dataDir).map(({ botId, root }) => ({
    botId,
    root,
    store: openSagaStore({ stateDir: sagaStateDir(ctx.dataDir), workspaceRoot: root }),
  }));
}

/** The workspace whose shard holds `operationId`, active or archived. */
export function findSaga(ctx: CommandContext, operationId: string): Workspace {
  if (!RESTORE_OPERATION_ID.test(operationId)) {
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
    `No restore ${operationId} exists under ${ctx.dataDir} (see \`${ctx.commandPrefix} restores list\`).`,
  );
}

/** `readOnly`: for previews, whose store changes no file and refuses every write (see the controller). */
export function controllerFor(
  ctx: CommandContext,
  workspace: Workspace,
  options: { readOnly?: boolean } = {},
): RestoreRecoveryController {
  return createRestoreRecoveryController({
    dataDir: ctx.dataDir,
    workspaceRoot: workspace.root,
    commandPrefix: ctx.commandPrefix,
    ...(options.readOnly ? { readOnly: true } : {}),
  });
}
