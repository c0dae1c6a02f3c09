import { readFileSync } from "node:fs";
import { join } from "node:path";
import { PROVIDER_BINDING_FILE } from "@drydock/facts";

/**
 * Which boat.dev a data directory's journals describe. Its create and delete journals name Boats of one
 * provider; read against another, every one of them looks gone (and recovery would offer to retire rows
 * whose Boats still bill), and Boats made by each provider under one bot id leave one of them unknown to
 * every journal. So the bot server binds a data directory to its provider on first start
 * (`<dataDir>/boat-provider`, one line: `embedded` or the API base URL without credentials or query), and
 * the server and `drydock` refuse a provider other than the bound one. A directory from before the binding
 * is bound by its next start: its history cannot be told (one that ran the simulator first may have moved
 * to the real boat.dev since, as older versions allowed), so nothing is guessed.
 */
export { PROVIDER_BINDING_FILE };

/** A provider as the binding names it: `embedded`, or `<scheme>//<host><path>` of its API base URL. */
export function providerIdentity(apiUrl: string | null): string {
  if (apiUrl === null) return "embedded";
  try {
    const url = new URL(apiUrl);
    return `${url.protocol}//${url.host}${url.pathname.replace(/\/+$/, "")}`;
  } catch {
    return apiUrl.replace(/\/+$/, "");
  }
}

/** The provider a data directory is bound to, or null when it is not bound yet. */
export function readProviderBinding(dataDir: string): string | null {
  let text: string;
  try {
    // Quotes a person may have typed around the line are not part of it.
    text = readFileSync(join(dataDir, PROVIDER_BINDING_FILE), "utf8")
      .trim()
      .replace(/^(["'])(.*)\1$/, "$2");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw error;
    return null;
  }
  return providerIdentity(text === "embedded" ? null : text);
}

/**
 * Why `identity` must not be used on this data directory (a person-readable sentence naming both
 * providers and the way to rebind), or null when it may (it is the bound one, or nothing is bound yet).
 */
export function providerMismatch(dataDir: string, identity: string): string | null {
  const bound = readProviderBinding(dataDir);
  if (bound === null || bound === identity) return null;
  const name = (id: string) =>
    id === "embedded" ? "the bot server's embedded simulator" : `boat.dev at ${id}`;
  return `This data directory's journals describe the Boats of ${name(bound)}, not of ${name(identity)}: read against another provider every Boat they name looks gone, and Boats made by two providers for one bot leave one that no journal knows, still billed. Use ${name(bound)}, or another data directory. To move this one to ${name(identity)}: settle everything open against ${name(bound)} (drydock status and reconcile show it${bound === "embedded" ? ", while the bot server that runs the simulator is up" : ""}), stop every server on this directory, then replace the line in ${join(dataDir, PROVIDER_BINDING_FILE)} with ${identity} (without quotes).`;
}
