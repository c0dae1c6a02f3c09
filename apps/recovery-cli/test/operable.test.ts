/**
 * The CLI as an operator installs and uses it (issue 25): help that ends with examples, shell completion
 * generated from the command table, progress on stderr only on a terminal, the `apply? [y/N]` after a
 * preview (with the very fences of the printed command), `status --fail-on-attention` for monitoring, and
 * a versioned `--json` shape checked against the exported schemas. In-process `main` with buffer streams.
 */
import { spawnSync } from "node:child_process";
import { randomUUID } from "node:crypto";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { openBoatCreateJournal } from "@drydock/boat-create-journal";
import { openBoatDeleteJournal } from "@drydock/boat-delete-journal";
import { createBoatLifecycle } from "@drydock/boat-lifecycle";
import { createBoatClient } from "@drydock/boat-provider";
import { type BoatSimulator, startBoatSimulator } from "@drydock/boat-provider/simulator";
import { openSagaStore } from "@drydock/restore-saga";
import type { Command } from "commander";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import {
  type BufferIo,
  bufferIo,
  commandTree,
  ErrorDocumentSchema,
  EXIT_CODES,
  JSON_SCHEMAS,
  type JsonCommand,
  main,
} from "../src/index.js";
import { snapshotTree } from "./harness.js";

let sim: BoatSimulator;
const roots: string[] = [];
beforeAll(async () => {
  sim = await startBoatSimulator({ provisionMs: 0 });
});
afterAll(async () => {
  await sim?.close();
});
afterEach(() => {
  for (const root of roots.splice(0)) rmSync(root, { recursive: true, force: true });
});

const provider = () => ({ BOAT_API_URL: sim.apiUrl, BOAT_API_TOKEN: sim.token });

/** Every command of the table as its words (`["creates", "adopt"]`), groups included. */
function commandPaths(): string[][] {
  const out: string[][] = [];
  const visit = (command: Command, path: string[]): void => {
    for (const sub of command.commands) {
      out.push([...path, sub.name()]);
      visit(sub, [...path, sub.name()]);
    }
  };
  visit(commandTree(), []);
  return out;
}

/** A data directory with an environment id and one bot workspace; `restore` adds a restore killed after `created`. */
async function installation(options: { restore?: boolean } = {}): Promise<string> {
  const root = mkdtempSync(join(tmpdir(), "drydock-operable-"));
  roots.push(root);
  writeFileSync(join(root, "environment-id"), `${randomUUID()}\n`);
  const workspace = join(root, "workspaces", "bot1");
  mkdirSync(workspace, { recursive: true });
  if (options.restore) {
    const deadPid = spawnSync(process.execPath, ["-e", ""]).pid!;
    await openSagaStore({ stateDir: join(root, "restore-sagas"), workspaceRoot: workspace }).create("op-1", {
      kind: "checkpoint-restore",
      checkpointId: "cp-1",
      checkpointManifestDigest: `sha256:${"a".repeat(64)}`,
      actorPid: deadPid,
    });
  }
  return root;
}

async function run(
  args: readonly string[],
  env: Record<string, string> = {},
  io: BufferIo = bufferIo(),
): Promise<{ code: number; out: string; err: string; io: BufferIo }> {
  const code = await main(args, { io, env });
  return { code, out: io.out(), err: io.err(), io };
}

