import { createHash } from "node:crypto";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { botSlug, classifyName, legacyBoatName, scopedBoatName } from "./names.js";

const ENV = "6f1c2d3e-4b5a-4c6d-8e7f-0a1b2c3d4e5f";
const sha = (value: string) => createHash("sha256").update(value).digest("hex");

describe("boatNameFor", () => {
  it("is ogb- + 12 hex of sha256(environmentId) + slug + 6 hex of sha256(botId)", () => {
    expect(scopedBoatName(ENV, "Support_Bot-42")).toBe(
      `ogb-${sha(ENV).slice(0, 12)}-supportb-${sha("Support_Bot-42").slice(0, 6)}`,
    );
  });

  it("lower-cases, strips non-[a-z0-9] and keeps the first 8 characters of the slug", () => {
    expect(botSlug("A_b-C_d-E_f-G_h-I")).toBe("abcdefgh");
    expect(botSlug("x")).toBe("x");
  });

  it("falls back to 'bot' when nothing of the id survives the slug", () => {
    expect(botSlug("___--_")).toBe("bot");
    expect(scopedBoatName(ENV, "_-_")).toMatch(/^ogb-[0-9a-f]{12}-bot-[0-9a-f]{6}$/);
  });

  it("legacy names have no scope part", () => {
    expect(legacyBoatName("Support_Bot-42")).toBe(`ogb-supportb-${sha("Support_Bot-42").slice(0, 6)}`);
  });

  it("classifies this installation's, another installation's and legacy names", () => {
    expect(classifyName(ENV, scopedBoatName(ENV, "bot1"))).toBe("scoped");
    expect(classifyName(ENV, scopedBoatName("another-env", "bot1"))).toBe("foreign");
    expect(classifyName(ENV, legacyBoatName("bot1"))).toBe("legacy");
    expect(classifyName(ENV, "my laptop")).toBe("foreign");
    expect(classifyName(ENV, null)).toBe("foreign");
  });

  it("property: every bot id yields a valid provider name that is classified as scoped", () => {
    fc.assert(
      fc.property(fc.stringMatching(/^[A-Za-z0-9_-]{1,120}$/), fc.uuid(), (botId, env) => {
        const name = scopedBoatName(env, botId);
        expect(name.length).toBeLessThanOrEqual(100);
        expect(name).toMatch(/^ogb-[0-9a-f]{12}-[a-z0-9]{1,8}-[0-9a-f]{6}$/);
        expect(classifyName(env, name)).toBe("scoped");
        expect(classifyName(env, legacyBoatName(botId))).toBe("legacy");
        expect(scopedBoatName(env, botId)).toBe(name);
      }),
    );
  });
});
