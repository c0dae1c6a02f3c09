// What a person who adopts drydock does, outside the monorepo: every public package and both commands are
// packed (`pnpm pack`, which resolves `workspace:*` to versions and applies publishConfig), the tarballs are
// installed with npm into an empty project that is not a workspace, and then used there: an ESM import of
// each library, a type check of a consumer against the shipped declarations, `drydock --version`, and
// `drydock-server` answering /healthz. A second part makes the `pnpm deploy` folder and runs it with plain
// node. Third-party dependencies come from the registry; nothing here reads the packages' sources.
import { type ChildProcess, execFile, spawn } from "node:child_process";
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, test } from "vitest";

const run = promisify(execFile);
const here = dirname(new URL(import.meta.url).pathname);
const root = resolve(here, "../../..");

/** Every package a user installs: directory → an export its entry point must have. */
const LIBRARIES: Record<string, Record<string, string>> = {
  "packages/facts": { "@drydock/facts": "BOAT_ID" },
  "packages/file-lock": { "@drydock/file-lock": "acquireLock" },
  "packages/json-journal": { "@drydock/json-journal": "openJsonJournal" },
  "packages/boat-create-journal": { "@drydock/boat-create-journal": "openBoatCreateJournal" },
  "packages/boat-delete-journal": { "@drydock/boat-delete-journal": "openBoatDeleteJournal" },
  "packages/boat-provider": {
    "@drydock/boat-provider": "createBoatClient",
    "@drydock/boat-provider/simulator": "startBoatSimulator",
  },
  "packages/boat-lifecycle": { "@drydock/boat-lifecycle": "createBoatLifecycle" },
  "packages/restore-saga": { "@drydock/restore-saga": "openSagaStore" },
  "packages/recovery-controller": { "@drydock/recovery-controller": "createRestoreRecoveryController" },
  // Its ./conformance subpath (vitest, fast-check, the private test-kit) is for the repository's backends
  // and is not in its published exports.
  "packages/storage": { "@drydock/storage": "openStorage" },
  "packages/storage-sqlite": { "@drydock/storage-sqlite": "openSqliteStorage" },
  "packages/storage-postgres": { "@drydock/storage-postgres": "openPostgresStorage" },
};
const COMMANDS: Record<string, Record<string, string>> = {
  "apps/recovery-cli": { "@drydock/recovery-cli": "main" },
  "apps/bot-server": { "@drydock/bot-server": "startServer" },
};
const PUBLIC = { ...LIBRARIES, ...COMMANDS };
/** The known export's kind, at run time and in the declarations; a function unless named here. */
const EXPORT_KIND: Record<string, { runtime: string; declared: string }> = {
  "@drydock/facts": { runtime: "object", declared: "RegExp" },
};
const kindOf = (spec: string) =>
  EXPORT_KIND[spec] ?? { runtime: "function", declared: "(...args: never[]) => unknown" };
/** Libraries that use zod; the others must not depend on it at all. */
// storage-sqlite's and storage-postgres's zod-typed surface is @drydock/storage's, whose peer dependency brings it.
const WITHOUT_ZOD = new Set(["packages/facts", "packages/storage-sqlite", "packages/storage-postgres"]);
const PRIVATE = [
  "packages/power-loss",
  "apps/console", // built into the bot server's package, not published on its own
  "packages/test-kit",
  "packages/doc-examples",
  "packages/install-check",
];

const readJson = (path: string) => JSON.parse(readFileSync(path, "utf8"));
const version = (dir: string): string => readJson(join(root, dir, "package.json")).version;

let work = "";
const tarballs: Record<string, string> = {};
let consumer = "";
const children: ChildProcess[] = [];

function tarText(tarball: string, member: string): Promise<string> {
  return run("tar", ["-xOzf", tarball, member], { maxBuffer: 64 << 20 }).then((r) => r.stdout);
}

async function tarList(tarball: string): Promise<string[]> {
  const { stdout } = await run("tar", ["-tzf", tarball], { maxBuffer: 16 << 20 });
  return stdout.split("\n").filter(Boolean);
}