describe("help ends with examples", () => {
  it("every command's --help ends with 1-3 real `drydock …` examples", async () => {
    const paths = commandPaths();
    expect(paths.length).toBeGreaterThan(15);
    for (const path of paths) {
      const { code, out } = await run([...path, "--help"]);
      expect(code, path.join(" ")).toBe(0);
      const examples = out.split("\nExamples:\n")[1];
      expect(examples, `${path.join(" ")} has no Examples section`).toBeDefined();
      const lines = examples!.trimEnd().split("\n");
      expect(lines.length, path.join(" ")).toBeGreaterThanOrEqual(1);
      expect(lines.length, path.join(" ")).toBeLessThanOrEqual(3);
      for (const line of lines) expect(line).toMatch(/^ {2}\$ (drydock |echo .*drydock completion)/);
      // A leaf's examples run the command they document.
      if (path.length === 2 || !["creates", "deletions", "restores", "locks"].includes(path[0]!)) {
        expect(
          lines.some((line) => line.includes(`drydock ${path.join(" ")}`) || line.includes("completion")),
        ).toBe(true);
      }
    }
  });

  it("the top-level help ends with the 3 a.m. triage: status, paste the printed command, status again", async () => {
    const { code, out } = await run(["--help"]);
    expect(code).toBe(0);
    const triage = out.split("The 3 a.m. triage:\n")[1]!;
    expect(triage).toMatch(/1\. drydock .*status/);
    expect(triage).toMatch(/2\. paste the command printed/);
    expect(triage).toMatch(/3\. drydock .*status/);
    expect(triage).toContain("--fail-on-attention");
  });
});

describe("shell completion", () => {
  /** Runs the bash script in a real bash: each case sets COMP_WORDS/COMP_CWORD and calls _drydock. */
  function complete(script: string, cases: readonly string[][]): string[] {
    const dir = mkdtempSync(join(tmpdir(), "drydock-completion-"));
    roots.push(dir);
    writeFileSync(join(dir, "drydock.bash"), script);
    const calls = cases
      .map((words) => {
        const quoted = words.map((word) => `'${word}'`).join(" ");
        return `COMP_WORDS=(${quoted}); COMP_CWORD=${words.length - 1}; COMPREPLY=(); _drydock; echo "\${COMPREPLY[*]}"`;
      })
      .join("\n");
    const result = spawnSync(
      "bash",
      ["--norc", "--noprofile", "-c", `source ${dir}/drydock.bash\n${calls}`],
      {
        encoding: "utf8",
      },
    );
    expect(result.status, result.stderr).toBe(0);
    expect(result.stderr).toBe("");
    return result.stdout.split("\n").slice(0, cases.length);
  }

  it("bash: `drydock cr<TAB>` completes to `creates`, and every registered command completes", async () => {
    const { code, out } = await run(["completion", "bash"]);
    expect(code).toBe(0);
    const paths = commandPaths();
    const cases = [
      ["drydock", "cr"],
      // Global options with values before the command are skipped, as the shell sees them.
      ["drydock", "--data-dir", "/srv/drydock", "restores", "ab"],
      ["drydock", "creates", "adopt", "--exp"],
      ["drydock", "completion", "z"],
      // Each command, by the first two letters of its name, after its parent's words.
      ...paths.map((path) => ["drydock", ...path.slice(0, -1), path.at(-1)!.slice(0, 2)]),
    ];
    const answers = complete(out, cases);
    expect(answers[0]).toBe("creates");
    expect(answers[1]).toBe("abort");
    expect(answers[2]).toBe("--expected-state");
    expect(answers[3]).toBe("zsh");
    paths.forEach((path, index) => {
      expect(answers[index + 4]!.split(" "), path.join(" ")).toContain(path.at(-1));
    });
  });

  it("zsh and fish scripts name every registered command (generated from the same table)", async () => {
    const zsh = (await run(["completion", "zsh"])).out;
    const fish = (await run(["completion", "fish"])).out;
    expect(zsh).toContain("compdef _drydock drydock");
    for (const path of commandPaths()) {
      expect(zsh).toContain(`"${path.join(" ")}")`);
      expect(fish).toMatch(new RegExp(`-a ${path.at(-1)} -d `));
    }
    expect((await run(["completion", "tcsh"])).code).toBe(EXIT_CODES.USAGE);
  });
});

