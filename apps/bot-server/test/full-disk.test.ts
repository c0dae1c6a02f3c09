import { writeFileSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openBotRegistry } from "../src/bots.js";
import { mountTmpfs, unmountTmpfs } from "./helpers.js";

// A REAL full disk: a 64 KiB tmpfs, filled. Needs root (CAP_SYS_ADMIN); fails (never skips) without it.
const dir = `/tmp/drydock-full-disk-${process.pid}`;

beforeAll(() => {
  mountTmpfs(dir, "64k");
  try {
    writeFileSync(`${dir}/fill`, Buffer.alloc(1024 * 1024));
  } catch {
    // ENOSPC: the disk is now full, as intended.
  }
});

afterAll(() => {
  unmountTmpfs(dir);
});

describe("the bot registry on a full disk", () => {
  it("names the full disk and never says 'repair' or 'lock is unavailable'", async () => {
    const registry = openBotRegistry(`${dir}/data`);
    const error = (await registry.list().catch((e: unknown) => e)) as Error & { status?: number };
    expect(error).toBeInstanceOf(Error);
    expect(error.message).toContain("ENOSPC");
    expect(error.message).not.toMatch(/repair|invalid|lock is unavailable/i);
    expect(error.status).toBe(503);
  });
});
