import type { Command } from "commander";

/** `creates adopt` for the adopt command, "" for the program itself: how `EXAMPLES` is keyed. */
export function commandPath(command: Command): string {
  const names: string[] = [];
  for (let at: Command | null = command; at?.parent; at = at.parent) names.unshift(at.name());
  return names.join(" ");
}

const HASH = "sha256:3f1c…";

/**
 * One to three real command lines per command, shown at the end of its `--help`. Every command of the
 * table has an entry (a test walks the table): an operator at 3 a.m. copies an example, not a synopsis.
 */
export const EXAMPLES: Readonly<Record<string, readonly string[]>> = {
  "": [
    "The 3 a.m. triage:",
    "  1. drydock --data-dir /srv/drydock status      read the verdict: OK, ATTENTION or INCOMPLETE",
    "  2. paste the command printed under a line      (it previews; the preview prints the command to apply)",
    "  3. drydock --data-dir /srv/drydock status      again, until the verdict is OK",
    "Monitoring (cron, Nagios): drydock status --fail-on-attention   exit 0 OK, 7 needs a person, 6 incomplete",
  ],
  status: [
    "drydock status",
    "drydock --data-dir /srv/drydock status --json",
    "drydock status --fail-on-attention            # exit 7 when a person is needed",
  ],
  creates: ["drydock creates list"],
  "creates list": ["drydock creates list", "drydock creates list --json"],
  "creates adopt": [
    "drydock creates adopt bot-1 sbx_123             # preview: prints the fenced command",
    `drydock creates adopt bot-1 sbx_123 --expected-state ${HASH} --yes`,
  ],
  "creates retire": [
    "drydock creates retire bot-1                    # preview",
    `drydock creates retire bot-1 --expected-state ${HASH} --yes`,
  ],
  deletions: ["drydock deletions list"],
  "deletions list": ["drydock deletions list", "drydock deletions list --json"],
  "deletions reconcile": [
    "drydock deletions reconcile sbx_123             # preview",
    `drydock deletions reconcile sbx_123 --expected-state ${HASH} --yes`,
  ],
  "deletions retry": [
    "drydock deletions retry sbx_123                 # preview",
    `drydock deletions retry sbx_123 --expected-state ${HASH} --yes`,
  ],
  restores: ["drydock restores list", "drydock restores show op-1"],
  "restores list": ["drydock restores list", "drydock restores list --json"],
  "restores show": [
    "drydock restores show op-1    # prints the fence and the command of each eligible action",
  ],
  "restores abort": [
    "drydock restores abort op-1                     # preview",
    `drydock restores abort op-1 --expected-seq 4 --expected-hash ${HASH} --expected-owner-digest none --reason "stuck" --yes`,
  ],
  "restores release": [
    "drydock restores release op-1                   # preview",
    `drydock restores release op-1 --expected-seq 9 --expected-hash ${HASH} --expected-owner-digest ${HASH} --yes`,
  ],
  "restores complete": [
    "drydock restores complete op-1                  # preview",
    `drydock restores complete op-1 --expected-seq 7 --expected-hash ${HASH} --expected-owner-digest none --yes`,
  ],
  "restores rollback": [
    "drydock restores rollback op-1                  # preview",
    `drydock restores rollback op-1 --expected-seq 7 --expected-hash ${HASH} --expected-owner-digest none --yes`,
  ],
  "restores purge": [
    "drydock restores purge --older-than-days 90     # preview: the list and its digest",
    `drydock restores purge --older-than-days 90 --expected-state ${HASH} --yes`,
  ],
  reconcile: ["drydock reconcile", "drydock reconcile --json"],
  locks: ["drydock locks list"],
  "locks list": ["drydock locks list"],
  "locks gc": ["drydock locks gc                  # preview", "drydock locks gc --yes"],
  storage: ["drydock storage migrate --to sqlite"],
  "storage migrate": [
    "drydock storage migrate --to sqlite             # preview: counts and the fenced command (servers stopped)",
    `drydock storage migrate --to sqlite --yes --expected-state ${HASH}`,
    "drydock storage migrate --to postgres           # URL from DRYDOCK_STORAGE_FILE; workspaces move too",
  ],
  instances: ["drydock instances list"],
  "instances list": ["drydock instances list", "drydock instances list --json"],
  "instances declare-dead": [
    "drydock instances declare-dead 3f1c…   # preview: the instance and its fence",
    "drydock instances declare-dead 3f1c… --expected-state 9a0b1c2d3e4f5a6b --yes",
  ],
  completion: [
    "drydock completion bash > /etc/bash_completion.d/drydock",
    "echo 'eval \"$(drydock completion zsh)\"' >> ~/.zshrc",
    "drydock completion fish > ~/.config/fish/completions/drydock.fish",
  ],
};

/**
 * Appends each command's examples to its `--help` (the program's: the triage flow). On a terminal, a
 * preview without --yes also asks `apply? [y/N]` (see the README); the examples show the pasted form.
 */
export function addExamples(program: Command): void {
  const visit = (command: Command): void => {
    const path = commandPath(command);
    const examples = EXAMPLES[path];
    if (examples !== undefined) {
      const lines = path === "" ? examples : examples.map((line) => `  $ ${line}`);
      command.addHelpText("after", `\n${path === "" ? "" : "Examples:\n"}${lines.join("\n")}\n`);
    }
    for (const sub of command.commands) visit(sub);
  };
  visit(program);
}
