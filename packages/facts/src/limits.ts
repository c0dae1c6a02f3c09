/**
 * Limits of a workspace file, each defined once: the server's file routes and every workspace store
 * (local files, PostgreSQL) refuse the same inputs.
 */

/** A workspace file's path at most, in UTF-8 bytes (the file system counts bytes, not characters). */
export const MAX_PATH_BYTES = 1024;

/** A workspace file's size at most by default, in bytes (`DRYDOCK_MAX_FILE_BYTES` overrides it). */
export const DEFAULT_MAX_FILE_BYTES = 8 * 1024 * 1024;