/** Every string in a manifest (keys too) that would point a consumer into the monorepo. */
function monorepoReferences(value: unknown, at = "$"): string[] {
  if (typeof value === "string") {
    return /(^|[\s/.])src\/|workspace:|@drydock\/source|\.\.\//.test(value) ? [`${at} = ${value}`] : [];
  }
  if (Array.isArray(value)) return value.flatMap((v, i) => monorepoReferences(v, `${at}[${i}]`));
  if (value && typeof value === "object") {
    return Object.entries(value).flatMap(([k, v]) => [
      ...(k === "@drydock/source" || k.includes("src/") ? [`${at} has key ${k}`] : []),
      ...monorepoReferences(v, `${at}.${k}`),
    ]);
  }
  return [];
}

async function freePort(): Promise<number> {
  return new Promise((resolvePort, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      const port = typeof address === "object" && address ? address.port : 0;
      server.close(() => resolvePort(port));
    });
  });
}

/** Starts `command` with a fresh data directory, waits for GET /healthz, returns the status, stops it. */
async function serveHealthz(
  command: string,
  args: string[],
  cwd: string,
  extraEnv: Record<string, string> = {},
): Promise<{ status: number; console: string; exit: number | null; signal: string | null; output: string }> {
  const port = await freePort();
  const dataDir = mkdtempSync(join(work, "data-"));
  const child = spawn(command, args, {
    cwd,
    env: {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      HOST: "127.0.0.1",
      PORT: String(port),
      DRYDOCK_DATA_DIR: dataDir,
      LOG_LEVEL: "warn",
      ...extraEnv,
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  children.push(child);
  let output = "";
  child.stdout?.on("data", (chunk) => (output += chunk));
  child.stderr?.on("data", (chunk) => (output += chunk));
  const exited = new Promise<{ exit: number | null; signal: string | null }>((done) =>
    child.once("exit", (exit, signal) => done({ exit, signal })),
  );
  let status = 0;
  let consolePage = "not asked";
  const deadline = Date.now() + 60_000;
  while (Date.now() < deadline && child.exitCode === null) {
    try {
      const response = await fetch(`http://127.0.0.1:${port}/healthz`, {
        signal: AbortSignal.timeout(2_000),
      });
      status = response.status;
      await response.text();
      // The operator console ships inside the server's package (dist/console): its page is served as is.
      const page = await fetch(`http://127.0.0.1:${port}/console/`, { signal: AbortSignal.timeout(5_000) });
      consolePage = `${page.status} ${(await page.text()).includes('<div id="app"') ? "page" : "no page"}`;
      break;
    } catch {
      await new Promise((r) => setTimeout(r, 200));
    }
  }
  child.kill("SIGTERM");
  const stop = setTimeout(() => child.kill("SIGKILL"), 20_000);
  const { exit, signal } = await exited;
  clearTimeout(stop);
  return { status, console: consolePage, exit, signal, output };
}

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), "drydock-install-check-"));
  // The tarballs hold dist/: build what they contain (turbo answers from its cache when nothing changed).
  await run(
    "pnpm",
    [
      "exec",
      "turbo",
      "run",
      "build",
      "--filter=@drydock/bot-server...",
      "--filter=@drydock/recovery-cli...",
      "--output-logs=errors-only",
    ],
    {
      cwd: root,
      env: { ...process.env, TURBO_TELEMETRY_DISABLED: "1" },
      timeout: 400_000,
      maxBuffer: 16 << 20,
    },
  );
  const packs = join(work, "tarballs");
  mkdirSync(packs);
  for (const dir of Object.keys(PUBLIC)) {
    const before = new Set(readdirSync(packs));
    await run("pnpm", ["pack", "--pack-destination", packs], { cwd: join(root, dir), timeout: 120_000 });
    const made = readdirSync(packs).filter((name) => !before.has(name));
    expect(made, `pnpm pack in ${dir}`).toHaveLength(1);
    tarballs[dir] = join(packs, made[0]!);
  }
  consumer = join(work, "consumer");
  mkdirSync(consumer);
  writeFileSync(
    join(consumer, "package.json"),
    `${JSON.stringify({ name: "consumer", private: true, type: "module" })}\n`,
  );
  // All tarballs at once (they depend on one another by version); @types/node for the type check.
  // zod is not named: it is the libraries' peer dependency, and npm installs it from that.
  await run(
    "npm",
    [
      "install",
      "--no-audit",
      "--no-fund",
      "--loglevel=error",
      ...Object.values(tarballs),
      "@types/node@20.19.43",
    ],
    {
      // better-sqlite3 compiles from source here (about 75 s on two idle cores, far more on a loaded machine).
      cwd: consumer,
      timeout: 900_000,
      maxBuffer: 16 << 20,
    },
  );
}, 1_500_000);

