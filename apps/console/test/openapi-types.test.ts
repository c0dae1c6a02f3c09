/**
 * The console's client types are the server's OpenAPI document, as of now: regenerating them from the
 * current server (scripts/gen-api.ts, in-process) gives the committed src/generated/openapi.d.ts byte for
 * byte. A route schema changed without regenerating turns this red, naming the command that fixes it.
 */
import { readFileSync } from "node:fs";
import { expect, it } from "vitest";
import { GEN_COMMAND, GENERATED, generatedTypes } from "../scripts/gen-api.js";

it("src/generated/openapi.d.ts is what the current server's OpenAPI document generates", async () => {
  const fresh = await generatedTypes();
  const committed = readFileSync(GENERATED, "utf8");
  expect(
    committed === fresh,
    `src/generated/openapi.d.ts is stale: the server's OpenAPI document changed. Run \`${GEN_COMMAND}\` and commit the result.`,
  ).toBe(true);
  expect(fresh).toContain('"/v1/recovery/restores/purge"');
}, 60_000);
