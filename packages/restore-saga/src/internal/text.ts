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
