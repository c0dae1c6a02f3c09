/**
 * What an OS-level refusal means and what to do, per errno (the wording @drydock/storage's `osFailure` uses).
 * A detail built here starts with OS_REFUSED, and `isNotDamaged` treats it as not damaged: the file's bytes
 * are fine, so nothing sends a person to repair it.
 */
export const OS_REFUSED = "not writable right now";

/** What an OS refusal means, what to do, and whether the same call may succeed unchanged later. */
export interface OsCause {
  what: string;
  todo: string;
  retryable: boolean;
}

/**
 * Every OS-level refusal drydock explains, per errno: the one table the journals' details and
 * @drydock/storage's `osFailure` messages are written from.
 */
export const OS_CAUSES: Readonly<Record<string, OsCause>> = {
  ENOSPC: { what: "the disk is full", todo: "free space on that file system, then retry", retryable: true },
  EDQUOT: {
    what: "the disk quota is exhausted",
    todo: "raise the quota or free space, then retry",
    retryable: true,
  },
  EROFS: {
    what: "the file system is read-only",
    todo: "remount it read-write, then retry",
    retryable: false,
  },
  EACCES: {
    what: "permission was denied",
    todo: "give the user running drydock read and write access to the data directory, then retry",
    retryable: false,
  },
  EPERM: {
    what: "the operation was not permitted",
    todo: "check the data directory's ownership and attributes, then retry",
    retryable: false,
  },
  EMFILE: {
    what: "this process has too many open files",
    todo: "retry in a moment, or raise the open-file limit (LimitNOFILE)",
    retryable: true,
  },
  ENFILE: {
    what: "the system has too many open files",
    todo: "retry in a moment, or raise the open-file limit",
    retryable: true,
  },
  ENOMEM: { what: "the system is out of memory", todo: "retry in a moment", retryable: true },
  EIO: {
    what: "the disk reported an I/O error",
    todo: "check the disk's health; retry once it is sound",
    retryable: true,
  },
  EBUSY: { what: "the file system was busy", todo: "retry in a moment", retryable: true },
  ENAMETOOLONG: {
    what: "a path is too long for the file system",
    todo: "use a shorter data directory path",
    retryable: false,
  },
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
  const c = OS_CAUSES[errno] as OsCause;
  return `${OS_REFUSED}: ${c.what} (${errno}); nothing was changed and the file is as it was. To continue, ${c.todo}`;
}
