import { randomUUID } from "node:crypto";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import * as facts from "../src/index.js";
import {
  BOAT_DELETION_OPERATION_ID,
  BOAT_DELETION_PHASES,
  BOAT_DELETION_STATUSES,
  BOAT_ID,
  BOT_ID,
  CHECKPOINT_ID,
  RESTORE_OPERATION_ID,
  UUID_V4,
} from "../src/index.js";

describe("id patterns", () => {
  it("BOAT_ID: bx_ and 8 of the unambiguous alphabet", () => {
    expect(BOAT_ID.test("bx_23456789")).toBe(true);
    expect(BOAT_ID.test("bx_abcdefgh")).toBe(true);
    for (const bad of ["bx_0bcdefgh", "bx_1bcdefgh", "bx_ibcdefgh", "bx_lbcdefgh", "bx_obcdefgh"]) {
      expect(BOAT_ID.test(bad), bad).toBe(false);
    }
    expect(BOAT_ID.test("bx_abcdefg")).toBe(false);
    expect(BOAT_ID.test("bx_abcdefghj")).toBe(false);
    expect(BOAT_ID.test("bx_ABCDEFGH")).toBe(false);
    expect(BOAT_ID.test("xbx_abcdefgh")).toBe(false);
  });

  it("BOT_ID: 1-120 of A-Z a-z 0-9 _ -", () => {
    expect(BOT_ID.test("a")).toBe(true);
    expect(BOT_ID.test("-leading-dash_ok")).toBe(true);
    expect(BOT_ID.test("x".repeat(120))).toBe(true);
    expect(BOT_ID.test("x".repeat(121))).toBe(false);
    expect(BOT_ID.test("")).toBe(false);
    expect(BOT_ID.test("a.b")).toBe(false);
    expect(BOT_ID.test("a/b")).toBe(false);
    expect(BOT_ID.test("a\n")).toBe(false);
  });

  it("BOAT_DELETION_OPERATION_ID: bdop_ and 32 lowercase hex", () => {
    expect(BOAT_DELETION_OPERATION_ID.test(`bdop_${"a".repeat(32)}`)).toBe(true);
    expect(BOAT_DELETION_OPERATION_ID.test(`bdop_${"A".repeat(32)}`)).toBe(false);
    expect(BOAT_DELETION_OPERATION_ID.test(`bdop_${"a".repeat(31)}`)).toBe(false);
    expect(BOAT_DELETION_OPERATION_ID.test(`bdop_${"a".repeat(33)}`)).toBe(false);
  });

  it("CHECKPOINT_ID accepts what the checkpoint store writes (ckpt-<uuid>) and refuses a leading _ or -", () => {
    expect(CHECKPOINT_ID.test(`ckpt-${randomUUID()}`)).toBe(true);
    expect(CHECKPOINT_ID.test("A")).toBe(true);
    expect(CHECKPOINT_ID.test(`a${"b".repeat(127)}`)).toBe(true);
    expect(CHECKPOINT_ID.test(`a${"b".repeat(128)}`)).toBe(false);
    expect(CHECKPOINT_ID.test("-rf")).toBe(false);
    expect(CHECKPOINT_ID.test("_x")).toBe(false);
    expect(CHECKPOINT_ID.test("")).toBe(false);
    expect(CHECKPOINT_ID.test("a/../b")).toBe(false);
  });

  it("CHECKPOINT_ID is stricter than the HTTP edge's old pattern: everything it accepts, the old one did", () => {
    const old = /^[A-Za-z0-9_-]{1,128}$/;
    for (const id of [`ckpt-${randomUUID()}`, "a", "Z9_-", `a${"b".repeat(127)}`]) {
      expect(CHECKPOINT_ID.test(id) && old.test(id), id).toBe(true);
    }
  });

  it("RESTORE_OPERATION_ID: a letter or digit, then up to 127 of A-Z a-z 0-9 _ -", () => {
    expect(RESTORE_OPERATION_ID.test(randomUUID())).toBe(true);
    expect(RESTORE_OPERATION_ID.test("op-1")).toBe(true);
    expect(RESTORE_OPERATION_ID.test(`a${"b".repeat(128)}`)).toBe(false);
    expect(RESTORE_OPERATION_ID.test("-op")).toBe(false);
    expect(RESTORE_OPERATION_ID.test(`bdop_${"a".repeat(32)}`)).toBe(true);
  });

  it("UUID_V4: lower-case version 4 only", () => {
    expect(UUID_V4.test(randomUUID())).toBe(true);
    expect(UUID_V4.test(randomUUID().toUpperCase())).toBe(false);
    expect(UUID_V4.test("00000000-0000-1000-8000-000000000000")).toBe(false);
    expect(UUID_V4.test("00000000-0000-4000-c000-000000000000")).toBe(false);
  });

  it("every pattern is anchored and stateless (no g or y flag)", () => {
    for (const [name, value] of Object.entries(facts)) {
      if (!(value instanceof RegExp)) continue;
      expect(value.source.startsWith("^") && value.source.endsWith("$"), name).toBe(true);
      expect(value.global || value.sticky, name).toBe(false);
    }
  });
});

