/**
 * The console end to end: a real bot server (its own process, on sources) whose data directory holds two
 * restores SIGKILLed mid-way (crash points, as the bot server's recovery tests make them), and the page in
 * Debian's headless chromium driven by playwright-core. With DRYDOCK_CONSOLE_SCREENSHOTS=1 the main views
 * are written to docs/console/*.png (`pnpm --filter @drydock/console screenshots`).
 */

import { spawnSync } from "node:child_process";
import { randomUUID } from "node:crypto";
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { openBoatDeleteJournal } from "@drydock/boat-delete-journal";
import { createRestoreRecoveryController } from "@drydock/recovery-controller";
import { type BrowserContext, chromium, type Page } from "playwright-core";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { api, REPO_ROOT, type ServerChild, spawnServer, tempDir } from "../../bot-server/test/helpers.js";

// The page.evaluate callbacks run in the browser. This test's typecheck has no DOM lib (the bot server's
// helpers are typed against node's fetch), so the few browser globals they touch are declared here.
interface PageElement {
  id?: string;
  tagName: string;
  textContent: string | null;
  getAttribute(name: string): string | null;
  labels?: ArrayLike<unknown> | null;
}
declare const document: {
  activeElement: PageElement | null;
  documentElement: { scrollWidth: number };
  querySelectorAll(selector: string): ArrayLike<PageElement>;
};
declare const window: { innerWidth: number };
declare const sessionStorage: { getItem(key: string): string | null };
declare function getComputedStyle(element: unknown): { outlineStyle: string };

const TOKEN = "c".repeat(32);
/** A read-only token of the server under test (DRYDOCK_TOKENS `dash:read:…`, as test/operations.test.ts). */
const READER = "r".repeat(32);
const SHOTS = process.env.DRYDOCK_CONSOLE_SCREENSHOTS === "1" ? join(REPO_ROOT, "docs", "console") : null;
/** TOOLING.md's flags for Debian's chromium here. */
const CHROMIUM_FLAGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];

/** A restore of a new bot `botId` that SIGKILLs its server at `point` (the process is gone after). */
async function killRestoreAt(dataDir: string, botId: string, point: string): Promise<void> {
  const crashing = await spawnServer(dataDir, { DRYDOCK_CRASH_POINT: point, DRYDOCK_TOKEN: TOKEN });
  try {
    const call = api(crashing.url, crashing.token);
    expect((await call("POST", "/v1/bots", { name: `Bot ${botId}`, botId })).status).toBe(201);
    expect((await call("PUT", `/v1/bots/${botId}/files/a.txt`, "v1")).status).toBe(201);
    const checkpointId = (await call("POST", `/v1/bots/${botId}/checkpoints`)).json.checkpoint.checkpointId;
    expect((await call("PUT", `/v1/bots/${botId}/files/a.txt`, "v2")).status).toBe(201);
    await call("POST", `/v1/bots/${botId}/checkpoints/${checkpointId}/restore`).catch(() => undefined);
    expect((await crashing.exited).signal).toBe("SIGKILL");
  } finally {
    crashing.kill();
  }
}

/** A screenshot of the whole page, or of the viewport (a modal dialog's backdrop covers only that). */
async function shot(page: Page, name: string, fullPage = true): Promise<void> {
  if (SHOTS === null) return;
  mkdirSync(SHOTS, { recursive: true });
  await page.screenshot({ path: join(SHOTS, `${name}.png`), fullPage });
}

/** Debian's chromium (TOOLING.md's flags) in the fresh profile `profile`, and its first tab. */
async function launchBrowser(profile: string): Promise<{ context: BrowserContext; page: Page }> {
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: "/usr/bin/chromium",
    headless: true,
    args: CHROMIUM_FLAGS,
    viewport: { width: 1280, height: 900 },
  });
  return { context, page: context.pages()[0] ?? (await context.newPage()) };
}

/** Opens the console in `page` and signs in with `token` (the tab keeps it). */
async function signIn(page: Page, url: string, token: string): Promise<void> {
  await page.goto(`${url}/console/`);
  await page.getByLabel("Server token").fill(token);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.getByRole("heading", { name: "Bots and their Boats" }).waitFor();
}

/**
 * A browser suite's hooks: after each case an open dialog (a failed case's) is closed, so it fails alone;
 * after all, the browser, the server and their directories are gone.
 */
function cleanUpAfter(
  state: () => { page?: Page; context?: BrowserContext; server?: ServerChild },
  data: { cleanup(): void },
  profile: string,
): void {
  afterEach(async () => {
    const { page } = state();
    if (page && (await page.getByRole("dialog").count()) > 0) await page.keyboard.press("Escape");
  });
  afterAll(async () => {
    const { context, server } = state();
    await context?.close();
    server?.kill();
    data.cleanup();
    rmSync(profile, { recursive: true, force: true });
  });
}

