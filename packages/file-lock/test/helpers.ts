import { type ChildProcess, spawn } from "node:child_process";
import {
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";

export const PACKAGE_DIR = fileURLToPath(new URL("../", import.meta.url));
const FIXTURES = fileURLToPath(new URL("./fixtures/", import.meta.url));

/** A fresh directory under the system temp dir; `remove()` deletes it. */
export function tempDir(prefix = "file-lock-"): { dir: string; remove(): void } {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  return { dir, remove: () => rmSync(dir, { recursive: true, force: true }) };
}

/** Names in `dir` that crashed or failed acquisitions could leave behind. */
export function leftovers(dir: string): string[] {
  return readdirSync(dir).filter((name) => name.includes(".candidate-") || name.includes(".reap-"));
}

/**
 * Runs a TypeScript fixture in its own process group, through tsx, on the package sources. `wrapper` is a
 * command that runs node for it (e.g. `["unshare", "--pid", "--fork", "--mount-proc"]`).
 */
export function spawnFixture(
  name: string,
  args: string[],
  env: Record<string, string> = {},
  wrapper: string[] = [],
): ChildProcess {
  const [command = process.execPath, ...rest] = [
    ...wrapper,
    process.execPath,
    ...["--conditions=@drydock/source", "--import", "tsx", join(FIXTURES, name), ...args],
  ];
  return spawn(command, rest, {
    cwd: PACKAGE_DIR,
    detached: true,
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, ...env },
  });
}

/** Kills the child's whole process group; safe to call on an exited child. */
export function killGroup(child: ChildProcess): void {
  if (child.pid === undefined || child.exitCode !== null || child.signalCode !== null) return;
  try {
    process.kill(-child.pid, "SIGKILL");
  } catch {
    // Already gone.
  }
}

/** Resolves when the child has exited and been reaped (so its pid is free: kill(pid, 0) gives ESRCH). */
export function exited(child: ChildProcess): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
  if (child.exitCode !== null || child.signalCode !== null) {
    return Promise.resolve({ code: child.exitCode, signal: child.signalCode });
  }
  return new Promise((resolve) => child.once("exit", (code, signal) => resolve({ code, signal })));
}

/** Collects stderr so a failing fixture explains itself. */
export function captureStderr(child: ChildProcess): () => string {
  let text = "";
  child.stderr?.setEncoding("utf8");
  child.stderr?.on("data", (chunk: string) => {
    text += chunk;
  });
  return () => text;
}

/** Waits for a stdout line starting with `prefix`; rejects if the child exits first or after `timeoutMs`. */
export function waitForLine(child: ChildProcess, prefix: string, timeoutMs = 20_000): Promise<string> {
  return new Promise((resolve, reject) => {
    let buffer = "";
    const onData = (chunk: string): void => {
      buffer += chunk;
      for (const line of buffer.split("\n")) {
        if (line.startsWith(prefix)) {
          cleanup();
          resolve(line);
          return;
        }
      }
    };
    const onExit = (code: number | null, signal: string | null): void => {
      cleanup();
      reject(new Error(`fixture exited (${code ?? signal}) before printing "${prefix}"; stdout: ${buffer}`));
    };
    const timer = setTimeout(() => {
      cleanup();
      reject(new Error(`fixture did not print "${prefix}" within ${timeoutMs} ms; stdout: ${buffer}`));
    }, timeoutMs);
    const cleanup = (): void => {
      clearTimeout(timer);
      child.stdout?.off("data", onData);
      child.off("close", onExit);
    };
    child.stdout?.setEncoding("utf8");
    child.stdout?.on("data", onData);
    // "close", not "exit": exit can come before the line that was awaited is read.
    child.once("close", onExit);
  });
}

let lastDeadPid: number | undefined;

function isFree(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return false;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "ESRCH";
  }
}

/**
 * A pid that certainly names no process: a child that was spawned, exited and was reaped. Reused while
 * kill(pid, 0) still says ESRCH (spawning costs seconds on a loaded machine); a reused pid gets a new one.
 */
