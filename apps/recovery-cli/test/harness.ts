import { spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { openStorage } from "@drydock/storage";
import { build } from "tsup";
import { bufferIo, main } from "../src/index.js";

const here = dirname(fileURLToPath(import.meta.url));
const APP_DIR = join(here, "..");

export interface Built {
  cli: string;
  child: string;
}

/**
 * Bundles src/main.ts and the crash child from SOURCES (the @drydock/source condition, so no package needs
 * a prior build) into one file each. Spawning node on a bundle costs a fraction of a tsx start-up, which
 * keeps this suite inside its time budget on a loaded machine; it is the same code `drydock` runs.
 */
export async function buildBinaries(outDir: string): Promise<Built> {
  await build({
    entry: { drydock: join(APP_DIR, "src", "main.ts"), child: join(here, "fixtures", "crash-child.ts") },
    outDir,
    format: ["esm"],
    platform: "node",
    target: "node20",
    noExternal: [/.*/],
    splitting: false,
    dts: false,
    sourcemap: false,
    clean: true,
    silent: true,
    // CommonJS dependencies (commander, cli-table3) call require(); give the ESM bundle a real one.
    banner: {
      js: "import { createRequire as __drydockRequire } from 'node:module'; const require = __drydockRequire(import.meta.url);",
    },
    esbuildOptions(options) {
      // esbuild adds "import" or "require" by how each module is loaded; forcing "import" made pg's
      // require("pg-pool") get pg-pool's ES module namespace (not a class) and the bundle crash at start.
      options.conditions = ["@drydock/source", "node"];
    },
  });
  return { cli: join(outDir, "drydock.js"), child: join(outDir, "child.js") };
}

export interface RunResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/** Every CLI output of the suite, for the secret scan at its end. */
export const transcript: string[] = [];

/** Runs a process in its own group; the group is SIGKILLed afterwards whatever happened (hang guard 60 s). */
export async function runProcess(
  file: string,
  args: readonly string[],
  env: Record<string, string> = {},
): Promise<RunResult> {
  const child = spawn(process.execPath, [file, ...args], {
    cwd: APP_DIR,
    env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "/tmp", ...env },
    detached: true,
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  child.stdout?.on("data", (chunk: Buffer) => {
    stdout += chunk.toString("utf8");
  });
  child.stderr?.on("data", (chunk: Buffer) => {
    stderr += chunk.toString("utf8");
  });
  const timer = setTimeout(() => {
    try {
      process.kill(-child.pid!, "SIGKILL");
    } catch {}
  }, 60_000);
  try {
    return await new Promise<RunResult>((resolve, reject) => {
      child.on("error", reject);
      // "close", not "exit": exit can come before the last output is read (a child that writes, then is
      // SIGKILLed, would otherwise look silent).
      child.on("close", (code, signal) => resolve({ code, signal, stdout, stderr }));
    });
  } finally {
    clearTimeout(timer);
    try {
      process.kill(-child.pid!, "SIGKILL");
    } catch {}
  }
}

export function tempRoot(): string {
  return mkdtempSync(join(tmpdir(), "drydock-cli-"));
}

export function writeTree(root: string, files: Record<string, string>): void {
  for (const [rel, content] of Object.entries(files)) {
    mkdirSync(dirname(join(root, rel)), { recursive: true });
    writeFileSync(join(root, rel), content);
  }
}

/** Every file under `root` (relative path → bytes), for "nothing changed" assertions. */
export function snapshotTree(root: string): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (dir: string, prefix: string): void => {
    let names: string[];
    try {
      names = readdirSync(dir).sort();
    } catch {
      return;
    }
    for (const name of names) {
      const full = join(dir, name);
      const rel = prefix ? `${prefix}/${name}` : name;
      if (statSync(full).isDirectory()) {
        out[`${rel}/`] = "";
        walk(full, rel);
      } else out[rel] = readFileSync(full, "latin1");
    }
  };
  walk(root, "");
  return out;
}

/** `drydock` in-process (`main` with buffer streams and `env`): its exit code, stdout and stderr. */
export async function runMain(args: readonly string[], env: Record<string, string> = {}) {
  const io = bufferIo();
  const code = await main(args, { io, env });
  return { code, out: io.out(), err: io.err() };
}

/**
 * A data directory on the file backend with rows of every kind: two bots (ada, bob), their create rows, one
 * deletion fence and the environment id — written through the real file backend, as a server would.
 */
export async function seedFileRows(dir: string): Promise<void> {
  const storage = await openStorage({ dataDir: dir, storage: "file" });
  const body = JSON.stringify({ ttlSeconds: 28_800, noEnv: true });
  try {
    await storage.meta.getOrCreate("environment-id", randomUUID);
    await storage.bots.create({ botId: "ada", name: "Ada" });
    await storage.bots.create({ botId: "bob", name: "Bob" });
    await storage.createJournal.beginBoatCreate("ada", body);
    await storage.createJournal.beginBoatCreate("bob", body);
    await storage.deleteJournal.prepareBoatDeletion({
      boxId: "bx_aaaaaaaa",
      name: "n-ada",
      ownerBotId: "ada",
    });
  } finally {
    await storage.close();
  }
}