describe("progress on stderr", () => {
  /** Lock files with leftovers beside them, under several workspaces' saga shards. */
  async function withLocks(): Promise<string> {
    const root = await installation({ restore: true });
    mkdirSync(join(root, "locks"), { recursive: true });
    // Election records of locks that are gone: garbage `locks gc` removes.
    for (const name of ["a", "b", "c"])
      writeFileSync(join(root, "locks", `${name}.lock.reap-${randomUUID()}`), "");
    return root;
  }

  it("draws on a TTY stderr for locks gc, restores list, reconcile and purge; nothing reaches stdout", async () => {
    const root = await withLocks();
    const cases: [string[], RegExp][] = [
      [["locks", "gc", "--yes"], /locks gc: 1\/\d+/],
      [["restores", "list"], /restores list: reading the restore sagas of 1 workspace/],
      [["reconcile"], /reconcile: reading the Boat journals/],
      [["restores", "purge"], /restores purge: reading archives: 1\/1 bot bot1/],
    ];
    for (const [args, expected] of cases) {
      const tty = await run(["--data-dir", root, ...args], provider(), bufferIo({ stderrTty: true }));
      expect(tty.code, tty.err).toBe(0);
      expect(tty.err).toMatch(expected);
      // Redrawn in place and cleared at the end: the last thing on stderr is the clearing sequence.
      expect(tty.err.endsWith("\r\u001b[2K")).toBe(true);
      expect(tty.out).not.toContain("\r");
      expect(tty.out).not.toMatch(expected);
    }
  });

  it("is silent when stderr is not a TTY, and under --json even on a TTY", async () => {
    const root = await withLocks();
    const pipe = await run(["--data-dir", root, "restores", "list"], {}, bufferIo({ stderrTty: false }));
    expect(pipe.code).toBe(0);
    expect(pipe.err).toBe("");
    // The same runs that draw progress on a TTY stderr (see above), with --json: not a byte on stderr.
    for (const args of [
      ["locks", "gc", "--yes"],
      ["restores", "list"],
    ]) {
      const json = await run(["--data-dir", root, ...args, "--json"], {}, bufferIo({ stderrTty: true }));
      expect(json.code, args.join(" ")).toBe(0);
      expect(json.err, args.join(" ")).toBe("");
      expect(JSON.parse(json.out).schemaVersion).toBe(1);
    }
  });
});

