/**
 * Shutdown (issue 25), on the real server process (tsx on sources, main.ts's `exitOnSignals`): a request in
 * flight finishes; one that hangs is cut at DRYDOCK_SHUTDOWN_TIMEOUT_MS; a second signal exits at once.
 * The bounds are hang guards, generous for a loaded machine: the tests assert order and exit codes.
 */
import { afterEach, describe, expect, it } from "vitest";
import { SHUTDOWN_DEADLINE_EXIT } from "../src/shutdown.js";
import { api, type ServerChild, SHUTDOWN_ENTRY, spawnServer, tempDir } from "./helpers.js";

const children: ServerChild[] = [];
const dirs: { cleanup(): void }[] = [];
afterEach(() => {
  for (const child of children.splice(0)) child.kill();
  for (const dir of dirs.splice(0)) dir.cleanup();
});

async function start(env: Record<string, string>): Promise<ServerChild> {
  const dir = tempDir("shutdown");
  dirs.push(dir);
  const child = await spawnServer(dir.dir, { LOG_LEVEL: "silent", ...env }, { entry: SHUTDOWN_ENTRY });
  children.push(child);
  await until(child, "startup finished");
  return child;
}

async function until(child: ServerChild, text: string, ms = 30_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!child.output().includes(text)) {
    if (Date.now() > deadline) throw new Error(`no '${text}' within ${ms} ms:\n${child.output()}`);
    if (child.child.exitCode !== null) throw new Error(`exited before '${text}':\n${child.output()}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** Resolves with the exit, or rejects after `ms` (the hang guard). */
function exitWithin(child: ServerChild, ms: number) {
  return Promise.race([
    child.exited,
    new Promise<never>((_, reject) =>
      setTimeout(() => reject(new Error(`still running after ${ms} ms:\n${child.output()}`)), ms),
    ),
  ]);
}

describe("shutdown on SIGTERM", { timeout: 90_000 }, () => {
  it("lets a request in flight finish, refuses new ones, then exits 0", async () => {
    const child = await start({ DRYDOCK_TEST_INVENTORY_MS: "1500", DRYDOCK_SHUTDOWN_TIMEOUT_MS: "60000" });
    const inFlight = api(child.url, child.token)("GET", "/v1/computers");
    await until(child, "inventory entered");
    child.child.kill("SIGTERM");
    await until(child, "shutdown: SIGTERM: shutting down");
    // A new request meanwhile is not taken: its connection is refused (or answered 503 while closing).
    const late = await fetch(`${child.url}/healthz`).then(
      (res) => res.status,
      () => "refused",
    );
    expect([503, "refused"]).toContain(late);
    const answered = await inFlight;
    expect(answered.status).toBe(200);
    expect(answered.json.ok).toBe(true);
    const exit = await exitWithin(child, 30_000);
    expect(exit).toEqual({ code: 0, signal: null });
    const out = child.output();
    expect(out.indexOf("shutting down")).toBeLessThan(out.indexOf("shutdown: shut down"));
    expect(out).not.toContain("deadline");
  });

  it("cuts a request that never finishes at DRYDOCK_SHUTDOWN_TIMEOUT_MS and exits 1", async () => {
    const child = await start({ DRYDOCK_TEST_INVENTORY_MS: "hang", DRYDOCK_SHUTDOWN_TIMEOUT_MS: "1000" });
    const stuck = api(child.url, child.token)("GET", "/v1/computers").then(
      (res) => ({ status: res.status }),
      (error: Error) => ({ error: error.message }),
    );
    await until(child, "inventory entered");
    child.child.kill("SIGTERM");
    const exit = await exitWithin(child, 30_000);
    expect(exit).toEqual({ code: SHUTDOWN_DEADLINE_EXIT, signal: null });
    expect(child.output()).toContain("shutdown deadline of 1000 ms passed with requests still in flight");
    expect(child.output()).not.toContain("shutdown: shut down");
    // The stuck request never got an answer: its connection went with the process.
    expect(await stuck).toEqual({ error: expect.any(String) });
  });

  it("exits at once on a second signal, long before the deadline, with 128 + the signal's number", async () => {
    const child = await start({ DRYDOCK_TEST_INVENTORY_MS: "hang", DRYDOCK_SHUTDOWN_TIMEOUT_MS: "600000" });
    void api(child.url, child.token)("GET", "/v1/computers").catch(() => {});
    await until(child, "inventory entered");
    child.child.kill("SIGTERM");
    await until(child, "shutdown: SIGTERM: shutting down");
    child.child.kill("SIGINT");
    const exit = await exitWithin(child, 30_000);
    expect(exit).toEqual({ code: 130, signal: null });
    expect(child.output()).toContain("second SIGINT: exiting at once");
  });
});
