/** Row shapes shared by the journal suites: the create body the lifecycle sends and deterministic Boat ids. */
export const CREATE_BODY = { ttlSeconds: 28_800, noEnv: true };
export const BODY = JSON.stringify(CREATE_BODY);
const ALPHABET = "23456789abcdefghjkmnpqrstuvwxyz";

/** A valid, distinct Boat id for every `i` (bx_ + 8 characters of boat.dev's alphabet). */
export function boatId(i: number): string {
  let s = "";
  let n = i;
  for (let k = 0; k < 8; k++) {
    s += ALPHABET[n % ALPHABET.length];
    n = Math.floor(n / ALPHABET.length);
  }
  return `bx_${s}`;
}
