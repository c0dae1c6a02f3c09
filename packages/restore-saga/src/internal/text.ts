/**
 * Text from outside (an error's message, a caller's reason) made fit for a message or an event: control
 * characters become spaces, the ends are trimmed, the rest cut at `max`; empty becomes `fallback`.
 */
export function boundedText(value: unknown, fallback: string, max: number): string {
  const text = String(value ?? "")
    .replace(/[\u0000-\u001f\u007f]/g, " ")
    .trim();
  return (text || fallback).slice(0, max);
}

/**
 * What a zod refusal found, for a message: up to three issues as `path: message` (the path of an unknown
 * key is the object's, and the message names the key), the rest counted. Values are never quoted, so nothing a caller passed is echoed.
 */
export function issuesText(issues: readonly { path: readonly PropertyKey[]; message: string }[]): string {
  const shown = issues.slice(0, 3).map((issue) => {
    const where = issue.path.map(String).join(".") || "(the evidence)";
    return boundedText(`${where}: ${issue.message}`, "invalid", 160);
  });
  const more = issues.length > 3 ? `; ${issues.length - 3} more` : "";
  return `${shown.join("; ")}${more}`;
}
