import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";

/**
 * WCAG 2.1 contrast of the console's palette (src/styles.css), in the light and the dark scheme: every text
 * colour on every surface it is drawn on at least 4.5:1 (AA for normal text), the focus ring at least 3:1
 * against the page (AA for non-text). Read from the stylesheet itself, so a colour changed there is checked
 * here. (Panel borders are decorative, and not held to 3:1.)
 */
const css = readFileSync(new URL("../src/styles.css", import.meta.url), "utf8");

function scheme(block: string): Record<string, string> {
  const vars: Record<string, string> = {};
  for (const match of block.matchAll(/--([a-z-]+):\s*(#[0-9a-fA-F]{6})\s*;/g)) vars[match[1]!] = match[2]!;
  return vars;
}

const light = scheme(css.slice(css.indexOf(":root {"), css.indexOf("@media (prefers-color-scheme: dark)")));
const darkStart = css.indexOf("@media (prefers-color-scheme: dark)");
const dark = { ...light, ...scheme(css.slice(darkStart, css.indexOf("}\n}", darkStart))) };

function luminance(hex: string): number {
  const channel = (i: number) => {
    const c = Number.parseInt(hex.slice(1 + 2 * i, 3 + 2 * i), 16) / 255;
    return c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4;
  };
  return 0.2126 * channel(0) + 0.7152 * channel(1) + 0.0722 * channel(2);
}

function contrast(a: string, b: string): number {
  const [hi, lo] = [luminance(a), luminance(b)].sort((x, y) => y - x) as [number, number];
  return (hi + 0.05) / (lo + 0.05);
}

const TEXT = ["fg", "muted", "accent", "danger", "ok", "warn"];
const SURFACES = ["bg", "panel"];

describe.each([
  ["light", light],
  ["dark", dark],
])("the %s scheme", (_name, vars) => {
  it("defines every colour the checks need", () => {
    for (const name of [...TEXT, ...SURFACES, "accent-fg", "focus", "border"])
      expect(vars[name], name).toMatch(/^#[0-9a-fA-F]{6}$/);
  });

  it("text colours on the page and on panels are at least 4.5:1", () => {
    for (const text of TEXT)
      for (const surface of SURFACES)
        expect(contrast(vars[text]!, vars[surface]!), `${text} on ${surface}`).toBeGreaterThanOrEqual(4.5);
  });

  it("text on an accent (primary) button is at least 4.5:1", () => {
    expect(contrast(vars["accent-fg"]!, vars.accent!)).toBeGreaterThanOrEqual(4.5);
  });

  it("the focus ring is at least 3:1 against the page and panels", () => {
    for (const surface of SURFACES)
      expect(contrast(vars.focus!, vars[surface]!), `focus on ${surface}`).toBeGreaterThanOrEqual(3);
  });
});
