import { type RestoreReportItem, reportRestores } from "@drydock/recovery-controller";

export { drydockCommandPrefix } from "@drydock/recovery-controller";

/** One restore `drydock status` reports: the recovery controller's report item (redacted by construction). */
export type RestoreRecoveryItem = RestoreReportItem;

/** Something that could not be read: the answer is incomplete there, and says so. */
export interface Unreadable {
  area: "restores" | "boats" | "bots";
  subject: string;
  message: string;
}

/**
 * Every restore `drydock status` reports (the recovery controller's `reportRestores`: every page of every
 * workspace's pending listing and its diagnostics, each previewed with its fenced command). A workspace
 * whose sagas cannot be listed is reported in `unreadable` instead of failing the whole answer; the
 * failure itself stays in the server (only its message is sent).
 */
export async function collectRestoreRecovery(
  dataDir: string,
  commandPrefix: string,
): Promise<{ restores: RestoreRecoveryItem[]; unreadable: Unreadable[] }> {
  const { restores, gaps } = await reportRestores({ dataDir, commandPrefix });
  return {
    restores,
    unreadable: gaps.map((gap) => ({
      area: "restores",
      subject: gap.botId,
      message: `${gap.message}; run \`${commandPrefix} restores list\` to inspect them.`,
    })),
  };
}