afterAll(async () => {
  for (const child of children)
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
  if (work) rmSync(work, { recursive: true, force: true });
});

describe("the packed tarballs", () => {
  test("only the public packages are publishable, and each is packed", () => {
    // Every workspace package is named in exactly one list, so a new one cannot skip these checks.
    const workspace = ["packages", "apps"].flatMap((top) =>
      readdirSync(join(root, top))
        .filter((name) => existsSync(join(root, top, name, "package.json")))
        .map((name) => `${top}/${name}`),
    );
    expect([...Object.keys(PUBLIC), ...PRIVATE].sort()).toEqual(workspace.sort());
    for (const dir of PRIVATE) expect(readJson(join(root, dir, "package.json")).private, dir).toBe(true);
    for (const dir of Object.keys(PUBLIC)) {
      const pkg = readJson(join(root, dir, "package.json"));
      expect(pkg.private, dir).toBeUndefined();
      expect(pkg.publishConfig?.access, dir).toBe("public");
      expect(existsSync(tarballs[dir]!), dir).toBe(true);
    }
  });

  test("no packed manifest points into src/ or the monorepo; metadata present; zod a peer of every library", async () => {
    for (const [dir, tarball] of Object.entries(tarballs)) {
      const manifest = JSON.parse(await tarText(tarball, "package/package.json"));
      expect(monorepoReferences(manifest), dir).toEqual([]);
      expect(manifest.version, dir).toBe(version(dir));
      expect(manifest.license, dir).toBe("MIT");
      expect(manifest.repository, dir).toMatchObject({ type: "git", directory: dir });
      expect(typeof manifest.homepage, dir).toBe("string");
      expect(typeof manifest.bugs?.url, dir).toBe("string");
      expect(manifest.keywords?.length, dir).toBeGreaterThan(0);
      for (const deps of [manifest.dependencies ?? {}, manifest.peerDependencies ?? {}]) {
        for (const [name, range] of Object.entries(deps as Record<string, string>)) {
          if (name.startsWith("@drydock/"))
            expect(range, `${dir} → ${name}`).toBe(
              version(
                Object.keys(PUBLIC).find((d) => readJson(join(root, d, "package.json")).name === name)!,
              ),
            );
        }
      }
      if (WITHOUT_ZOD.has(dir)) {
        expect(manifest.peerDependencies?.zod, dir).toBeUndefined();
        expect(manifest.dependencies?.zod, dir).toBeUndefined();
      } else if (dir in LIBRARIES) {
        expect(manifest.peerDependencies?.zod, dir).toBe("^4.0.0");
        expect(manifest.dependencies?.zod, dir).toBeUndefined();
      }
    }
  });

  test("each tarball holds dist, README, LICENSE and CHANGELOG, and no sources; source maps carry their sources", async () => {
    const license = readFileSync(join(root, "LICENSE"), "utf8");
    for (const [dir, tarball] of Object.entries(tarballs)) {
      const files = await tarList(tarball);
      for (const needed of [
        "package/package.json",
        "package/README.md",
        "package/LICENSE",
        "package/CHANGELOG.md",
      ]) {
        expect(files, dir).toContain(needed);
      }
      expect(
        files.filter((f) => f.startsWith("package/src/") || (f.endsWith(".ts") && !f.endsWith(".d.ts"))),
        dir,
      ).toEqual([]);
      expect(await tarText(tarball, "package/LICENSE"), `${dir}/LICENSE is the root LICENSE`).toBe(license);
      for (const map of files.filter((f) => f.endsWith(".js.map"))) {
        const parsed = JSON.parse(await tarText(tarball, map));
        expect(parsed.sourcesContent?.length, `${dir} ${map}`).toBe(parsed.sources.length);
      }
    }
  });
});