describe("the operator console in headless chromium", () => {
  const data = tempDir("console-e2e");
  const profile = mkdtempSync(join(tmpdir(), "drydock-chromium-"));
  let server: ServerChild;
  let context: BrowserContext;
  let page: Page;
  const restores = new Map<string, string>();
  let boxId = "";
  let boatName = "";

  beforeAll(async () => {
    await killRestoreAt(data.dir, "alpha", "restore.after-locked");
    await killRestoreAt(data.dir, "beta", "restore.after-locked");
    server = await spawnServer(data.dir, { DRYDOCK_TOKEN: TOKEN, DRYDOCK_TOKENS: `dash:read:${READER}` });
    const call = api(server.url, server.token);
    expect((await call("POST", "/v1/bots", { name: "Gamma", botId: "gamma" })).status).toBe(201);
    const computer = await call("POST", "/v1/bots/gamma/computer");
    expect(computer.status).toBe(201);
    boxId = computer.json.computer.boxId;
    boatName = computer.json.computer.name;
    for (const item of (await call("GET", "/v1/recovery")).json.restores)
      restores.set(item.botId, item.operationId);
    expect([...restores.keys()].sort()).toEqual(["alpha", "beta"]);

    ({ context, page } = await launchBrowser(profile));
  });

  cleanUpAfter(() => ({ page, context, server }), data, profile);

  it("asks for a token once, refuses a wrong one, and keeps the right one for the tab", async () => {
    const response = await page.goto(`${server.url}/console/`);
    expect(response?.status()).toBe(200);
    expect(response?.headers()["content-security-policy"]).toContain("default-src 'self'");
    await page.getByLabel("Server token").fill("w".repeat(32));
    await page.getByRole("button", { name: "Sign in" }).click();
    await expect.poll(() => page.getByRole("alert").textContent()).toContain("not this server's");
    await shot(page, "login");
    await page.getByLabel("Server token").fill(TOKEN);
    // Keyboard only: Enter submits the labelled form.
    await page.getByLabel("Server token").press("Enter");
    await page.getByRole("heading", { name: "Bots and their Boats" }).waitFor();
    // A reload keeps the tab's token: no second sign-in.
    await page.reload();
    await page.getByRole("heading", { name: "Bots and their Boats" }).waitFor();
    expect(await page.evaluate(() => sessionStorage.getItem("drydock.console.token"))).toBe(TOKEN);
  });

  it("shows a bot and its Boat, the counts, readiness, and the killed restores as recovery items", async () => {
    const gamma = page.getByTestId("bot-gamma");
    await expect.poll(() => gamma.textContent()).toContain(boxId);
    expect(await gamma.textContent()).toContain("ready");
    expect(await page.getByTestId("bot-alpha").textContent()).toContain("Bot alpha");
    await expect.poll(() => page.locator(".badge").textContent()).toMatch(/Ready/);
    const counts = await page.locator(".counts").textContent();
    expect(counts).toMatch(/3\s*Bots/);
    expect(counts).toMatch(/2\s*Open recovery items/);
    const alpha = page.getByTestId(`restore-${restores.get("alpha")}`);
    const text = await alpha.textContent();
    expect(text).toContain("locked");
    expect(text).toContain("dead");
    expect(text).toContain("abort (recommended)");
    expect(text).toContain(`restores abort ${restores.get("alpha")} --expected-seq`);
    await shot(page, "overview");

    // The filter narrows both lists.
    await page.getByLabel("Filter by bot, Boat or operation").fill("beta");
    expect(await page.getByTestId(`restore-${restores.get("alpha")}`).count()).toBe(0);
    expect(await page.getByTestId("bot-gamma").count()).toBe(0);
    expect(await page.getByTestId(`restore-${restores.get("beta")}`).count()).toBe(1);
    await page.getByLabel("Filter by bot, Boat or operation").fill("");
  });

  it("shows a restore's phase timeline with times, its dead owner and a verified chain", async () => {
    const alpha = page.getByTestId(`restore-${restores.get("alpha")}`);
    await alpha.getByRole("button", { name: "Timeline" }).click();
    const timeline = page.locator(".timeline");
    await expect.poll(() => timeline.textContent()).toContain("verified (2 events");
    const phases = await timeline.locator(".phases li .phase").allTextContents();
    expect(phases).toEqual(["created", "locked"]);
    expect(await timeline.locator(".phases time").first().getAttribute("datetime")).toMatch(
      /^\d{4}-\d\d-\d\dT/,
    );
    expect(await timeline.textContent()).toMatch(/pid \d+, dead/);
    expect(await timeline.textContent()).toContain("abort: eligible (recommended)");
    // Focus moved to the timeline's heading, for keyboard and screen-reader users.
    expect(await page.evaluate(() => document.activeElement?.id)).toBe("timeline-heading");
    await shot(page, "timeline");
    await timeline.getByRole("button", { name: "Close timeline" }).click();
  });

  it("shows the locks: the killed restore's workspace lock with its dead owner as a digest, and previews locks gc", async () => {
    const locks = page.locator("section", { has: page.getByRole("heading", { name: "Locks" }) });
    const alphaOp = restores.get("alpha")!;
    // Its workspace lock (its saga's own state lock shows beside it, under restore-sagas/).
    const row = locks.locator("tbody tr", { hasText: alphaOp }).filter({ hasText: /^locks\/ws-/ });
    await expect.poll(() => row.count()).toBe(1);
    const text = (await row.textContent()) ?? "";
    expect(text).toMatch(/^locks\/ws-[0-9a-f]{64}\.lock/);
    expect(text).toContain("workspace");
    expect(text).toMatch(/pid \d+, dead/);
    expect(text).toContain("sha256:");
    // The lock's owner token never reaches the page: only its digest.
    const owners = (await api(server.url, server.token)("GET", "/v1/locks")).json.locks;
    expect(owners.find((l: { transactionId: string | null }) => l.transactionId === alphaOp)).toMatchObject({
      purpose: "checkpoint-restore",
      alive: false,
    });
    await shot(page, "locks");
    // gc never touches a restore's dead lock: nothing to remove here, so no apply is offered.
    await locks.getByRole("button", { name: "Preview locks gc" }).click();
    const dialog = page.getByRole("dialog");
    await expect.poll(() => dialog.textContent()).toContain("no lock of a stopped workspace edit");
    expect(await dialog.getByRole("button", { name: /^Apply/ }).count()).toBe(0);
    await dialog.getByRole("button", { name: "Cancel" }).click();
    await expect.poll(() => page.getByRole("dialog").count()).toBe(0);
  });

  it("signed in with a read-only token, shows the items and previews, but the apply is refused and nothing changes", async () => {
    const operationId = restores.get("alpha")!;
    const controller = createRestoreRecoveryController({
      dataDir: data.dir,
      workspaceRoot: join(data.dir, "workspaces", "alpha"),
    });
    const before = await controller.preview(operationId);
    // A tab of its own: its own sessionStorage, so its own sign-in.
    const reader = await context.newPage();
    try {
      await signIn(reader, server.url, READER);
      const item = reader.getByTestId(`restore-${operationId}`);
      await expect.poll(() => item.textContent()).toContain("abort (recommended)");
      expect(await reader.getByTestId("bot-gamma").textContent()).toContain(boxId);
      await item.getByRole("button", { name: "Preview abort" }).click();
      const dialog = reader.getByRole("dialog", { name: `Preview: abort restore ${operationId}` });
      await expect.poll(() => dialog.textContent()).toContain(before.fence.expectedHash);
      await dialog.getByRole("button", { name: "Apply abort" }).click();
      const alert = dialog.getByRole("alert");
      await expect.poll(() => alert.textContent()).toContain("Refused (forbidden)");
      const text = await alert.textContent();
      expect(text).toContain("The token 'dash' may only read (role read); changes need an admin token.");
      expect(text).toContain("Nothing was applied");
      expect(await dialog.getByRole("button", { name: "Apply abort" }).count()).toBe(0);
      await reader.keyboard.press("Escape");
      await expect.poll(() => dialog.count()).toBe(0);
      // Still signed in (a 403 is not a wrong token), and the item is still there.
      expect(await reader.getByTestId(`restore-${operationId}`).count()).toBe(1);
    } finally {
      await reader.close();
    }
    // Nothing changed: the same saga, fence and owner.
    const after = await controller.preview(operationId);
    expect(after.fence).toEqual(before.fence);
    expect(after.saga).toEqual(before.saga);
  });

  it("previews the abort with its fence, applies it, and the item disappears", async () => {
    const operationId = restores.get("alpha")!;
    const item = page.getByTestId(`restore-${operationId}`);
    await item.getByRole("button", { name: "Preview abort" }).click();
    const dialog = page.getByRole("dialog", { name: `Preview: abort restore ${operationId}` });
    await dialog.waitFor();
    const controller = createRestoreRecoveryController({
      dataDir: data.dir,
      workspaceRoot: join(data.dir, "workspaces", "alpha"),
    });
    const { fence } = await controller.preview(operationId);
    await expect.poll(() => dialog.textContent()).toContain(fence.expectedHash);
    expect(await dialog.textContent()).toContain(`--expected-seq${fence.expectedSeq}`);
    expect(await dialog.textContent()).toContain(
      `restores abort ${operationId} --expected-seq ${fence.expectedSeq}`,
    );
    // Previewing changed nothing.
    expect((await controller.preview(operationId)).fence).toEqual(fence);
    await dialog.getByLabel("Reason (recorded in the restore's journal)").fill("console e2e");
    await shot(page, "preview", false);
    await dialog.getByRole("button", { name: "Apply abort" }).click();
    await expect
      .poll(() => page.getByRole("status").textContent())
      .toContain(`restore ${operationId} is aborted`);
    await expect.poll(() => page.getByTestId(`restore-${operationId}`).count()).toBe(0);
    const saga = await controller.preview(operationId);
    expect(saga.saga).toMatchObject({ phase: "aborted", archived: true });
  });

  it("refuses a preview that went stale, with the server's 'state changed' answer, and applies nothing", async () => {
    const operationId = restores.get("beta")!;
    await page.getByTestId(`restore-${operationId}`).getByRole("button", { name: "Preview abort" }).click();
    const dialog = page.getByRole("dialog", { name: `Preview: abort restore ${operationId}` });
    await dialog.getByRole("button", { name: "Apply abort" }).waitFor();
    // Between the preview and the click, someone else settles it (the CLI, with its own fresh fence).
    const controller = createRestoreRecoveryController({
      dataDir: data.dir,
      workspaceRoot: join(data.dir, "workspaces", "beta"),
    });
    const previewed = (await controller.preview(operationId)).fence;
    const settled = await controller.abort(operationId, { ...previewed, reason: "another operator" });
    await dialog.getByRole("button", { name: "Apply abort" }).click();
    const alert = dialog.getByRole("alert");
    await expect.poll(() => alert.textContent()).toContain("State changed (state_changed)");
    const text = await alert.textContent();
    expect(text).toContain(`Restore ${operationId} is no longer in the state you previewed`);
    expect(text).toContain(`its seq is ${settled.seq}, not ${previewed.expectedSeq}`);
    expect(text).toContain("Nothing was applied");
    // No way to repeat the apply: only a fresh preview, which now finds nothing to abort.
    expect(await dialog.getByRole("button", { name: "Apply abort" }).count()).toBe(0);
    await shot(page, "stale", false);
    await dialog.getByRole("button", { name: "Preview again" }).click();
    await expect.poll(() => dialog.textContent()).toContain("Not possible now");
    expect(await dialog.getByRole("button", { name: "Apply abort" }).count()).toBe(0);
    // The settled saga is the other operator's: one abort, not two.
    expect((await controller.preview(operationId)).saga.seq).toBe(settled.seq);
    await page.keyboard.press("Escape");
    await expect.poll(() => dialog.count()).toBe(0);
  });

  it("restores purge: a read-only token is refused, a stale preview is refused with 'state changed', a fresh one purges", async () => {
    const call = api(server.url, server.token);
    const archived = [restores.get("alpha")!, restores.get("beta")!];
    const purgeDialog = (p: Page) =>
      p.getByRole("dialog", { name: "Preview: restores purge (finished 0 or more days ago)" });
    const openPurge = async (p: Page) => {
      await p.getByLabel("Archived restores finished at least (days)").fill("0");
      await p.getByRole("button", { name: "Preview restores purge" }).click();
      const dialog = purgeDialog(p);
      await expect.poll(() => dialog.textContent()).toContain("--expected-state");
      return dialog;
    };
    // Both aborted restores are archived now: the purge's candidates.
    const first = (await call("GET", "/v1/recovery/restores/purge?olderThanDays=0")).json;
    expect(first.candidates.map((c: { operationId: string }) => c.operationId).sort()).toEqual(
      [...archived].sort(),
    );

    // Read-only: the preview shows, the apply is refused and nothing is purged.
    const reader = await context.newPage();
    try {
      await signIn(reader, server.url, READER);
      const dialog = await openPurge(reader);
      expect(await dialog.textContent()).toContain(first.stateDigest);
      await dialog.getByRole("button", { name: "Apply restores purge" }).click();
      const alert = dialog.getByRole("alert");
      await expect.poll(() => alert.textContent()).toContain("Refused (forbidden)");
      expect(await alert.textContent()).toContain("Nothing was applied");
      expect(await dialog.getByRole("button", { name: "Apply restores purge" }).count()).toBe(0);
    } finally {
      await reader.close();
    }
    expect((await call("GET", "/v1/recovery/restores/purge?olderThanDays=0")).json.stateDigest).toBe(
      first.stateDigest,
    );

    // Stale: after the preview another restore finishes and is archived, so the list it fenced moved on.
    const dialog = await openPurge(page);
    expect(await dialog.textContent()).toContain(first.stateDigest);
    expect((await call("PUT", "/v1/bots/gamma/files/a.txt", "v1")).status).toBe(201);
    const checkpointId = (await call("POST", "/v1/bots/gamma/checkpoints")).json.checkpoint.checkpointId;
    const restored = await call("POST", `/v1/bots/gamma/checkpoints/${checkpointId}/restore`);
    expect(restored.status).toBeLessThan(300);
    const moved = (await call("GET", "/v1/recovery/restores/purge?olderThanDays=0")).json;
    expect(moved.stateDigest).not.toBe(first.stateDigest);
    await dialog.getByRole("button", { name: "Apply restores purge" }).click();
    const alert = dialog.getByRole("alert");
    await expect.poll(() => alert.textContent()).toContain("State changed (state_changed)");
    expect(await alert.textContent()).toContain("Nothing was applied");
    expect(await dialog.getByRole("button", { name: "Apply restores purge" }).count()).toBe(0);
    // Nothing was purged by the refused apply.
    expect((await call("GET", "/v1/recovery/restores/purge?olderThanDays=0")).json.stateDigest).toBe(
      moved.stateDigest,
    );

    // A fresh preview fences the list as it is now; applying it purges every listed saga.
    await dialog.getByRole("button", { name: "Preview again" }).click();
    await expect.poll(() => dialog.textContent()).toContain(moved.stateDigest);
    await dialog.getByRole("button", { name: "Apply restores purge" }).click();
    await expect
      .poll(() => page.getByRole("status").textContent())
      .toContain(`Purged ${moved.candidates.length} archived restore(s).`);
    const after = (await call("GET", "/v1/recovery/restores/purge?olderThanDays=0")).json;
    expect(after.candidates).toEqual([]);
    for (const operationId of archived)
      expect((await call("GET", `/v1/restores/${operationId}`)).status).toBe(404);
  });

  it("cannot apply anything without the token, or with a wrong one", async () => {
    const operationId = restores.get("beta")!;
    const answers = await page.evaluate(
      async ({ operationId, wrong }) => {
        const body = JSON.stringify({
          fence: { expectedSeq: 1, expectedHash: `sha256:${"0".repeat(64)}`, expectedOwnerDigest: null },
        });
        const out: number[] = [];
        for (const headers of [
          { "content-type": "application/json" },
          { "content-type": "application/json", authorization: `Bearer ${wrong}` },
        ] as Record<string, string>[]) {
          const res = await fetch(`/v1/recovery/restores/${operationId}/abort`, {
            method: "POST",
            headers,
            body,
          });
          out.push(res.status);
        }
        return out;
      },
      { operationId, wrong: "w".repeat(32) },
    );
    expect(answers).toEqual([401, 401]);
  });

  it("shows a deletion in progress and refreshes itself while it is (no click needed)", async () => {
    // As a server does the moment it sends the DELETE: a prepared fence, inside its in-flight window, so the
    // plan counts it as work in progress, not as something for a person.
    await openBoatDeleteJournal({ dataDir: data.dir }).prepareBoatDeletion({
      boxId,
      name: boatName,
      ownerBotId: "gamma",
    });
    await page.getByRole("button", { name: "Refresh" }).click();
    await expect
      .poll(() => page.locator(".refresh").textContent())
      .toContain("while something is in progress");
    const row = page.getByTestId("bot-gamma");
    await expect.poll(() => row.locator('td[data-label="Deletion"]').textContent()).toContain("prepared");
    const first = await page.locator(".refresh").textContent();
    // The next "Updated" stamp comes from the page's own timer.
    await expect.poll(() => page.locator(".refresh").textContent(), { timeout: 10_000 }).not.toBe(first);
  });

  it("reads on a phone's width: no sideways scrolling, every action reachable", async () => {
    await page.setViewportSize({ width: 390, height: 844 });
    await page.reload();
    await page.getByRole("heading", { name: "Bots and their Boats" }).waitFor();
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    expect(overflow).toBeLessThanOrEqual(0);
    await shot(page, "phone");
    // Keyboard: Tab reaches the Refresh button with a visible focus ring.
    await page.keyboard.press("Tab");
    const focused = await page.evaluate(() => ({
      text: document.activeElement?.textContent,
      outline: getComputedStyle(document.activeElement).outlineStyle,
    }));
    expect(focused.text).toBe("Refresh");
    expect(focused.outline).toBe("solid");
  });
});