describe("apply? [y/N] after a preview on a terminal", () => {
  const person = (answers: (string | (() => Promise<string>))[]) =>
    bufferIo({ tty: true, stdinTty: true, answers });

  /** The paste-back command a preview printed (its last `drydock …` line). */
  function printed(out: string): string[] {
    const line = out
      .split("\n")
      .map((text) => text.trim())
      .filter((text) => text.startsWith("drydock "))
      .at(-1)!;
    return line.split(" ").slice(1);
  }

  async function phaseOf(root: string): Promise<string> {
    const shown = await run(["--data-dir", root, "restores", "show", "op-1", "--json"]);
    return JSON.parse(shown.out).restore.saga.phase as string;
  }

  it("on `y` applies with the preview's fences; the preview and its paste-back command are shown first", async () => {
    const root = await installation({ restore: true });
    const yes = await run(["--data-dir", root, "--no-color", "restores", "abort", "op-1"], {}, person(["y"]));
    expect(yes.code, yes.err).toBe(0);
    const [preview, after] = yes.out.split("apply? [y/N] ");
    expect(preview).toContain("Preview: abort restore op-1");
    expect(preview).toMatch(
      /--expected-seq \d+ --expected-hash sha256:[0-9a-f]{64} --expected-owner-digest none/,
    );
    expect(after).toMatch(/^y\nabort: restore op-1 is aborted/);
    expect(await phaseOf(root)).toBe("aborted");
  });

  it("any other answer changes nothing and exits 0", async () => {
    for (const answer of ["", "n", "no", "yy", "Y please"]) {
      const root = await installation({ restore: true });
      const before = snapshotTree(root);
      const declined = await run(["--data-dir", root, "restores", "abort", "op-1"], {}, person([answer]));
      expect(declined.code).toBe(0);
      expect(declined.out).toContain("apply? [y/N] ");
      expect(declined.out).toContain("Not applied; nothing was changed.");
      expect(snapshotTree(root)).toEqual(before);
    }
  });

  it("a state moved between the preview and the `y` is refused exactly as a stale paste (exit 4)", async () => {
    const root = await installation({ restore: true });
    let pasted: string[] = [];
    const io = person([
      async () => {
        // Another operator, at this very moment, pastes the same printed command: the saga moves on.
        pasted = printed(io.out());
        const other = await run(pasted);
        expect(other.code, other.err).toBe(0);
        return "y";
      },
    ]);
    const answered = await run(["--data-dir", root, "restores", "abort", "op-1"], {}, io);
    expect(answered.code).toBe(EXIT_CODES.STATE_CHANGED);
    expect(answered.err).toMatch(/no longer in the state you previewed \(its seq is \d+, not \d+/);
    expect(answered.err).toContain("[fence_mismatch, exit 4]");

    const stale = await run(pasted);
    expect(stale.code).toBe(EXIT_CODES.STATE_CHANGED);
    // The same refusal, word for word: the answer ran the pasted command's own code path and fences.
    expect(answered.err).toBe(stale.err);
  });

  it("purge and locks gc ask too, and apply their own printed command", async () => {
    const root = await installation({ restore: true });
    mkdirSync(join(root, "locks"), { recursive: true });
    writeFileSync(join(root, "locks", `a.lock.reap-${randomUUID()}`), "");
    const gc = await run(["--data-dir", root, "locks", "gc"], {}, person(["y"]));
    expect(gc.code, gc.err).toBe(0);
    expect(gc.out).toMatch(/apply\? \[y\/N\] y\nRemoved 1 garbage file/);

    expect((await run(["--data-dir", root, "restores", "abort", "op-1"], {}, person(["y"]))).code).toBe(0);
    const purge = await run(
      ["--data-dir", root, "restores", "purge", "--older-than-days", "0"],
      {},
      person(["y"]),
    );
    expect(purge.code, purge.err).toBe(0);
    expect(purge.out).toMatch(
      /--expected-state sha256:[0-9a-f]{64} --yes\napply\? \[y\/N\] y\nPurged 1 archived restore/,
    );
  });

  /** A Boat whose deletion was prepared two minutes ago and never confirmed: the plan proposes a fenced action. */
  async function fencedBoat(): Promise<{ root: string; preview: string[] }> {
    const root = await installation();
    const environmentId = readFileSync(join(root, "environment-id"), "utf8").trim();
    const client = createBoatClient({ baseUrl: sim.apiUrl, token: sim.token });
    const lifecycle = createBoatLifecycle({
      client,
      createJournal: openBoatCreateJournal({ dataDir: root }),
      deleteJournal: openBoatDeleteJournal({ dataDir: root }),
      environmentId,
      sleep: async () => {},
    });
    const boat = await lifecycle.provision("bot1");
    await openBoatDeleteJournal({ dataDir: root, now: () => Date.now() - 120_000 }).prepareBoatDeletion({
      boxId: boat.boxId,
      name: boat.name,
      ownerBotId: "bot1",
    });
    const plan = JSON.parse((await run(["--data-dir", root, "reconcile", "--json"], provider())).out);
    const item = plan.plan.items.find((candidate: { boxId: string }) => candidate.boxId === boat.boxId);
    const command = (item.action.command as string).split(" ");
    // The preview form: the printed command without its fence and --yes.
    const at = command.indexOf("--expected-state");
    return {
      root,
      preview: command.slice(1).filter((_, i) => i + 1 !== at && i + 1 !== at + 1 && _ !== "--yes"),
    };
  }

  it("a Boat action asks, and applies with the --expected-state it printed", async () => {
    const { root, preview } = await fencedBoat();
    const before = snapshotTree(root);
    // Its --json preview has the versioned shape of a Boat action preview, with the command to confirm.
    const json = JSON.parse((await run([...preview, "--json"], provider())).out);
    expect(JSON_SCHEMAS["deletions reconcile"].parse(json)).toMatchObject({ preview: true, eligible: true });
    expect(snapshotTree(root)).toEqual(before);
    const applied = await run(preview, provider(), person(["y"]));
    expect(applied.code, applied.err).toBe(0);
    expect(applied.out).toMatch(/--expected-state sha256:[0-9a-f]{64} --yes\napply\? \[y\/N\] y\n/);
    expect(snapshotTree(root)).not.toEqual(before);
  });

  it("a Boat journal moved between the preview and the `y` is refused as a stale paste (state_changed, exit 4)", async () => {
    const { root: _root, preview } = await fencedBoat();
    let pasted: string[] = [];
    const io = person([
      async () => {
        pasted = printed(io.out());
        const other = await run(pasted, provider());
        expect(other.code, other.err).toBe(0);
        return "y";
      },
    ]);
    const answered = await run(preview, provider(), io);
    expect(answered.code, answered.err).toBe(EXIT_CODES.STATE_CHANGED);
    expect(answered.err).toContain("[state_changed, exit 4]");
    const stale = await run(pasted, provider());
    expect(stale.code).toBe(EXIT_CODES.STATE_CHANGED);
    expect(answered.err).toBe(stale.err);
  });

  it("never asks without a terminal, with --yes, --json or --no-input, or under CI: the preview exits 0", async () => {
    const root = await installation({ restore: true });
    const before = snapshotTree(root);
    const runs = [
      await run(
        ["--data-dir", root, "restores", "abort", "op-1"],
        {},
        bufferIo({ tty: true, answers: ["y"] }),
      ),
      await run(
        ["--data-dir", root, "restores", "abort", "op-1"],
        {},
        bufferIo({ stdinTty: true, answers: ["y"] }),
      ),
      await run(["--data-dir", root, "restores", "abort", "op-1", "--no-input"], {}, person(["y"])),
      await run(["--data-dir", root, "restores", "abort", "op-1"], { CI: "true" }, person(["y"])),
      await run(["--data-dir", root, "restores", "abort", "op-1", "--json"], {}, person(["y"])),
    ];
    for (const result of runs) {
      expect(result.code).toBe(0);
      expect(result.out).not.toContain("apply?");
      expect(result.out).toMatch(/--expected-seq \d+ --expected-hash sha256:/);
    }
    expect(snapshotTree(root)).toEqual(before);
    // --yes without the fence is still the usage error it always was, prompt or not.
    expect(
      (await run(["--data-dir", root, "restores", "abort", "op-1", "--yes"], {}, person(["y"]))).code,
    ).toBe(2);
  });
});

describe("status --fail-on-attention (monitoring)", () => {
  it("exits 0 when nothing needs attention and boat.dev was checked", async () => {
    const root = await installation();
    const ok = await run(["--data-dir", root, "status", "--fail-on-attention"], provider());
    expect(ok.code, ok.out + ok.err).toBe(0);
    expect(ok.out).toContain("OK: nothing needs attention.");
  });

  it("exits 7 when something needs a person (status alone still exits 0)", async () => {
    const root = await installation({ restore: true });
    const plain = await run(["--data-dir", root, "status"], provider());
    expect(plain.code).toBe(0);
    expect(plain.out).toContain("ATTENTION:");
    const monitored = await run(["--data-dir", root, "status", "--fail-on-attention"], provider());
    expect(monitored.code).toBe(EXIT_CODES.ATTENTION);
    expect(EXIT_CODES.ATTENTION).toBe(7);
    // Without boat.dev and with a person needed: the person comes first (7, not 6).
    expect((await run(["--data-dir", root, "status", "--fail-on-attention"])).code).toBe(7);
  });

  it("exits 6 when it could not look (boat.dev not checked) and nothing local needs a person", async () => {
    const root = await installation();
    const incomplete = await run(["--data-dir", root, "status", "--fail-on-attention"]);
    expect(incomplete.code).toBe(EXIT_CODES.PROVIDER_UNAVAILABLE);
    expect(incomplete.out).toContain("INCOMPLETE:");
  });
});

describe("versioned --json", () => {
  it("every command's --json document carries schemaVersion 1 and matches its exported schema", async () => {
    const root = await installation({ restore: true });
    mkdirSync(join(root, "locks"), { recursive: true });
    writeFileSync(join(root, "locks", `a.lock.reap-${randomUUID()}`), "");
    const shown = JSON.parse((await run(["--data-dir", root, "restores", "show", "op-1", "--json"])).out);
    const fence = shown.restore.fence as { expectedSeq: number; expectedHash: string };
    const fenceArgs = [
      "--expected-seq",
      String(fence.expectedSeq),
      "--expected-hash",
      fence.expectedHash,
      "--expected-owner-digest",
      "none",
    ];
    // Each command line, in an order that leaves the later ones something to show.
    const lines: [JsonCommand, string[]][] = [
      ["status", ["status"]],
      ["creates list", ["creates", "list"]],
      ["creates adopt", ["creates", "adopt", "bot1", "sbx_missing"]],
      ["creates retire", ["creates", "retire", "bot1"]],
      ["deletions list", ["deletions", "list"]],
      ["deletions reconcile", ["deletions", "reconcile", "sbx_missing"]],
      ["deletions retry", ["deletions", "retry", "sbx_missing"]],
      ["restores list", ["restores", "list"]],
      ["restores show", ["restores", "show", "op-1"]],
      ["restores release", ["restores", "release", "op-1"]],
      ["restores complete", ["restores", "complete", "op-1"]],
      ["restores rollback", ["restores", "rollback", "op-1"]],
      ["restores abort", ["restores", "abort", "op-1"]],
      ["restores abort", ["restores", "abort", "op-1", ...fenceArgs, "--yes"]],
      ["restores purge", ["restores", "purge", "--older-than-days", "0"]],
      ["reconcile", ["reconcile"]],
      ["locks list", ["locks", "list"]],
      ["locks gc", ["locks", "gc"]],
      ["locks gc", ["locks", "gc", "--yes"]],
      ["storage migrate", ["storage", "migrate", "--to", "sqlite"]],
      ["storage migrate", ["storage", "migrate", "--to", "file"]],
      // On this file data directory: refused (exit 2), "instances exist only with the postgres backend".
      ["instances list", ["instances", "list"]],
      ["instances declare-dead", ["instances", "declare-dead", "00000000-0000-4000-8000-000000000000"]],
      ["completion", ["completion", "bash"]],
    ];
    const documents = { stdout: 0, stderr: 0 };
    for (const [name, args] of lines) {
      const result = await run(["--data-dir", root, ...args, "--json"], provider());
      if (result.code === 0) {
        const document = JSON.parse(result.out);
        expect(document.schemaVersion, name).toBe(1);
        const parsed = JSON_SCHEMAS[name].safeParse(document);
        expect(parsed.success, `${args.join(" ")}: ${parsed.error?.message}`).toBe(true);
        documents.stdout += 1;
      } else {
        // A refusal: the error envelope on stderr, versioned too, and nothing on stdout.
        expect(result.out, name).toBe("");
        const parsed = ErrorDocumentSchema.safeParse(JSON.parse(result.err));
        expect(parsed.success, `${args.join(" ")}: ${parsed.error?.message}`).toBe(true);
        documents.stderr += 1;
      }
    }
    // Every leaf command of the table has a schema, and every schema was exercised.
    const leaves = commandPaths()
      .filter(
        (path) =>
          commandTree().commands.find((c) => c.name() === path[0])!.commands.length === 0 ||
          path.length === 2,
      )
      .map((path) => path.join(" "));
    expect(Object.keys(JSON_SCHEMAS).sort()).toEqual(leaves.sort());
    expect(new Set(lines.map(([name]) => name))).toEqual(new Set(Object.keys(JSON_SCHEMAS)));
    expect(documents.stdout).toBeGreaterThan(12);
  });

  it("a strict top level: an unlisted field fails the schema (so the test above catches an undocumented one)", () => {
    const locks = JSON_SCHEMAS["locks list"];
    expect(locks.safeParse({ schemaVersion: 1, locks: [], nextCursor: null }).success).toBe(true);
    expect(locks.safeParse({ schemaVersion: 1, locks: [], nextCursor: null, extra: true }).success).toBe(
      false,
    );
    expect(locks.safeParse({ schemaVersion: 2, locks: [], nextCursor: null }).success).toBe(false);
  });
});