describe("installed with npm into an empty project", () => {
  test("every library imports as ESM and has its known export", async () => {
    const specs = Object.values(PUBLIC).flatMap((entries) => Object.entries(entries));
    const script = specs
      .map(
        ([spec, name], i) =>
          `import * as m${i} from ${JSON.stringify(spec)};\nif (typeof m${i}[${JSON.stringify(name)}] !== ${JSON.stringify(kindOf(spec).runtime)}) throw new Error(${JSON.stringify(`${spec} has no ${name}`)});`,
      )
      .join("\n");
    writeFileSync(join(consumer, "imports.mjs"), `${script}\nconsole.log("imported", ${specs.length});\n`);
    const { stdout } = await run(process.execPath, ["imports.mjs"], { cwd: consumer, timeout: 60_000 });
    expect(stdout.trim()).toBe(`imported ${specs.length}`);
    // The libraries share the consumer's one zod (a peer), so their schema types are the consumer's.
    for (const dir of Object.keys(LIBRARIES)) {
      const name = readJson(join(root, dir, "package.json")).name as string;
      expect(
        existsSync(join(consumer, "node_modules", name, "node_modules", "zod")),
        `${name} has its own zod`,
      ).toBe(false);
    }
    expect(existsSync(join(consumer, "node_modules", "zod", "package.json"))).toBe(true);
  });

  test("a TypeScript consumer type-checks against the shipped declarations (the repository's tsc)", async () => {
    const specs = Object.values(PUBLIC).flatMap((entries) => Object.entries(entries));
    const lines = specs.flatMap(([spec, name], i) => [
      `import * as m${i} from ${JSON.stringify(spec)};`,
      `export const f${i}: ${kindOf(spec).declared} = m${i}.${name};`,
      // Fails (an unused directive) if the module resolved to \`any\` instead of its declarations.
      `// @ts-expect-error not an export`,
      `m${i}.notAnExportOfThisPackage;`,
    ]);
    lines.push(
      `import { z } from "zod";`,
      `import { openJsonJournal } from "@drydock/json-journal";`,
      `const Doc = z.object({ version: z.literal(1), names: z.array(z.string()) });`,
      `export const journal = openJsonJournal<z.infer<typeof Doc>>({ file: "/tmp/x.json", schema: Doc, empty: () => ({ version: 1, names: [] }), stateError: (d) => new Error(d) });`,
      `// @ts-expect-error the document type is checked against the schema's`,
      `openJsonJournal<{ version: 2 }>({ file: "/tmp/x.json", schema: Doc, empty: { version: 2 }, stateError: (d) => new Error(d) });`,
    );
    writeFileSync(join(consumer, "consumer.ts"), `${lines.join("\n")}\n`);
    writeFileSync(
      join(consumer, "tsconfig.json"),
      JSON.stringify({
        compilerOptions: {
          target: "ES2022",
          module: "NodeNext",
          moduleResolution: "NodeNext",
          strict: true,
          noEmit: true,
          skipLibCheck: false,
          types: ["node"],
        },
        files: ["consumer.ts"],
      }),
    );
    const tsc = join(root, "node_modules", "typescript", "bin", "tsc");
    const result = await run(process.execPath, [tsc, "-p", "tsconfig.json"], {
      cwd: consumer,
      timeout: 120_000,
    }).catch((error) => error);
    expect(`${result.stdout ?? ""}${result.stderr ?? ""}`).toBe("");
    expect(result.code ?? 0).toBe(0);
  });

  test("drydock --version prints the package version (from node_modules/.bin and with npx)", async () => {
    const expected = version("apps/recovery-cli");
    const bin = await run(join(consumer, "node_modules", ".bin", "drydock"), ["--version"], {
      cwd: consumer,
      timeout: 60_000,
    });
    expect(bin.stdout.trim()).toBe(expected);
    const npx = await run("npx", ["--no-install", "drydock", "--version"], {
      cwd: consumer,
      timeout: 60_000,
    });
    expect(npx.stdout.trim()).toBe(expected);
  });

  test("drydock-server starts on a free loopback port with a fresh data directory and answers /healthz", async () => {
    const served = await serveHealthz(join(consumer, "node_modules", ".bin", "drydock-server"), [], consumer);
    expect(served.status, served.output).toBe(200);
    expect(served.console, served.output).toBe("200 page");
    expect({ exit: served.exit, signal: served.signal }, served.output).toEqual({ exit: 0, signal: null });
  });

  test("drydock-server runs on the sqlite backend: better-sqlite3 was compiled by npm's install", async () => {
    const served = await serveHealthz(
      join(consumer, "node_modules", ".bin", "drydock-server"),
      [],
      consumer,
      { DRYDOCK_STORAGE: "sqlite" },
    );
    expect(served.status, served.output).toBe(200);
    expect(served.output).toMatch(/storage: +sqlite \(.*drydock\.sqlite\)/);
    expect({ exit: served.exit, signal: served.signal }, served.output).toEqual({ exit: 0, signal: null });
  });
});

