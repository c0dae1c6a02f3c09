/**
 * A restore listing cut short (more pending sagas than one report lists: 64 pages of 64) must be shown, not
 * silently hidden, and the verdict must not promise a command beside items that have none. The report is
 * stubbed here: making 4,097 real sagas would take most of a minute.
 */
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it, vi } from "vitest";

vi.mock("@drydock/recovery-controller", async (importOriginal) => {
  const actual = await importOriginal<typeof import("@drydock/recovery-controller")>();
  return {
    ...actual,
    reportRestores: vi.fn(async () => ({
      restores: [],
      gaps: [
        {
          botId: "bot1",
          message: "bot bot1 has more pending restores than one report lists (4096 shown)",
        },
      ],
    })),
  };
});

const { bufferIo, main } = await import("../src/index.js");

let dir: string | undefined;
afterEach(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
  dir = undefined;
});

describe("a restore listing cut short", () => {
  it("status and restores list show the truncation as an attention line; the verdict names no command", async () => {
    dir = mkdtempSync(join(tmpdir(), "drydock-truncated-"));
    mkdirSync(join(dir, "workspaces", "bot1"), { recursive: true });

    const status = bufferIo();
    expect(await main(["status", "--data-dir", dir], { io: status, env: {} })).toBe(6);
    expect(status.out()).toContain("more pending restores than one report lists");
    const verdict = status.out().trim().split("\n").at(-1)!;
    expect(verdict).toContain("ATTENTION: 1 item(s)");
    expect(verdict).not.toContain("run the command shown beside each");
    expect(verdict).toContain("none has a command");

    const list = bufferIo();
    expect(await main(["restores", "list", "--data-dir", dir], { io: list, env: {} })).toBe(0);
    expect(list.out()).toContain("bot bot1: bot bot1 has more pending restores than one report lists");
    expect(list.out()).not.toBe("No active restore sagas.\n");
  });
});
