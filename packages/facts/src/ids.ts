/**
 * The id patterns drydock checks, each defined once. Every pattern is anchored and matches the whole
 * string; a layer that needs a zod schema builds it with `z.string().regex(PATTERN)`.
 */

/** boat.dev's Boat id (`boxId`, the API's "computer" id): `bx_` + 8 characters of an alphabet without look-alikes (0, 1, i, l, o). */
export const BOAT_ID = /^bx_[23456789abcdefghjkmnpqrstuvwxyz]{8}$/;

/** A bot id: 1–120 of `A–Z a–z 0–9 _ -`. The journals, `bots.json` and the HTTP API accept exactly these. */
export const BOT_ID = /^[A-Za-z0-9_-]{1,120}$/;

/** boat.dev's deletion operation id (a DELETE's receipt): `bdop_` + 32 lowercase hex. */
export const BOAT_DELETION_OPERATION_ID = /^bdop_[a-f0-9]{32}$/;

/**
 * A restore's operation id (the saga's name, also its request id): an ASCII letter or digit, then up to 127
 * of `A–Z a–z 0–9 _ -`. Not to be confused with {@link BOAT_DELETION_OPERATION_ID}.
 */
export const RESTORE_OPERATION_ID = /^[a-zA-Z0-9][a-zA-Z0-9_-]{0,127}$/;

/**
 * A checkpoint id: an ASCII letter or digit, then up to 127 of `A–Z a–z 0–9 _ -`.
 *
 * Two patterns existed: the checkpoint store's (this one) and the HTTP edge's `^[A-Za-z0-9_-]{1,128}$`,
 * which also let through ids starting with `_` or `-` that the store refuses. The store writes
 * `ckpt-<uuid v4>`, which both accept; this, the stricter one, is the one every reader accepts, and it
 * keeps an id from ever looking like a command-line option.
 */
export const CHECKPOINT_ID = /^[a-zA-Z0-9][a-zA-Z0-9_-]{0,127}$/;

/**
 * A lower-case UUID v4: boat.dev idempotency keys, the installation's environment id and lock tokens.
 */
export const UUID_V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
