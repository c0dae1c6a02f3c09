/**
 * The words of a printed command. Here, not in report.ts, so the restore controller can use them too
 * (report.ts imports the controller).
 */

/** A word a POSIX shell reads as itself: unchanged when it is plain, else single-quoted. */
export function shellQuote(value: string): string {
  return /^[A-Za-z0-9_./:=@%+-]+$/.test(value) ? value : `'${value.replace(/'/g, `'\\''`)}'`;
}

/** `drydock --data-dir <dir>`: the start of every command printed for that data directory. */
export function drydockCommandPrefix(dataDir: string): string {
  return `drydock --data-dir ${shellQuote(dataDir)}`;
}
