/**
 * What an OS-level refusal means and what to do, per errno (the wording @drydock/storage's `osFailure` uses).
 * A detail built here starts with OS_REFUSED, and `isNotDamaged` treats it as not damaged: the file's bytes
 * are fine, so nothing sends a person to repair it.
 */
export const OS_REFUSED = "not writable right now";

const OS_CAUSES: Record<string, { what: string; todo: string }> = {
  ENOSPC: { what: "the disk is full", todo: "free space on the file system holding it and retry" },
  EDQUOT: { what: "the disk quota is exhausted", todo: "raise the quota or free space, then retry" },
  EROFS: {
    what: "the data directory is on a read-only file system",
    todo: "remount it read-write, then retry",
  },
  EACCES: {
    what: "permission was denied",
    todo: "the server's user cannot write it: check its owner and mode",
  },
  EPERM: { what: "the operation was not permitted", todo: "check its owner, mode and attributes" },
  EMFILE: { what: "too many open files", todo: "raise the limit (LimitNOFILE) or retry" },
  ENFILE: { what: "the system has too many open files", todo: "raise the limit or retry" },
  ENOMEM: { what: "the system is out of memory", todo: "retry in a moment" },
  EIO: { what: "the disk reported an I/O error", todo: "check the disk's health; retry once it is sound" },
  EBUSY: { what: "the file system was busy", todo: "retry in a moment" },
  ENAMETOOLONG: { what: "a path is too long for the file system", todo: "use a shorter data directory path" },
};

function errnoIn(error: unknown, depth = 0): string | undefined {
  if (depth > 4 || typeof error !== "object" || error === null) return undefined;
  const code = (error as { code?: unknown }).code;
  if (typeof code === "string" && code in OS_CAUSES) return code;
  return errnoIn((error as { cause?: unknown }).cause, depth + 1);
}

/** The detail for an OS refusal found in `error` or its causes, or undefined when there is none. */
export function osCauseDetail(error: unknown): string | undefined {
  const errno = errnoIn(error);
  if (errno === undefined) return undefined;
  const c = OS_CAUSES[errno] as { what: string; todo: string };
  return `${OS_REFUSED}: ${c.what} (${errno}); nothing was changed and the file is as it was. To continue, ${c.todo}`;
}