describe("npm i -g", () => {
  test("both commands install globally from their tarballs (with the libraries' tarballs beside them) and run", async () => {
    // Until the libraries are on the registry, a global install of one command's tarball alone would look
    // them up there: they are installed in the same command, as siblings in the prefix's lib/node_modules.
    const prefix = join(work, "global");
    await run(
      "npm",
      [
        "install",
        "--global",
        "--prefix",
        prefix,
        "--no-audit",
        "--no-fund",
        "--loglevel=error",
        ...Object.values(tarballs),
      ],
      {
        cwd: work,
        timeout: 900_000,
        maxBuffer: 16 << 20,
      },
    );
    const { stdout } = await run(join(prefix, "bin", "drydock"), ["--version"], {
      cwd: work,
      timeout: 60_000,
    });
    expect(stdout.trim()).toBe(version("apps/recovery-cli"));
    const served = await serveHealthz(join(prefix, "bin", "drydock-server"), [], work);
    expect(served.status, served.output).toBe(200);
    expect({ exit: served.exit, signal: served.signal }, served.output).toEqual({ exit: 0, signal: null });
    // npm compiles better-sqlite3 (the sqlite backend's) again for the global prefix.
  }, 1_000_000);
});

describe("pnpm deploy", () => {
  test("the deploy folder of @drydock/bot-server runs with plain node", async () => {
    const target = join(work, "deploy");
    // pnpm 10 deploys only injected workspaces unless --legacy: the workspace keeps its symlinked packages.
    await run("pnpm", ["--filter", "@drydock/bot-server", "deploy", "--prod", "--legacy", target], {
      cwd: root,
      timeout: 300_000,
      maxBuffer: 16 << 20,
    });
    expect(existsSync(join(target, "node_modules", "@drydock", "file-lock", "dist", "index.js"))).toBe(true);
    expect(existsSync(join(target, "node_modules", "@drydock", "file-lock", "src"))).toBe(false);
    const served = await serveHealthz(process.execPath, [join(target, "dist", "main.js")], work);
    expect(served.status, served.output).toBe(200);
    expect({ exit: served.exit, signal: served.signal }, served.output).toEqual({ exit: 0, signal: null });
  });

  test("the deploy folder of @drydock/recovery-cli runs as `drydock` through a symlink (as deploy/Containerfile links it)", async () => {
    const target = join(work, "deploy-cli");
    await run("pnpm", ["--filter", "@drydock/recovery-cli", "deploy", "--prod", "--legacy", target], {
      cwd: root,
      timeout: 300_000,
      maxBuffer: 16 << 20,
    });
    const link = join(work, "bin", "drydock");
    mkdirSync(dirname(link), { recursive: true });
    symlinkSync(join(target, "dist", "main.js"), link);
    const { stdout } = await run(link, ["--version"], { cwd: work, timeout: 60_000 });
    expect(stdout.trim()).toBe(version("apps/recovery-cli"));
  });
});