export async function deadPid(): Promise<number> {
  if (lastDeadPid !== undefined && isFree(lastDeadPid)) return lastDeadPid;
  lastDeadPid = await freshDeadPid();
  return lastDeadPid;
}

/** A dead pid different from every earlier one of this process (pids only grow until they wrap). */
export async function freshDeadPid(): Promise<number> {
  const child = spawn("true", [], { stdio: "ignore" });
  const pid = child.pid;
  if (pid === undefined) throw new Error("could not spawn a process");
  await exited(child);
  if (!isFree(pid)) throw new Error(`pid ${pid} is still in use after its process exited`);
  return pid;
}

/** A live process that does nothing for a while (`sleep`), in its own group. */
export function spawnSleeper(): ChildProcess {
  return spawn("sleep", ["60"], { detached: true, stdio: "ignore" });
}

/** The original lock's exact owner file: four fields, JSON plus newline. */
export function seedOwnerText(pid: number, token: string, createdAt = Date.now()): string {
  return `${JSON.stringify({ version: 1, pid, token, createdAt })}\n`;
}

/**
 * Transpiles the package sources plus one fixture to plain JavaScript in a temp dir, for tests that spawn many
 * short-lived processes: a worker started through tsx costs ~0.7 s of CPU, a transpiled one ~0.25 s, which
 * decides whether the torture fits its time on a loaded 2-core box. Same sources, no stale dist/: the fixture's
 * `@drydock/file-lock` import is pointed at the transpiled src/index.js.
 */
export async function transpileWorker(fixture: string): Promise<{ entry: string; remove(): void }> {
  const ts = (await import("typescript")).default;
  const temp = tempDir("file-lock-js-");
  const compile = (from: string, to: string, rewrite: (js: string) => string = (js) => js): void => {
    const output = ts.transpileModule(readFileSync(from, "utf8"), {
      compilerOptions: {
        module: ts.ModuleKind.ESNext,
        target: ts.ScriptTarget.ES2022,
        verbatimModuleSyntax: true,
      },
    }).outputText;
    mkdirSync(dirname(to), { recursive: true });
    writeFileSync(to, rewrite(output));
  };
  const sources = (dir: string): string[] =>
    readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) return sources(path);
      return entry.name.endsWith(".ts") && !entry.name.endsWith(".test.ts") ? [path] : [];
    });
  // The one workspace package file-lock imports (@drydock/facts, a leaf) is transpiled beside it too: its
  // dist/ may not exist yet (a fresh clone before the build) and must never be a stale copy.
  const factsDir = join(PACKAGE_DIR, "..", "facts", "src");
  for (const file of sources(factsDir)) {
    compile(file, join(temp.dir, "facts", relative(factsDir, file)).replace(/\.ts$/, ".js"));
  }
  const srcDir = join(PACKAGE_DIR, "src");
  for (const file of sources(srcDir)) {
    const to = join(temp.dir, "src", relative(srcDir, file)).replace(/\.ts$/, ".js");
    const facts = relative(dirname(to), join(temp.dir, "facts", "index.js"));
    compile(file, to, (js) =>
      js.replaceAll('"@drydock/facts"', JSON.stringify(facts.startsWith(".") ? facts : `./${facts}`)),
    );
  }
  const entry = join(temp.dir, "fixtures", fixture.replace(/\.ts$/, ".mjs"));
  compile(join(FIXTURES, fixture), entry, (js) => js.replaceAll('"@drydock/file-lock"', '"../src/index.js"'));
  // Bare imports (zod) resolve through the package's own node_modules.
  symlinkSync(join(PACKAGE_DIR, "node_modules"), join(temp.dir, "node_modules"), "dir");
  return { entry, remove: temp.remove };
}

/** Runs a transpiled worker (see transpileWorker) in its own process group. */
export function spawnScript(entry: string, args: string[], env: Record<string, string> = {}): ChildProcess {
  return spawn(process.execPath, [entry, ...args], {
    cwd: PACKAGE_DIR,
    detached: true,
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, ...env },
  });
}