describe("data-directory names", () => {
  it("are the on-disk names (part of the format; they never change)", () => {
    expect(facts.BOTS_FILE).toBe("bots.json");
    expect(facts.CREATE_JOURNAL_FILE).toBe("box-create-requests.json");
    expect(facts.CREATE_JOURNAL_LOCK_FILE).toBe("box-create-requests.lock");
    expect(facts.DELETE_JOURNAL_FILE).toBe("box-delete-requests.json");
    expect(facts.DELETE_JOURNAL_LOCK_FILE).toBe("box-delete-requests.lock");
    expect(facts.RESTORE_SAGAS_DIR).toBe("restore-sagas");
    expect(facts.CHECKPOINTS_DIR).toBe("checkpoints");
    expect(facts.RESTORE_STAGING_DIR).toBe("restore-staging");
    expect(facts.WORKSPACES_DIR).toBe("workspaces");
    expect(facts.LOCKS_DIR).toBe("locks");
    expect(facts.ENVIRONMENT_ID_FILE).toBe("environment-id");
    expect(facts.SERVER_TOKEN_FILE).toBe("server-token");
    expect(facts.PROVIDER_BINDING_FILE).toBe("boat-provider");
    expect(facts.EMBEDDED_PROVIDER_FILE).toBe("embedded-boat-dev.json");
    expect(facts.EMBEDDED_PROVIDER_LOCK_FILE).toBe("embedded-boat-dev.lock");
    expect(facts.STORAGE_BINDING_FILE).toBe("storage.json");
  });

  it("are distinct plain names (no separator, no duplicates)", () => {
    const names = Object.entries(facts)
      .filter(([key, value]) => typeof value === "string" && /_(FILE|DIR)$/.test(key))
      .map(([, value]) => value as string);
    expect(names.length).toBe(16);
    expect(new Set(names).size).toBe(names.length);
    for (const name of names) expect(name, name).toMatch(/^[a-z0-9][a-z0-9.-]*$/);
  });
});

describe("phase sets", () => {
  it("deletion fence phases and operation statuses", () => {
    expect(BOAT_DELETION_PHASES).toEqual(["prepared", "accepted", "blocked"]);
    expect(BOAT_DELETION_STATUSES).toEqual(["pending", "processing", "blocked", "completed"]);
  });
});

describe("a leaf", () => {
  it("imports nothing of drydock and has no dependencies", () => {
    const root = join(import.meta.dirname, "..");
    const pkg = JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as Record<string, unknown>;
    expect(pkg.dependencies ?? {}).toEqual({});
    for (const file of readdirSync(join(root, "src"))) {
      const text = readFileSync(join(root, "src", file), "utf8");
      expect(text, file).not.toMatch(/from\s+["'](?!\.\/)/);
    }
  });
});