/**
 * The embedded boat.dev twin of a running server on `dataDir` (its address and token are in
 * embedded-boat-dev.json): its API as boat.dev's own console would call it, and its `/_sim` controls.
 */
function boatDev(dataDir: string) {
  const { apiUrl, token } = JSON.parse(readFileSync(join(dataDir, "embedded-boat-dev.json"), "utf8")) as {
    apiUrl: string;
    token: string;
  };
  const call = async (method: string, url: string, body?: unknown, headers: Record<string, string> = {}) => {
    const res = await fetch(url, {
      method,
      headers: {
        authorization: `Bearer ${token}`,
        ...(body === undefined ? {} : { "content-type": "application/json" }),
        ...headers,
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    const text = await res.text();
    expect(res.status, `boat.dev ${method} ${url}: ${text.slice(0, 300)}`).toBeLessThan(300);
    return text === "" ? null : JSON.parse(text);
  };
  const origin = new URL(apiUrl).origin;
  return {
    api: (method: string, path: string, headers?: Record<string, string>) =>
      call(method, `${apiUrl}${path}`, undefined, headers),
    sim: (method: string, path: string, body?: unknown) => call(method, `${origin}/_sim${path}`, body),
  };
}

describe("every other action the console offers, each from the real state that makes it available", () => {
  const data = tempDir("console-actions");
  const profile = mkdtempSync(join(tmpdir(), "drydock-chromium-"));
  let server: ServerChild;
  let context: BrowserContext;
  let page: Page;
  let call: ReturnType<typeof api>;
  /** The killed restores: bot → operation id. */
  const ops = new Map<string, string>();

  const restoreController = (botId: string) =>
    createRestoreRecoveryController({
      dataDir: data.dir,
      workspaceRoot: join(data.dir, "workspaces", botId),
    });
  const report = async () => (await call("GET", "/v1/recovery")).json;
  const boatItem = async (boxId: string) =>
    (await report()).boats.find((b: { boxId: string | null }) => b.boxId === boxId);
  const createComputer = async (botId: string) => {
    expect((await call("POST", "/v1/bots", { name: `Bot ${botId}`, botId })).status).toBe(201);
    const created = await call("POST", `/v1/bots/${botId}/computer`);
    expect(created.status, created.text).toBe(201);
    return created.json.computer as { boxId: string; name: string };
  };
  /** The Refresh button, then the card of `testId` as the page shows it now. */
  const card = async (testId: string) => {
    await page.getByRole("button", { name: "Refresh" }).click();
    return page.getByTestId(testId);
  };
  /**
   * Preview → apply of `action` on `testId`'s card, by mouse: the dialog named `dialogName` shows the fence
   * (`fenceText`), the apply closes it and the page's outcome sentence contains `outcome`.
   */
  const previewAndApply = async (
    testId: string,
    action: string,
    dialogName: string,
    fenceText: string,
    outcome: string,
  ) => {
    const item = await card(testId);
    await expect.poll(() => item.getByRole("button", { name: `Preview ${action}` }).count()).toBe(1);
    await item.getByRole("button", { name: `Preview ${action}` }).click();
    const dialog = page.getByRole("dialog", { name: dialogName });
    await expect.poll(() => dialog.textContent()).toContain(fenceText);
    await dialog.getByRole("button", { name: `Apply ${action}` }).click();
    await expect.poll(() => page.getByRole("status").textContent()).toContain(outcome);
    expect(await dialog.count()).toBe(0);
  };

  beforeAll(async () => {
    // Restores SIGKILLed where each of the other restore actions is the one to take.
    await killRestoreAt(data.dir, "rel", "restore.after-completed");
    await killRestoreAt(data.dir, "cmp", "restore.after-workspace-applied");
    await killRestoreAt(data.dir, "rbk", "restore.after-mutation-started");
    server = await spawnServer(data.dir, { DRYDOCK_TOKEN: TOKEN });
    call = api(server.url, server.token);
    for (const item of (await report()).restores) ops.set(item.botId, item.operationId);
    expect(
      Object.fromEntries(
        (await report()).restores.map((r: { botId: string; next: string | null }) => [r.botId, r.next]),
      ),
    ).toEqual({ rel: "release", cmp: "complete", rbk: "rollback" });
    ({ context, page } = await launchBrowser(profile));
    await signIn(page, server.url, TOKEN);
  });

  cleanUpAfter(() => ({ page, context, server }), data, profile);

  it("labels every control, and releases a completed restore by keyboard alone (Tab and Enter)", async () => {
    // Every button, input and dialog has an accessible name (axe's button-name, label, aria-dialog-name).
    const unnamed = await page.evaluate(() =>
      Array.from(document.querySelectorAll("button, input, select, textarea, dialog"))
        .filter((el) =>
          el.tagName === "BUTTON"
            ? (el.textContent ?? "").trim() === "" && !el.getAttribute("aria-label")
            : el.tagName === "DIALOG"
              ? !el.getAttribute("aria-labelledby") && !el.getAttribute("aria-label")
              : (el.labels?.length ?? 0) === 0 && !el.getAttribute("aria-label"),
        )
        .map((el) => `${el.tagName}#${el.id ?? ""}`),
    );
    expect(unnamed).toEqual([]);

    const operationId = ops.get("rel")!;
    const { fence } = await restoreController("rel").preview(operationId);
    /** Tabs until the focused control reads `text` (bounded: a control Tab never reaches fails). */
    const tabTo = async (text: string) => {
      for (let i = 0; i < 200; i += 1) {
        await page.keyboard.press("Tab");
        if ((await page.evaluate(() => document.activeElement?.textContent ?? "")) === text) return;
      }
      throw new Error(`Tab never reached a control reading "${text}"`);
    };
    await tabTo("Preview release");
    await page.keyboard.press("Enter");
    const dialog = page.getByRole("dialog", { name: `Preview: release restore ${operationId}` });
    await expect.poll(() => dialog.textContent()).toContain(fence.expectedHash);
    await tabTo("Apply release");
    await page.keyboard.press("Enter");
    await expect
      .poll(() => page.getByRole("status").textContent())
      .toContain(`release: restore ${operationId} is`);
    await expect.poll(() => page.getByTestId(`restore-${operationId}`).count()).toBe(0);
    const after = await restoreController("rel").preview(operationId);
    expect(after.saga).toMatchObject({ phase: "completed", archived: true });
    expect(after.owner).toBeNull();
  });

  it("completes a restore killed after its files were applied: the restored content stays", async () => {
    const operationId = ops.get("cmp")!;
    const { fence } = await restoreController("cmp").preview(operationId);
    await previewAndApply(
      `restore-${operationId}`,
      "complete",
      `Preview: complete restore ${operationId}`,
      fence.expectedHash,
      `complete: restore ${operationId} is completed`,
    );
    await expect.poll(async () => (await card(`restore-${operationId}`)).count()).toBe(0);
    expect((await restoreController("cmp").preview(operationId)).saga).toMatchObject({
      phase: "completed",
      archived: true,
    });
    expect((await call("GET", "/v1/bots/cmp/files/a.txt")).text).toBe("v1");
  });

  it("rolls back a restore killed after its first change began: the content before the restore is back", async () => {
    const operationId = ops.get("rbk")!;
    const { fence } = await restoreController("rbk").preview(operationId);
    await previewAndApply(
      `restore-${operationId}`,
      "rollback",
      `Preview: rollback restore ${operationId}`,
      fence.expectedHash,
      `rollback: restore ${operationId} is`,
    );
    await expect.poll(async () => (await card(`restore-${operationId}`)).count()).toBe(0);
    expect((await restoreController("rbk").preview(operationId)).saga.archived).toBe(true);
    expect((await call("GET", "/v1/bots/rbk/files/a.txt")).text).toBe("v2");
  });

  it("locks gc: removes a candidate file a dead contender left beside a lock", async () => {
    const shard = readdirSync(join(data.dir, "restore-sagas")).find((name) => name.startsWith("workspace-"));
    // A contender that died between writing its candidate and linking it (its pid has exited).
    const deadPid = spawnSync(process.execPath, ["-e", ""]).pid as number;
    const deadToken = randomUUID();
    const leftover = join(
      data.dir,
      "restore-sagas",
      shard as string,
      ".locks",
      `rel.lock.candidate-${deadPid}-${deadToken}`,
    );
    writeFileSync(
      leftover,
      `${JSON.stringify({ version: 1, pid: deadPid, token: deadToken, createdAt: Date.now() })}\n`,
    );
    await page.getByRole("button", { name: "Refresh" }).click();
    await page.getByRole("button", { name: "Preview locks gc" }).click();
    const dialog = page.getByRole("dialog", { name: "Preview: locks gc" });
    // Listed by the file's name; its token is shown only as a digest.
    await expect.poll(() => dialog.textContent()).toContain(`rel.lock.candidate-${deadPid}-sha256:`);
    expect(await dialog.textContent()).not.toContain(deadToken);
    expect(existsSync(leftover)).toBe(true);
    await dialog.getByRole("button", { name: "Apply locks gc" }).click();
    await expect.poll(() => page.getByRole("status").textContent()).toContain("Removed 1 garbage file(s)");
    expect(existsSync(leftover)).toBe(false);
  });

  it("creates adopt: a Boat the create journal forgot (the data directory restored from an older backup) is adopted", async () => {
    const journal = join(data.dir, "box-create-requests.json");
    // Taken before this bot's Boat (before any Boat here: no journal at all yet).
    const backup = existsSync(journal) ? readFileSync(journal, "utf8") : null;
    const { boxId } = await createComputer("ada");
    // The operator restores the data directory's create journal from a backup taken before that Boat.
    if (backup === null) rmSync(journal);
    else {
      writeFileSync(`${journal}.restore`, backup);
      renameSync(`${journal}.restore`, journal);
    }
    const item = await boatItem(boxId);
    expect(item).toMatchObject({ kind: "unknown_boat", attention: true, action: { name: "adopt" } });
    await previewAndApply(
      `boat-${boxId}`,
      "adopt",
      `Preview: adopt ada ${boxId}`,
      item.stateDigest,
      `adopt applied to ${boxId}`,
    );
    await expect.poll(async () => (await card(`boat-${boxId}`)).count()).toBe(0);
    expect((await call("GET", "/v1/bots/ada/computer")).json.computer).toMatchObject({
      status: "ready",
      boxId,
    });
  });

  it("creates retire: a Boat deleted at boat.dev behind drydock's back has its record retired", async () => {
    const dev = boatDev(data.dir);
    const { boxId } = await createComputer("rita");
    // Someone deletes the Boat in boat.dev's own console; the deletion finishes there.
    await dev.api("DELETE", `/sandboxes/${boxId}`, { "x-boat-confirm-delete": boxId });
    await dev.sim("POST", "/clock", { advanceMs: 600_000 });
    await expect.poll(async () => (await boatItem(boxId))?.kind).toBe("create_boat_gone");
    const item = await boatItem(boxId);
    await previewAndApply(
      `boat-${boxId}`,
      "retireCreate",
      `Preview: retireCreate rita ${boxId}`,
      item.stateDigest,
      `retireCreate applied to ${boxId}`,
    );
    await expect.poll(async () => (await card(`boat-${boxId}`)).count()).toBe(0);
    expect((await call("GET", "/v1/bots/rita/computer")).json.computer.status).toBe("none");
  });

  it("deletions retry: a DELETE boat.dev refused (the Boat was busy) is sent again, once, and the Boat is gone", async () => {
    const dev = boatDev(data.dir);
    const { boxId, name } = await createComputer("rex");
    // boat.dev refuses the DELETE (the Boat is busy): the fence is blocked.
    await dev.sim("PATCH", `/sandboxes/${boxId}`, { busy: true });
    const refused = await call("DELETE", "/v1/bots/rex/computer", { confirmName: name });
    expect(refused.json.error.code, refused.text).toBe("provider_refused");
    const blocked = await boatItem(boxId);
    expect(blocked).toMatchObject({
      kind: "deletion_fence",
      attention: true,
      facts: { fencePhase: "blocked" },
      action: { name: "retryDeletion" },
    });
    // The cause fixed in boat.dev, the person retries from the console.
    await dev.sim("PATCH", `/sandboxes/${boxId}`, { busy: false });
    const before = (await dev.sim("GET", "/stats")).deletesAccepted;
    await previewAndApply(
      `boat-${boxId}`,
      "retryDeletion",
      `Preview: retryDeletion rex ${boxId}`,
      blocked.stateDigest,
      `retryDeletion applied to ${boxId}`,
    );
    expect((await dev.sim("GET", "/stats")).deletesAccepted).toBe(before + 1);
    await expect.poll(async () => (await card(`boat-${boxId}`)).count()).toBe(0);
    expect((await call("GET", "/v1/bots/rex/computer")).json.computer.status).toBe("none");
  });

  it("deletions reconcile: a fence whose DELETE went out just before its server stopped, finished at boat.dev, is lifted without a second DELETE", async () => {
    const dev = boatDev(data.dir);
    const { boxId, name } = await createComputer("rey");
    // As a server leaves it when it stops right after sending DELETE: the fence prepared (durably, first)...
    await openBoatDeleteJournal({ dataDir: data.dir }).prepareBoatDeletion({
      boxId,
      name,
      ownerBotId: "rey",
    });
    // ...and the DELETE it sent, which boat.dev accepted and finished.
    await dev.api("DELETE", `/sandboxes/${boxId}`, { "x-boat-confirm-delete": boxId });
    await dev.sim("POST", "/clock", { advanceMs: 600_000 });
    await expect.poll(async () => (await boatItem(boxId))?.facts.provider.kind).toBe("absent");
    const fenced = await boatItem(boxId);
    expect(fenced).toMatchObject({ kind: "deletion_fence", action: { name: "reconcileDeletion" } });
    const before = (await dev.sim("GET", "/stats")).deleteRequests;
    await previewAndApply(
      `boat-${boxId}`,
      "reconcileDeletion",
      `Preview: reconcileDeletion rey ${boxId}`,
      fenced.stateDigest,
      `boat.dev proved Boat ${boxId} deleted; its deletion fence is lifted.`,
    );
    await expect.poll(async () => (await card(`boat-${boxId}`)).count()).toBe(0);
    expect((await dev.sim("GET", "/stats")).deleteRequests).toBe(before);
    expect((await call("GET", "/v1/bots/rey/computer")).json.computer.status).toBe("none");
  });
});
